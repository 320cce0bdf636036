"""Where a run's diagnostics wait for the report writers: a spooled temporary file of
JSON lines, in memory while small and on disk beyond, so a dataset with millions of
findings lints in bounded memory."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator

import orjson

from pipeline.lint.diagnostic import Diagnostic

SPOOL_BYTES = 8 << 20


class DiagnosticStore:
    """Append diagnostics in order; iterate them back as often as needed."""

    def __init__(self) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115
        self.count = 0

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        for diagnostic in diagnostics:
            self._file.write(orjson.dumps(diagnostic.to_dict(), option=orjson.OPT_APPEND_NEWLINE))
            self.count += 1

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Diagnostic]:
        self._file.seek(0)
        for line in self._file:
            yield Diagnostic.from_dict(orjson.loads(line))
        self._file.seek(0, 2)

    def close(self) -> None:
        self._file.close()
