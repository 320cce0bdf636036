"""Parts: the input files of a run, with big uncompressed JSON Lines files split into
byte ranges at line boundaries, and the reader that streams one part's records."""

from __future__ import annotations

import dataclasses
import io
import itertools
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


@dataclass(frozen=True, slots=True)
class LineWindow:
    """The bytes [`start`, `end`) of a file, whose newlines a planning task counts (a
    picklable task for an engine: the windows of a big file are counted in parallel)."""

    path: str
    start: int
    end: int

    def __call__(self) -> WindowLines:
        count, first = 0, None
        with _open_raw(self.path) as stream:
            stream.seek(self.start)
            at, left = self.start, self.end - self.start
            while left > 0:
                block = stream.read(min(_BLOCK, left))
                if not block:
                    break
                if first is None and (found := block.find(b"\n")) >= 0:
                    first = at + found
                count += block.count(b"\n")
                at, left = at + len(block), left - len(block)
        return WindowLines(count, first)


@dataclass(frozen=True, slots=True)
class WindowLines:
    """A window's newlines, and the offset of its first (None: it holds none)."""

    newlines: int
    first: int | None


CountLines = Callable[[list[LineWindow]], list[WindowLines]]
"""Counts the newlines of windows, in their order (an engine's `map_tasks`, or here)."""


def count_here(windows: list[LineWindow]) -> list[WindowLines]:
    """The windows counted one after the other in this process."""
    return [window() for window in windows]


def line_windows(path: str, split_bytes: int, size: int) -> list[LineWindow]:
    """The windows a file's parts are found from: window k starts at byte k x
    `split_bytes` - 1 (the first at 0) and ends where the next starts (the last at the end
    of the file)."""
    if split_bytes < 1:
        raise ValueError(f"split_bytes must be positive, not {split_bytes}")
    points = [0, *(k * split_bytes - 1 for k in range(1, -(-size // split_bytes))), size]
    return [LineWindow(path, start, end) for start, end in itertools.pairwise(points)]


def ranges_of(size: int, counted: list[WindowLines]) -> list[tuple[int, int, int]]:
    """(start, end, first line) of a file's parts from its windows' newlines: the part
    before multiple k of the split size ends after the first newline at or past byte
    k x split - 1 (the first newline of window k or of the next that has one), so no part
    depends on another's end and every window is counted on its own."""
    following: list[int | None] = [None] * (len(counted) + 1)
    for index in range(len(counted) - 1, -1, -1):  # the first window at or after each
        following[index] = index if counted[index].first is not None else following[index + 1]
    before = [0]
    for window in counted:
        before.append(before[-1] + window.newlines)
    ranges: list[tuple[int, int, int]] = []
    start, first_line = 0, 1
    for k in range(1, len(counted)):
        found = following[k]
        if found is None:
            break
        first = counted[found].first
        assert first is not None
        boundary = first + 1
        if boundary >= size or boundary <= start:
            continue
        ranges.append((start, boundary, first_line))
        start, first_line = boundary, before[found] + 2  # the newlines before it, and its own
    ranges.append((start, size, first_line))
    return ranges


def line_ranges(
    path: str, split_bytes: int, count_lines: CountLines = count_here
) -> list[tuple[int, int, int]]:
    """(start, end, first line) of the parts of a file (`ranges_of`), its windows counted
    by `count_lines`."""
    size = file_size(path)
    return ranges_of(size, count_lines(line_windows(path, split_bytes, size)))


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
    count_lines: CountLines = count_here,
    listed: list[InputFiles] | None = None,
) -> list[InputPart]:
    """The parts of (path-or-glob-or-`hf:`, format) inputs, in input order and each input's
    sorted file order, leaving out every file under the folder `exclude` (the run's own
    output). An uncompressed JSON Lines file over `split_bytes` (default: `split_bytes_for`
    the splittable files' bytes) becomes byte ranges (`ranges_of`), unless `can_split(path,
    format)` says no (a format whose conversations span records must see the whole file);
    `count_lines` counts the newlines of every such file's windows, all in one call (a
    run's engine counts them on its workers: reading every byte grows with the data). Part
    ids (`III-FFFFF-PPPP`) depend on nothing else. Each file is named relative to its
    input, names that collide between inputs qualified (pipeline/sources/names.py).
    `listed`: each input's `input_files(item, exclude)`, when the caller has them already."""
    files = listed if listed is not None else [input_files(item, exclude) for item, _ in inputs]
    names = run_names(files)
    if split_bytes is None:
        every = [path for found in files for path in found.files if splittable(path)]
        split_bytes = split_bytes_for(sum(file_size(path) for path in every))
    windows: dict[tuple[int, str], list[LineWindow]] = {}
    sizes: dict[str, int] = {}
    for (_, fmt), found in zip(inputs, files, strict=True):
        for path in found.files:
            if not splittable(path) or (can_split is not None and not can_split(path, fmt)):
                continue
            sizes[path] = file_size(path)
            if sizes[path] > split_bytes:
                windows[len(windows), path] = line_windows(path, split_bytes, sizes[path])
    every_window = [window for found_windows in windows.values() for window in found_windows]
    counted = iter(count_lines(every_window))
    ranges = {
        path: ranges_of(sizes[path], [next(counted) for _ in found_windows])
        for (_, path), found_windows in windows.items()
    }
    parts: list[InputPart] = []
    for input_index, ((_, fmt), found) in enumerate(zip(inputs, files, strict=True)):
        for file_index, path in enumerate(found.files):
            pieces: list[tuple[int | None, int | None, int]] = [(None, None, 1)]
            if len(ranges.get(path, ())) > 1:
                pieces = list(ranges[path])
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
