"""Where a run's diagnostics wait for the report writers: JSON lines in spooled temporary
files (in memory while small, on disk beyond), so a dataset with millions of findings lints
in bounded memory; and files other processes saved, taken by reference, so the findings of
a run's parts go from the workers to the report without passing through the driver's
memory."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from pipeline.lint.diagnostic import Diagnostic
from pipeline.task_files import replaced

SPOOL_BYTES = 8 << 20
BLOCK_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class SavedDiagnostics:
    """`count` diagnostics another process saved at `path` (JSON lines)."""

    path: str
    count: int


class DiagnosticStore:
    """Append diagnostics in order; iterate them back as often as needed. They are held in
    segments, in order: spooled files this store wrote, and saved files it took."""

    def __init__(self) -> None:
        self._segments: list[IO[bytes] | SavedDiagnostics] = []
        self.count = 0

    def _spool(self) -> IO[bytes]:
        """The spooled file new diagnostics go to (a new one after a taken file)."""
        if not self._segments or isinstance(self._segments[-1], SavedDiagnostics):
            self._segments.append(tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES))  # noqa: SIM115
        last = self._segments[-1]
        assert not isinstance(last, SavedDiagnostics)
        last.seek(0, 2)  # a reader left before the end must not make it overwrite
        return last

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        spool = None
        for diagnostic in diagnostics:
            spool = spool or self._spool()
            spool.write(orjson.dumps(diagnostic.to_dict(), option=orjson.OPT_APPEND_NEWLINE))
            self.count += 1

    def take(self, other: DiagnosticStore) -> None:
        """Append another store's diagnostics (a part's, decided in another process): its
        saved files by reference, its spooled ones copied."""
        for segment in other._segments:
            if isinstance(segment, SavedDiagnostics):
                self._segments.append(segment)
            else:
                segment.seek(0)
                shutil.copyfileobj(segment, self._spool())
                segment.seek(0, 2)
        self.count += other.count

    def save(self, path: Path) -> None:
        """Write every diagnostic to `path` (atomically) and hold that file from now on: a
        store sent to another process then carries the file's name, not its bytes."""
        with replaced(path) as temp, temp.open("wb") as out:
            for block in self._byte_blocks(BLOCK_BYTES):
                out.write(block)
        self.close()
        self._segments = [SavedDiagnostics(str(path), self.count)] if self.count else []

    def __getstate__(self) -> tuple[list[Any], int]:
        """The segments: a saved file by its name, a spooled one as its bytes (a store is
        sent from the process that linted a part)."""
        state: list[Any] = []
        for segment in self._segments:
            if isinstance(segment, SavedDiagnostics):
                state.append(segment)
            else:
                segment.seek(0)
                state.append(segment.read())
                segment.seek(0, 2)
        return state, self.count

    def __setstate__(self, state: tuple[list[Any], int]) -> None:
        self._segments = []
        self.count = state[1]
        for segment in state[0]:
            if isinstance(segment, SavedDiagnostics):
                self._segments.append(segment)
            else:
                self._spool().write(segment)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Diagnostic]:
        for block in self._byte_blocks(BLOCK_BYTES):
            for line in block.splitlines():
                yield Diagnostic.from_dict(orjson.loads(line))

    def json_blocks(self, size: int = BLOCK_BYTES) -> Iterator[str]:
        """The diagnostics as stored, JSON objects one per line (each `Diagnostic.to_dict`),
        in blocks of whole lines of about `size` bytes: a report copies them without
        parsing each one."""
        for block in self._byte_blocks(size):
            yield block.decode()

    def _byte_blocks(self, size: int) -> Iterator[bytes]:
        """Every segment's lines in order, in blocks of whole lines of about `size` bytes."""
        for segment in self._segments:
            if isinstance(segment, SavedDiagnostics):
                with open(segment.path, "rb") as file:
                    yield from _whole_lines(file, size)
            else:
                segment.seek(0)
                yield from _whole_lines(segment, size)
                segment.seek(0, 2)

    def close(self) -> None:
        for segment in self._segments:
            if not isinstance(segment, SavedDiagnostics):
                segment.close()


def _whole_lines(file: IO[bytes], size: int) -> Iterator[bytes]:
    """The file's bytes from where it stands, in blocks of whole lines of about `size`."""
    held = b""
    while True:
        data = file.read(size)
        if not data:
            break
        data = held + data
        end = data.rfind(b"\n") + 1
        held = data[end:]
        if end:
            yield data[:end]
    if held:
        yield held
