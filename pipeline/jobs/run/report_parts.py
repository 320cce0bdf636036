"""What a part's task of the decisions (pipeline/jobs/run/decisions.py) leaves of its lint
report in the work directory rather than send to the driver, whose cost per part must not
grow with the part's threads: its example findings (up to `max_examples` per rule, threads
and all), read by the driver only while the run's report wants examples of their rules;
and its unkeyed dataset rules' state (up to a thousand short answers, every open pair
side ...) with its dataset profile (counters of lengths, roles, capabilities ...), merged
in plan order in one task, which hands the driver what each part's merge told and the
merged state and profile."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.stages import Side, run_stages
from pipeline.lint.diagnostic import Diagnostic
from pipeline.lint.profile import DatasetProfile
from pipeline.lint.report import Example, ReportPart
from pipeline.stages.lint import Lint
from pipeline.task_files import write_replacing

CHECKS_DIR = "checks"
"""In the work directory: each part's unkeyed dataset rules' state and profile
(`{part}.pickle`) and example findings (`{part}.examples/`, a file per rule), removed (by
the workers, on an engine whose workers are apart) once the decisions are merged."""


def save_examples(recorded: ReportPart, folder: Path) -> str | None:
    """Move a part's example findings from `recorded` to `folder`, one file per rule
    (`{n}.json`, n its rule's place in `recorded.examples`: a custom rule's code need not
    make a file name), leaving their rules listed without examples; the folder's path,
    None when there are none."""
    if not any(recorded.examples.values()):
        return None
    for place, kept in enumerate(recorded.examples.values()):
        saved = [[example.diagnostic.to_dict(), example.thread, example.raw] for example in kept]
        write_replacing(folder / f"{place}.json", orjson.dumps(saved))
    recorded.examples = {code: [] for code in recorded.examples}
    return str(folder)


def wanted_examples(
    report_examples: dict[str, list[Example]], most: int, part: ReportPart, folder: str
) -> dict[str, list[Example]]:
    """The part's examples as a report holding `report_examples` takes them: those of
    the rules it keeps fewer than `most` examples of read from the part's `folder` (what
    `save_examples` wrote), none of the others (once a rule has its fill, its files go
    unread: the run reads about `most` examples a rule, whatever its parts)."""
    found: dict[str, list[Example]] = {}
    for place, code in enumerate(part.examples):
        found[code] = []
        if len(report_examples.get(code, ())) < most:
            saved = orjson.loads((Path(folder) / f"{place}.json").read_bytes())
            found[code] = [
                Example(Diagnostic.from_dict(finding), thread, raw)
                for finding, thread, raw in saved
            ]
    return found


def save_checks(state: list[Any], recorded: ReportPart, path: Path) -> str:
    """A part's unkeyed dataset rules' state (`Linter.state`: picklable, not JSON-able)
    and its profile, moved from `recorded` (which keeps an empty one), in a file at `path`
    of the run's own work directory; its path."""
    saved = pickle.dumps((state, recorded.profile), protocol=pickle.HIGHEST_PROTOCOL)
    write_replacing(path, saved)
    recorded.profile = DatasetProfile()
    return str(path)


@dataclass(frozen=True)
class MergedChecks:
    """What merging the parts' states in plan order told: each part's findings at its
    merge (a pair whose sides were in two parts), the state of every part merged, and
    their profiles merged."""

    found: list[list[Diagnostic]]
    state: list[Any]
    profile: DatasetProfile


@dataclass(frozen=True)
class MergeChecks:
    """The task that merges the parts' saved states (`paths`, in plan order) into one
    linter, as the driver would part after part."""

    config: RunConfig
    paths: list[str]
    rows: int
    """The rows of the parts whose states it merges: a small run's are merged without
    starting workers (pipeline/engine/local.py, HERE_ROWS)."""

    def __call__(self) -> MergedChecks:
        stages = run_stages(self.config, Side(lint_source=self.config.recorded_source))
        linter = next(stage for stage in stages if isinstance(stage, Lint)).linter
        found, profile = [], DatasetProfile()
        for path in self.paths:
            state, part_profile = pickle.loads(Path(path).read_bytes())
            found.append(linter.merge(state))
            profile.merge(part_profile)
        return MergedChecks(found, linter.state(), profile)
