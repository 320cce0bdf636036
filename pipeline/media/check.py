"""The media check of a record's threads (DESIGN §3): every media read (pipeline/media/
resolve.py), sniffed (sniff.py) and decoded (decode.py), its sha256 recorded in the thread's
`meta.media_checked`; in copy mode written once under its content address and the thread
pointed there. The first media that fails quarantines the whole record (MediaProblem)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import tempfile
from collections import Counter, OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.media.decode import Corrupt, TooManyPixels, check_decodes
from pipeline.media.resolve import MediaProblem, NotRead, read_media, reference
from pipeline.media.settings import MediaRoot, MediaSettings
from pipeline.media.sniff import HEAD_BYTES, sniff
from pipeline.mms import Media, Thread
from pipeline.mms.media_checked import CHECKED_META
from pipeline.output.files import mark_written

MEDIA_DIR = "media"
"""Where copied media live, relative to the output: `media/<sha256>.<ext>`."""
CONTENT_ADDRESS = re.compile(rf"{MEDIA_DIR}/(?P<sha256>[0-9a-f]{{64}})\.[a-z0-9]{{1,8}}")
"""A media path that is a content address: `media/<sha256>.<ext>`."""
CACHE = 4096
"""Media outcomes remembered per checker (by reference), so a media that many threads of
a part share (the sides of a pair) is read once."""


@dataclass(frozen=True, slots=True)
class Checked:
    """A media that passed: its sha256, size, the MIME its bytes show, its file extension,
    the media root it was found under (None: beside its input file, or not a path)."""

    sha256: str
    bytes: int
    mime: str
    ext: str
    root: str | None = None

    @property
    def copy_name(self) -> str:
        """Its content-addressed name under media/."""
        return f"{self.sha256}.{self.ext}"


class MediaChecker:
    """Checks the media of each record's threads as they are read; `store` (copy mode): the
    folder the media are written to (each under its content address, atomically: any
    number of workers may write the same name); `roots`: the media roots a path not beside
    its input file is looked for under, in order."""

    def __init__(
        self,
        settings: MediaSettings,
        store: Path | None = None,
        roots: tuple[MediaRoot, ...] = (),
    ):
        self.settings = settings
        self.roots = roots
        self.store = store if settings.stages_copies else None
        self._seen: OrderedDict[tuple[str, Media], Checked | NotRead | MediaProblem] = OrderedDict()
        self.copied: dict[str, int] = {}
        """Each copy this checker wrote or found (its name under media/), with its bytes."""

    def check(self, threads: list[Thread], input_path: str) -> list[Thread]:
        """The threads with their media checked (and, copying, rewritten); raises
        MediaProblem naming the thread, message and media of the first that fails."""
        return [self._thread(thread, input_path) for thread in threads]

    def _thread(self, thread: Thread, input_path: str) -> Thread:
        if not any(message.media for message in thread.messages):
            return thread
        entries: list[dict[str, Any] | None] = []
        unread: Counter[str] = Counter()
        messages = []
        for index, message in enumerate(thread.messages):
            kept = []
            for position, media in enumerate(message.media):
                where = (
                    f"thread {thread.id}, messages[{index}] ({message.role}), "
                    f"{media.kind} {position + 1} of {len(message.media)}"
                )
                entry, media = self._checked(media, input_path, where, unread)
                entries.append(entry)
                kept.append(media)
            messages.append(dataclasses.replace(message, media=tuple(kept)) if kept else message)
        meta = dict(thread.meta)
        meta[CHECKED_META] = entries
        if unread:
            notes = list(meta.get("notes") or [])
            for why, count in sorted(unread.items()):
                notes.append(f"{count} media not checked: {why}")
            meta["notes"] = notes
        return dataclasses.replace(thread, messages=messages, meta=meta)

    def _checked(
        self, media: Media, input_path: str, where: str, unread: Counter[str]
    ) -> tuple[dict[str, Any] | None, Media]:
        """A media's `media_checked` entry (None: left unread, its why counted in
        `unread`) and the media as the thread keeps it (copying: at its content address);
        a video given as frames has each frame checked as an image, and its entry lists
        theirs. Raises MediaProblem naming `where` (and the frame) and the reference."""
        if media.frames:
            return self._frames_checked(media, input_path, where, unread)
        outcome = self._outcome(media, input_path)
        if isinstance(outcome, MediaProblem):
            raise MediaProblem(outcome.code, f"{where}, {reference(media)}: {outcome.why}")
        if isinstance(outcome, NotRead):
            unread[outcome.why] += 1
            return None, media
        entry: dict[str, Any] = {
            "sha256": outcome.sha256,
            "bytes": outcome.bytes,
            "mime": outcome.mime,
        }
        if outcome.root is not None:
            entry["root"] = outcome.root
        if self.store is not None:
            entry["source"] = media.to_part()
            media = Media(media.kind, path=f"{MEDIA_DIR}/{outcome.copy_name}")
        return entry, media

    def _frames_checked(
        self, video: Media, input_path: str, where: str, unread: Counter[str]
    ) -> tuple[dict[str, Any], Media]:
        """A video given as frames: each frame checked as an image is, in order. Its
        entry holds each frame's (`frames`; null for one left unread) and, every frame
        read, a `sha256` of the frames' digests in order and their `bytes` in all, so
        the same frames are the same video (dedup) whatever their names."""
        entries: list[dict[str, Any] | None] = []
        frames: list[Media] = []
        skipped: Counter[str] = Counter()
        count = len(video.frames)
        for number, frame in enumerate(video.frames):
            shown = f"{where}, frame {number + 1} of {count}"
            entry, frame = self._checked(frame, input_path, shown, skipped)
            entries.append(entry)
            frames.append(frame)
        for why, many in skipped.items():
            unread[f"{why} (video frames)"] += many
        checked: dict[str, Any] = {}
        if all(entry is not None for entry in entries):
            digests = "\n".join(str(entry["sha256"]) for entry in entries if entry is not None)
            checked["sha256"] = hashlib.sha256(digests.encode()).hexdigest()
            checked["bytes"] = sum(int(entry["bytes"]) for entry in entries if entry is not None)
        checked["frames"] = entries
        if self.store is not None:
            checked["source"] = video.to_part()
            for entry in entries:
                if entry is not None:
                    entry.pop("source", None)
        return checked, dataclasses.replace(video, frames=tuple(frames))

    def _outcome(self, media: Media, input_path: str) -> Checked | NotRead | MediaProblem:
        key = (input_path if media.path is not None else "", media)
        found = self._seen.get(key)
        if found is None:
            try:
                found = self._read(media, input_path)
            except MediaProblem as problem:
                found = problem
            self._seen[key] = found
            if len(self._seen) > CACHE:
                self._seen.popitem(last=False)
        return found

    def _read(self, media: Media, input_path: str) -> Checked | NotRead:
        read = read_media(media, input_path, self.settings, self.roots)
        if isinstance(read, NotRead):
            return read
        data = read.data
        limit = self.settings.max_bytes
        if len(data) > limit:
            raise MediaProblem("media_too_large", f"more than {limit:,} bytes")
        sniffed = sniff(data[:HEAD_BYTES])
        if sniffed is None:
            shown = data[:8].hex(" ") if data else "nothing"
            raise MediaProblem("media_kind", f"not a known {media.kind} file (starts {shown})")
        if media.kind not in sniffed.kinds:
            raise MediaProblem(
                "media_kind", f"claims to be {media.kind}, its bytes are {sniffed.container}"
            )
        try:
            check_decodes(data, sniffed, self.settings.max_pixels)
        except TooManyPixels as err:
            raise MediaProblem("media_too_large", str(err)) from None
        except Corrupt as err:
            raise MediaProblem("media_corrupt", str(err)) from None
        root = read.root.name if read.root is not None else None
        digest = hashlib.sha256(data).hexdigest()
        checked = Checked(digest, len(data), sniffed.mime, sniffed.ext, root)
        if self.store is not None:
            write_once(self.store / checked.copy_name, data)
            self.copied[checked.copy_name] = checked.bytes
        return checked


def write_once(path: Path, data: bytes) -> None:
    """`data` at `path` unless a file of its size is there (a content-addressed name: the
    same name holds the same bytes), through a temporary name of its own and one rename."""
    if path.is_file() and path.stat().st_size == len(data):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        mark_written(Path(temporary))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def content_address(path: str | None) -> tuple[str, str] | None:
    """The file name and sha256 a content-address path (`media/<sha256>.<ext>`) names;
    None for any other path (nothing else is ever looked up among the copies)."""
    found = CONTENT_ADDRESS.fullmatch(path or "")
    if path is None or found is None:
        return None
    return path.removeprefix(f"{MEDIA_DIR}/"), found["sha256"]
