"""The process that runs `mms run` (the driver) does no work per thread: with the parts run
in worker processes (the local engine with two workers; Ray's tasks are the same parts),
the Python calls the driver makes grow with the parts it plans, never with the threads in
them. Counted with cProfile in the driver alone (calls, not time: the count is the same on
any machine), on the same config over N and 4N threads in the same number of parts, and
over the same threads in more parts; and over N and 4N threads half of which are near
copies of the others (every one of them a row whose keys repeat, decided in plan order).
What the parts' tasks send back is measured too (the driver unpickles it in threads a
profile of its calls does not see, as Ray's do): its bytes do not grow with the threads."""

from __future__ import annotations

import cProfile
import pickle
import pstats
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

import pipeline
from pipeline.engine import local
from pipeline.jobs.run.config import load_run_config
from pipeline.jobs.run.job import RunResult, run_pipeline
from tests.conftest import REPO

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
PROJECT = f"{Path(pipeline.__file__).parent}/"
"""Where the project's code is: a call made from a function there is counted."""
WORDS = [
    "river", "stone", "garden", "signal", "copper", "lantern", "meadow", "harbor", "engine",
    "violet", "thunder", "compass", "pepper", "marble", "orbit", "canyon", "falcon", "ember",
    "glacier", "saddle", "quartz", "willow", "anchor", "bramble", "cobalt", "delta", "fable",
    "granite", "hollow", "ivory", "jasmine", "kettle", "lagoon", "mosaic", "nectar", "oyster",
]  # fmt: skip
SMALL = 400
"""Threads of the small run; the large one has four times as many."""
PER_THREAD = 0.25
"""At most this many more calls in the driver per added thread: a loop of the driver over
the threads, rows, findings or media files breaks it by far (each costs tens of calls);
what the reports' charts draw grows with the log of the counts (an axis's ticks, a
histogram's bins), which it allows (from N to 4N the calls now move by less than 100)."""
PER_PART = 420
"""At most this many more calls in the driver per added part: an input file listed once
and planned, its part's tasks submitted and their results merged (about 375; listing
every input file twice made it about 465)."""


def threads(count: int, seed: int, near: bool = False, short: bool = False) -> list[bytes]:
    """`count` MMS threads of the same shape, each its own random words (no two alike, nor
    near alike, so no row repeats and every report holds the same findings); `near`: every
    second thread the one before with its last word changed (a near copy, dropped);
    `short`: each answer a few words of its own, which MMS508 counts (up to 1,024)."""
    rng = random.Random(seed)
    lines = []
    question = answer = ""
    for number in range(count):
        if near and number % 2:
            kept, last = answer.rsplit(" ", 1)
            answer = f"{kept} {rng.choice([word for word in WORDS if word != last])}"
        else:
            question = " ".join(rng.choice(WORDS) for _ in range(24))
            answer = " ".join(rng.choice(WORDS) for _ in range(3 if short else 40))
        shown = number - number % 2 if near else number
        thread = {
            "id": f"t-{seed}-{number:06d}",
            "messages": [
                {"role": "user", "content": f"Question {shown}: {question}?"},
                {"role": "assistant", "content": f"Answer {shown}: {answer}.", "end_turn": True},
            ],
        }
        lines.append(orjson.dumps(thread) + b"\n")
    return lines


def write_inputs(
    folder: Path, count: int, files: int, near: bool = False, short: bool = False
) -> Path:
    """`count` threads over `files` MMS files (each one part)."""
    folder.mkdir(parents=True)
    every = threads(count, seed=7, near=near, short=short)
    for index in range(files):
        (folder / f"in-{index:02d}.jsonl").write_bytes(b"".join(every[index::files]))
    return folder


def write_config(folder: Path, inputs: Path) -> Path:
    """Lint, exact and near dedup partitioned as on Ray, tokenized, one split, two workers."""
    config = folder / "run.yaml"
    config.write_text(
        "name: driver-calls\n"
        f"inputs:\n  - path: {inputs}\n    format: mms\n"
        f"output: {folder / 'out'}\n"
        "stages:\n"
        "  lint: {fail_on: never}\n"
        "  filters: {min_trained_tokens: 0}\n"
        "  dedup: {enabled: true, near: true}\n"
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 1024, overlong: truncate}}\n"
        "  shard: {splits: {train: 1.0}}\n"
        "engine: {workers: 2, partition: always}\n"
    )
    return config


def driver_calls(folder: Path, count: int, files: int, near: bool = False) -> tuple[int, RunResult]:
    """The calls the project's code made in the driver in a run over `count` threads in
    `files` parts (the config loaded and the imports done before counting)."""
    inputs = write_inputs(folder / "in", count, files, near)
    config = load_run_config(write_config(folder, inputs))
    profile = cProfile.Profile()
    profile.enable()
    try:
        result = run_pipeline(config)
    finally:
        profile.disable()
    assert isinstance(result, RunResult)
    return project_calls(pstats.Stats(profile)), result


