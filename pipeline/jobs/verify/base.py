"""What every check of `mms verify` shares: the batch size rows are read in, the token
columns of a row of any kind, how listed files are hashed, and what a check reports (a
`Problem` in a `Verification`), or `OutputError` when the folder is no mms output at all.
The other modules of the package import it and it imports none of them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.output.files import file_sha256

ROW_BATCH = 512
"""How many rows of a shard are read, checked and held at a time."""
TOKEN_COLUMNS = ("input_ids", "prompt_ids", "chosen_ids", "rejected_ids", "completion_ids")
"""The token columns of a row of any kind, in the order its media columns follow them."""

HashFiles = Callable[[Sequence[Path]], Sequence[str]]
"""The sha256 hex digests of files, in their order (`mms run` hashes its output's files on
its engine's workers: their bytes grow with the data)."""


def hash_here(paths: Sequence[Path]) -> list[str]:
    """The files' sha256 digests, hashed one after the other in this process."""
    return [file_sha256(path) for path in paths]


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing that does not hold: where (a file, or `split` and row id) and what."""

    where: str
    what: str


@dataclass
class Verification:
    """What `verify_output` checked (counts per check) and every problem it found."""

    checked: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems

    def count(self, check: str, n: int = 1) -> None:
        self.checked[check] = self.checked.get(check, 0) + n


class OutputError(ValueError):
    """The folder is not an mms output at all (no readable manifest.json)."""
