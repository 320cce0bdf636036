"""The `stages.media` slice of a run config (and `mms convert`'s media options): whether
the media threads refer to are checked, copied into the output, and fetched when they
are URLs; the limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.stages.contract import OMITTED, ConfigSlice, plain_settings

MAX_BYTES = 64 << 20
"""Default largest media file (64 MiB): a bigger one is quarantined (`media_too_large`)."""
MAX_PIXELS = 89_478_485
"""Default largest image in pixels (Pillow's own decompression-bomb limit)."""
TIMEOUT = 30.0
"""Default seconds a fetched URL may take to answer (`fetch: true`)."""


@dataclass(frozen=True, slots=True)
class MediaSettings:
    """`check`: read every media a kept thread refers to (local path, base64 data; URLs
    only with `fetch`) and quarantine its record when one is missing, outside its input's
    folder, not the kind it claims, undecodable or over the limits. `copy`: write each
    distinct media once into the output's `media/` (named by its sha256) and point the
    threads there (implies reading them). `fetch`: also fetch URLs (http(s) with
    `timeout`; s3, gs, az, hf through the object stores), never otherwise."""

    check: bool = True
    copy: bool = False
    fetch: bool = False
    max_bytes: int = MAX_BYTES
    max_pixels: int = MAX_PIXELS
    timeout: float = TIMEOUT

    @property
    def reads(self) -> bool:
        """Whether media are read at all (checked, or copied)."""
        return self.check or self.copy


def _plain(settings: MediaSettings, _recorded: Any) -> Any:
    """The resolved form: left out when every setting is the default, so the manifests of
    runs that never met the slice (text-only data) keep their bytes."""
    if settings == MediaSettings():
        return OMITTED
    return plain_settings(settings)


CONFIG = ConfigSlice("media", MediaSettings, plain=_plain)
