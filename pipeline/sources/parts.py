"""Parts: the input files of a run, with big uncompressed JSON Lines files split into
byte ranges at line boundaries, and the reader that streams one part's records."""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pipeline import storage
from pipeline.quarantine import Rejection
from pipeline.sources import (
    DEFAULT_SPLIT,
    InputError,
    InputFiles,
    ReadLimits,
    Record,
    expand_inputs,
    file_kind,
    is_hf_input,
    iter_file,
    with_name,
)
from pipeline.sources.compression import split_compression
from pipeline.sources.guard import guarded
from pipeline.sources.jsonl import iter_jsonl
from pipeline.sources.names import unique_names

MIB = 1024 * 1024
DEFAULT_SPLIT_BYTES = 8 * MIB
"""A JSON Lines file larger than this is split into parts of about this size: small
enough that a file of a few tens of MiB keeps every worker busy and the ordered reduce of
the first parts runs while later parts are still mapped (each part is read, linted and
tokenized by one worker), large enough that the per-part files stay few."""
MAX_PARTS = 1024
"""Above DEFAULT_SPLIT_BYTES x this many bytes of splittable inputs, a run's parts grow so
that there are about this many: enough to keep a large cluster busy, few enough that what
the driver does per part (a task to schedule, a part to take in order) stays small beside
the data. The output does not depend on the size of the parts."""
_BLOCK = MIB


@dataclass(frozen=True, order=True, slots=True)
class InputPart:
    """One part, a piece of work an engine runs: a whole input (`start` and `end` None) or
    the bytes [`start`, `end`) of a JSON Lines file, whose first line is line `first_line`."""

    id: str
    path: str
    start: int | None
    end: int | None
    format: str
    input_index: int
    first_line: int = 1
    name: str | None = None
    """The file's name relative to its input, what its threads record (pipeline/sources/
    names.py); None: its path (an `hf:` dataset)."""

    def describe(self) -> str:
        """The part for messages: its path, and its byte range when it has one."""
        if self.start is None:
            return self.path
        return f"{self.path} bytes {self.start}-{self.end} (from line {self.first_line})"


def splittable(path: str) -> bool:
    """Whether a file may be split into byte ranges: uncompressed JSON Lines."""
    return (
        not is_hf_input(path) and file_kind(path) == "jsonl" and split_compression(path)[1] is None
    )


def file_size(path: str) -> int:
    """The size of a local or stored file, in bytes."""
    return storage.size(path) if storage.is_url(path) else os.path.getsize(path)


def _open_raw(path: str) -> io.RawIOBase:
    """A local or stored file as an unbuffered, seekable binary stream."""
    if storage.is_url(path):
        return storage.open_raw(path)
    return open(path, "rb", buffering=0)


def line_ranges(path: str, split_bytes: int) -> list[tuple[int, int, int]]:
    """(start, end, first line) of the parts of a file: each part ends after the first
    newline at or past `split_bytes` from its start, or at the end of the file. One
    sequential pass counts the newlines before each part."""
    if split_bytes < 1:
        raise ValueError(f"split_bytes must be positive, not {split_bytes}")
    size = file_size(path)
    ranges: list[tuple[int, int, int]] = []
    start, first_line, newlines, offset = 0, 1, 0, 0
    target = split_bytes
    with _open_raw(path) as stream:
        while target < size:
            block = stream.read(_BLOCK)
            if not block:
                break
            searched = 0
            while target < size:
                at = block.find(b"\n", max(target - 1 - offset, searched))
                if at < 0:
                    break
                newlines += block.count(b"\n", searched, at + 1)
                searched = at + 1
                boundary = offset + at + 1
                if boundary >= size:
                    break
                ranges.append((start, boundary, first_line))
                start, first_line = boundary, newlines + 1
                target = boundary + split_bytes
            newlines += block.count(b"\n", searched)
            offset += len(block)
    ranges.append((start, size, first_line))
    return ranges


def input_files(item: str, exclude: str | os.PathLike[str] | None = None) -> InputFiles:
    """The files of one input (pipeline.sources.expand_inputs) without those under the
    folder `exclude`. Raises InputError when nothing is left."""
    found = expand_inputs([item])
    if exclude is None:
        return found
    stored_root = storage.is_url(str(exclude))
    root = str(exclude).rstrip("/") if stored_root else os.path.realpath(exclude)

    def outside(path: str) -> bool:
        if is_hf_input(path) or storage.is_url(path) != stored_root:
            return True
        if stored_root:
            return path != root and not path.startswith(root + "/")
        return os.path.commonpath([os.path.realpath(path), root]) != root

    found.files = [path for path in found.files if outside(path)]
    found.skipped = [path for path in found.skipped if outside(path)]
    found.refused = {path: why for path, why in found.refused.items() if outside(path)}
    if not found.files:
        raise InputError(f"{item}: no input files outside the run's output folder {exclude}")
    return found


