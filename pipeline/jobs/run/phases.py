"""The phases of `mms run`, named as the run enters them, so that a fault in any of them (an
OSError: a full disk, a lost mount, a folder made read-only) is told as one error naming
the phase and the file, and the run resumes from what it finished, never as a crash.

The run is guarded once, as a whole (`Phases.guard`): no phase can escape it. Each phase
says its name as it starts (`Phases.enter`); a phase that reports progress names itself
through its reports (`Phases.progress`). The names are listed here, in run order; the map
side's faults are named by their part (PartFailed)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pipeline.accounting import Account
from pipeline.storage import StorageError

Progress = Callable[[str, int, int, Account | None], None]
"""(stage, parts done, parts in all, the run's counts so far when the stage has them); for
SHARD_WRITES, shards written of all."""

CLAIM = "claim the output folder"
PLAN = "plan the parts"
MAP_PARTS = "read, lint, tokenize"
"""The map side over the parts, counted in parts."""
PARTITION_KEYS = "partition keys"
"""The partition pass, counted in partitioned stages."""
REPEATED_ROWS = "repeated rows"
"""The pass over the rows whose keys repeat, counted in parts."""
PART_DECISIONS = "lint, dedup, split"
"""The parts' tasks, counted in parts."""
SHARD_WRITES = "write shards"
"""The shard tasks, counted in shards."""
CHECK_INPUTS = "check the inputs"
LINT_REPORTS = "write the lint reports"
TOKENIZER = "ship the tokenizer"
STATS_AND_CARD = "write the stats and the card"
MANIFEST = "write the manifest"
PUBLISH = "publish the output"
CLEAN_UP = "remove the work directory"
VERIFY = "verify the output"


class RunFault(RuntimeError):
    """A phase of the run could not read or write a file; the message names the phase and
    the file (the work finished so far is kept)."""

    def __init__(self, phase: str, error: OSError) -> None:
        reason = error.strerror or str(error) or type(error).__name__
        files = [str(name) for name in (error.filename, error.filename2) if name is not None]
        where = f" on {' -> '.join(files)}" if files else ""
        super().__init__(f"phase '{phase}' failed{where}: {reason}")
        self.phase = phase


class Phases:
    """Which phase the run is in, for the RunFault a fault in it becomes."""

    def __init__(self, first: str) -> None:
        self.current = first

    def enter(self, name: str) -> None:
        """The run starts the phase `name`."""
        self.current = name

    def progress(self, report: Progress | None) -> Progress:
        """`report`, naming each stage it reports as the run's phase."""

        def named(stage: str, done: int, total: int, counts: Account | None) -> None:
            self.current = stage
            if report is not None:
                report(stage, done, total, counts)

        return named

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Tell an OSError raised inside as RunFault naming the current phase (a store's
        error stays a StorageError: it names the object and was retried already)."""
        try:
            yield
        except StorageError:
            raise
        except OSError as err:
            raise RunFault(self.current, err) from err
