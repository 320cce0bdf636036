"""What a thread's `meta.media_checked` records of its media (DESIGN §3): written by the
media check (pipeline/media), read by whatever compares media by their bytes (dedup's
content key). A meta key of the thread, so its readers need not import the check."""

from __future__ import annotations

from typing import Any

CHECKED_META = "media_checked"
"""`meta.media_checked`: one entry per media of the thread, in order (message by message):
`{"sha256", "bytes", "mime"}` (the MIME its bytes show; `root`, the media root its path
was found under when not beside its input file; `source`, the reference as the source
wrote it, when the copy mode rewrote it), or null for a media left unread. A video given
as frames has `{"frames": [entry per frame], "sha256", "bytes", "source"}`: each frame's
entry as an image's, the sha256 of the frames' digests in order (dedup's key), their
bytes in all (both only when every frame was read)."""


def media_meta_sha(meta: Any) -> list[str | None] | None:
    """The sha256 of each media of a thread as `meta.media_checked` records it (None for a
    media left unread), or None when the thread was not checked."""
    entries = meta.get(CHECKED_META) if isinstance(meta, dict) else None
    if not isinstance(entries, list):
        return None
    return [e.get("sha256") if isinstance(e, dict) else None for e in entries]
