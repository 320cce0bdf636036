"""Where a run's diagnostics wait for the report writers: a spooled temporary file of
JSON lines, in memory while small and on disk beyond, so a dataset with millions of
findings lints in bounded memory."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Iterator

import orjson

from pipeline.lint.diagnostic import Diagnostic

SPOOL_BYTES = 8 << 20
BLOCK_BYTES = 1 << 20


class DiagnosticStore:
    """Append diagnostics in order; iterate them back as often as needed."""

    def __init__(self) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115
        self.count = 0

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        for diagnostic in diagnostics:
            self._file.write(orjson.dumps(diagnostic.to_dict(), option=orjson.OPT_APPEND_NEWLINE))
            self.count += 1

    def take(self, other: DiagnosticStore) -> None:
        """Append another store's diagnostics (a part's, decided in another process)."""
        other._file.seek(0)
        shutil.copyfileobj(other._file, self._file)
        other._file.seek(0, 2)
        self.count += other.count

    def __getstate__(self) -> tuple[bytes, int]:
        """The diagnostics as bytes: a store is sent from the process that linted a part."""
        self._file.seek(0)
        data = self._file.read()
        self._file.seek(0, 2)
        return data, self.count

    def __setstate__(self, state: tuple[bytes, int]) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115
        self._file.write(state[0])
        self.count = state[1]

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Diagnostic]:
        self._file.seek(0)
        for line in self._file:
            yield Diagnostic.from_dict(orjson.loads(line))
        self._file.seek(0, 2)

    def json_blocks(self, size: int = BLOCK_BYTES) -> Iterator[str]:
        """The diagnostics as stored, JSON objects one per line (each `Diagnostic.to_dict`),
        in blocks of whole lines of about `size` bytes: a report copies them without
        parsing each one."""
        self._file.seek(0)
        held = b""
        while True:
            data = self._file.read(size)
            if not data:
                break
            data = held + data
            end = data.rfind(b"\n") + 1
            held = data[end:]
            if end:
                yield data[:end].decode()
        self._file.seek(0, 2)
        if held:
            yield held.decode()

    def close(self) -> None:
        self._file.close()