def project_calls(stats: pstats.Stats) -> int:
    """The calls the project's code made (to its own functions, the standard library's,
    built-ins): what a loop of the driver over threads would multiply. Calls inside other
    libraries (a process pool's or Ray's waiting, which vary with timing) are left out."""
    made = 0
    for *_, callers in stats.stats.values():  # type: ignore[attr-defined]
        for (filename, _, _), counts in callers.items():
            if PROJECT in filename:
                made += counts[1] if isinstance(counts, tuple) else counts
    return made


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, RunResult]]:
    root = tmp_path_factory.mktemp("driver")
    with pytest.MonkeyPatch.context() as patch:
        # every task in the workers, as on a cluster: the local engine would run these
        # small runs' few tasks here (a bounded amount of work, HERE_ROWS)
        patch.setattr(local, "HERE_ROWS", 0)
        driver_calls(root / "warm", SMALL, 2)  # the imports and templates, loaded once
        found = {
            "small": driver_calls(root / "small", SMALL, 2),
            "large": driver_calls(root / "large", 4 * SMALL, 2),
            "spread": driver_calls(root / "spread", 4 * SMALL, 8),
            "small near": driver_calls(root / "small-near", SMALL, 2, near=True),
            "large near": driver_calls(root / "large-near", 4 * SMALL, 2, near=True),
        }
    return found


def test_the_runs_write_every_thread(counted: dict[str, tuple[int, RunResult]]) -> None:
    """The counted runs are whole runs: every thread written, in the parts planned."""
    for name, threads_in, parts in (("small", SMALL, 2), ("large", 4 * SMALL, 2),
                                    ("spread", 4 * SMALL, 8)):  # fmt: skip
        _, result = counted[name]
        assert result.parts == parts
        assert sum(result.counts.written.values()) == threads_in


def test_the_near_copies_are_dropped(counted: dict[str, tuple[int, RunResult]]) -> None:
    """The runs over near copies drop every second thread as a near duplicate."""
    for name, threads_in in (("small near", SMALL), ("large near", 4 * SMALL)):
        counts = counted[name][1].counts
        assert counts.dropped["near_duplicate"] == threads_in // 2
        assert sum(counts.written.values()) == threads_in // 2


@pytest.mark.parametrize("near", ["", " near"])
def test_the_driver_does_no_work_per_thread(
    counted: dict[str, tuple[int, RunResult]], near: str
) -> None:
    """Four times the threads in as many parts: the driver's calls barely move, also when
    half the rows repeat an earlier one's keys (decided in tasks, not in the driver)."""
    small, large = counted[f"small{near}"][0], counted[f"large{near}"][0]
    added = 3 * SMALL
    assert large - small <= PER_THREAD * added, (
        f"the driver made {large - small:+,} calls for {added:,} more threads "
        f"({(large - small) / added:.1f} per thread; {small:,} in all on {SMALL} threads)"
    )


def test_the_driver_does_a_bounded_work_per_part(
    counted: dict[str, tuple[int, RunResult]],
) -> None:
    """The same threads in four times the parts: a bounded number of calls per part."""
    large, spread = counted["large"][0], counted["spread"][0]
    added = 8 - 2
    assert spread - large <= PER_PART * added, (
        f"the driver made {spread - large:+,} calls for {added} more parts "
        f"({(spread - large) / added:,.0f} per part)"
    )


PER_THREAD_BYTES = 0.1
"""At most this many more bytes in what the parts' decisions tasks send the driver per
added thread (their counts' digits grow): a part's lint examples, its dataset rules' state
(MMS508's short answers, up to 1,024 a part) or its profile in the result break it by far
(tens of bytes a thread)."""


def received_bytes(folder: Path, count: int) -> dict[str, int]:
    """The pickled bytes of every task result the driver received in a run over `count`
    threads with short answers in two parts, by the task's kind."""
    inputs = write_inputs(folder / "in", count, 2, short=True)
    config = load_run_config(write_config(folder, inputs))
    received: dict[str, int] = {}
    tasks_of = local.LocalRunner.map_tasks

    def measured(runner: local.LocalRunner, tasks: Any, done: Any = None) -> list[Any]:
        results = tasks_of(runner, tasks, done)
        for task, result in zip(tasks, results, strict=True):
            kind = type(task).__name__
            received[kind] = received.get(kind, 0) + len(pickle.dumps(result))
        return results

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(local, "HERE_ROWS", 0)
        patch.setattr(local.LocalRunner, "map_tasks", measured)
        result = run_pipeline(config)
    assert isinstance(result, RunResult)
    assert sum(result.counts.written.values()) == count
    return received


def test_the_parts_decisions_send_no_more_for_more_threads(tmp_path: Path) -> None:
    """Four times the threads in as many parts, each with its own short answer: what the
    parts' decisions tasks send the driver (counts, the files they wrote) keeps its size;
    their lint examples, rule states and profiles stay in the work directory."""
    small = received_bytes(tmp_path / "small", SMALL)
    large = received_bytes(tmp_path / "large", 4 * SMALL)
    added = 3 * SMALL
    grown = large["DecidePart"] - small["DecidePart"]
    assert grown <= PER_THREAD_BYTES * added, (
        f"the parts' decisions sent {grown:+,} bytes for {added:,} more threads "
        f"({small['DecidePart']:,} in all on {SMALL} threads)"
    )