def split_bytes_for(total: int) -> int:
    """The part size of inputs whose splittable files hold `total` bytes.

    >>> split_bytes_for(10 * MIB) == DEFAULT_SPLIT_BYTES, split_bytes_for(100 * 1024**3) // MIB
    (True, 100)
    """
    return max(DEFAULT_SPLIT_BYTES, -(-total // MAX_PARTS))


def plan_parts(
    inputs: list[tuple[str, str]],
    split_bytes: int | None = None,
    *,
    can_split: Callable[[str, str], bool] | None = None,
    exclude: str | os.PathLike[str] | None = None,
) -> list[InputPart]:
    """The parts of (path-or-glob-or-`hf:`, format) inputs, in input order and each input's
    sorted file order, leaving out every file under the folder `exclude` (the run's own
    output). An uncompressed JSON Lines file over `split_bytes` (default: `split_bytes_for`
    the splittable files' bytes) becomes byte ranges, unless `can_split(path, format)` says no (a format whose conversations span records
    must see the whole file). Part ids (`III-FFFFF-PPPP`) depend on nothing else. Each
    file is named relative to its input, names that collide between inputs qualified
    (pipeline/sources/names.py)."""
    parts: list[InputPart] = []
    files = [input_files(item, exclude) for item, _ in inputs]
    names = run_names(files)
    if split_bytes is None:
        every = [path for found in files for path in found.files if splittable(path)]
        split_bytes = split_bytes_for(sum(file_size(path) for path in every))
    for input_index, ((_, fmt), found) in enumerate(zip(inputs, files, strict=True)):
        for file_index, path in enumerate(found.files):
            pieces: list[tuple[int | None, int | None, int]] = [(None, None, 1)]
            big = splittable(path) and file_size(path) > split_bytes
            if big and (can_split is None or can_split(path, fmt)):
                ranges = line_ranges(path, split_bytes)
                if len(ranges) > 1:
                    pieces = list(ranges)
            for piece, (start, end, first_line) in enumerate(pieces):
                part_id = f"{input_index:03d}-{file_index:05d}-{piece:04d}"
                name = names[input_index].get(path)
                parts.append(
                    InputPart(part_id, path, start, end, fmt, input_index, first_line, name)
                )
    return parts


def run_names(files: list[InputFiles]) -> list[dict[str, str]]:
    """The names of the files of each input of a run (each expanded on its own), with
    the names that collide between inputs qualified, in run order."""
    entries = [
        (position, path, found.names[path])
        for position, found in enumerate(files)
        for path in found.files
        if path in found.names
    ]
    unique = unique_names((position, name) for position, _, name in entries)
    names: list[dict[str, str]] = [{} for _ in files]
    for (position, path, _), name in zip(entries, unique, strict=True):
        names[position][path] = name
    return names


class _RangeStream(io.RawIOBase):
    """The bytes [start, end) of a file, after `prefix`, as a raw stream."""

    def __init__(self, raw: io.RawIOBase, start: int, end: int, prefix: bytes) -> None:
        super().__init__()
        raw.seek(start)
        self._raw = raw
        self._left = end - start
        self._prefix = prefix

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        if self._prefix:
            count = min(len(view), len(self._prefix))
            view[:count] = self._prefix[:count]
            self._prefix = self._prefix[count:]
            return count
        want = min(len(view), self._left)
        if want <= 0:
            return 0
        got = self._raw.readinto(view[:want]) or 0
        self._left -= got
        return got


def _relocate(item: Record | Rejection, source: str, shift: int) -> Record | Rejection:
    """The item with its `path:line` locator moved down by `shift` lines."""
    line = int(item.locator[len(source) + 1 :])
    return dataclasses.replace(item, locator=f"{source}:{line + shift}")


def _iter_range(
    part: InputPart, start: int, end: int, limits: ReadLimits
) -> Iterator[Record | Rejection]:
    # a later part starts with one blank line, so that a byte-order mark is stripped only
    # at the very start of the file, as whole-file reading does; locators shift back
    prefix = b"\n" if start > 0 else b""
    shift = part.first_line - 1 - len(prefix)
    with _open_raw(part.path) as raw:
        stream = io.BufferedReader(_RangeStream(raw, start, end, prefix), MIB)
        for item in iter_jsonl(part.path, stream, limits):
            yield _relocate(item, part.path, shift) if shift else item


def iter_part_records(
    part: InputPart,
    limits: ReadLimits | None = None,
    *,
    split: str = DEFAULT_SPLIT,
    hf_config: str | None = None,
) -> Iterator[Record | Rejection]:
    """Records (and read rejections) of one part, with the locators reading the whole file
    gives; `split` and `hf_config` choose what an `hf:` input streams."""
    limits = limits or ReadLimits()
    if part.start is None or part.end is None:
        return iter_file(part.path, limits, split=split, config=hf_config, name=part.name)
    items = guarded(part.path, _iter_range(part, part.start, part.end, limits), limits.max_depth)
    return items if part.name is None else with_name(items, part.name)
