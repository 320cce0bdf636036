"""The local engine: parts split at line boundaries read exactly like whole files, and
runs that are resumed, killed or parallel end with the same bytes."""

from __future__ import annotations

import functools
import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.engine import (
    LocalRunner,
    PartFailed,
    WorkdirError,
    iter_parts,
    local,
    reset_workdir,
    run_parts,
)
from pipeline.sources import ReadLimits, iter_file
from pipeline.sources.parts import iter_part_records, line_ranges, plan_parts
from tests.conftest import REPO
from tests.engine_work import PidTask, convert_part, record_pool_sizes, tree_bytes

BOM = b"\xef\xbb\xbf"


def _chat_lines(count: int) -> bytes:
    return b"".join(
        orjson.dumps(
            {
                "messages": [
                    {"role": "user", "content": f"question {i}: " + "why? " * (i % 7)},
                    {"role": "assistant", "content": f"answer {i}"},
                ]
            }
        )
        + b"\n"
        for i in range(count)
    )


def _check_parts(path: Path, split_bytes: int, limits: ReadLimits | None = None) -> int:
    """Assert the parts of `path` tile it at line starts and read as the whole file does."""
    parts = plan_parts([(str(path), "auto")], split_bytes)
    data = path.read_bytes()
    if len(parts) > 1:
        assert parts[0].start == 0 and parts[-1].end == len(data)
        for before, after in itertools.pairwise(parts):
            assert before.end == after.start
            assert data[after.start - 1 : after.start] == b"\n"
        for part in parts:
            assert part.first_line == data[: part.start].count(b"\n") + 1
    items = [item for part in parts for item in iter_part_records(part, limits)]
    assert {part.name for part in parts} == {path.name}  # named under the input: its base name
    assert items == list(iter_file(str(path), limits, name=path.name))
    return len(parts)


def test_parts_of_real_jsonl_files_read_as_the_whole_file(data: Path) -> None:
    files = sorted((data / "realdata").rglob("*.jsonl"))
    assert len(files) >= 10
    split = 0
    for path in files:
        # 4 KiB parts: the copies in tests/data are up to 16 kB (../shared's files: 16 KiB)
        split += _check_parts(path, 4 * 1024) > 1
    assert split >= 5


def test_parts_keep_line_numbers_through_odd_lines(tmp_path: Path) -> None:
    lines = [
        BOM + b'{"messages": [{"role": "user", "content": "first"}]}',
        b"",
        b"   ",
        b'{"a": 1,}',
        b'{"text": "caf\xe9"}',
        BOM + b'{"mid": "a byte-order mark here is not stripped"}',
        b'{"long": "' + b"x" * 300 + b'"}',
        b"[1, 2, 3]\r",
        b'"no newline at the end"',
    ]
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b"\n".join(lines))
    limits = ReadLimits(max_record_bytes=200)
    counts = [_check_parts(path, split, limits) for split in (1, 2, 7, 33, 100, 10**6)]
    assert counts[0] == len(lines) and counts[-1] == 1
    items = list(iter_file(str(path), limits))
    assert [item.locator.rsplit(":", 1)[1] for item in items] == ["1", "4", "5", "6", "7", "8", "9"]


def test_line_ranges_end_each_part_after_the_first_newline_past_the_split(tmp_path: Path) -> None:
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"aaaa\nbb\ncccccc\nd\n")
    assert line_ranges(str(path), 5) == [(0, 5, 1), (5, 15, 2), (15, 17, 4)]
    assert line_ranges(str(path), 6) == [(0, 8, 1), (8, 15, 3), (15, 17, 4)]
    assert line_ranges(str(path), 100) == [(0, 17, 1)]
    with pytest.raises(ValueError, match="split_bytes"):
        line_ranges(str(path), 0)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    st.booleans(),
    st.integers(min_value=1, max_value=50),
)
def test_parts_end_after_the_first_newline_past_each_multiple_of_the_split(
    tmp_path_factory, lines, closed, split
):
    """Each part but the last ends after the first newline at or past byte k x split - 1
    (one of the windows the planner counts apart, in any order); the parts tile the file
    and each knows its first line."""
    data = b"\n".join(lines) + (b"\n" if closed and lines else b"")
    path = tmp_path_factory.mktemp("lines") / "lines.jsonl"
    path.write_bytes(data)

    def backwards(windows):  # counted in another order than the file's: no window waits
        return [window() for window in reversed(windows)][::-1]

    ranges = line_ranges(str(path), split, backwards)
    assert ranges == line_ranges(str(path), split)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
    newlines = [at for at, byte in enumerate(data) if byte == 10]
    ends = {
        found + 1
        for k in range(1, -(-len(data) // split))
        for found in [next((at for at in newlines if at >= k * split - 1), None)]
        if found is not None and found + 1 < len(data)
    }
    assert [end for _, end, _ in ranges[:-1]] == sorted(ends)
    for (start, end, first_line), following in itertools.zip_longest(ranges, ranges[1:]):
        assert start < end or len(data) == 0
        assert first_line == data[:start].count(b"\n") + 1
        if following is not None:
            assert following[0] == end


def test_plan_parts_expands_inputs_in_order_and_splits_only_plain_jsonl(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "b.jsonl").write_bytes(_chat_lines(40))
    (data / "a.jsonl").write_bytes(_chat_lines(3))
    (data / "c.jsonl.zst").write_bytes(b"")  # compressed: never split
    one = tmp_path / "one.jsonl"
    one.write_bytes(_chat_lines(40))
    inputs = [(f"{data}/*.jsonl*", "auto"), ("hf:org/name", "sharegpt"), (str(one), "oasst")]
    parts = plan_parts(inputs, 1000, can_split=lambda path, fmt: fmt != "oasst")
    assert parts == plan_parts(inputs, 1000, can_split=lambda path, fmt: fmt != "oasst")
    assert [(u.path, u.format, u.input_index) for u in parts if u.start is None] == [
        (f"{data}/a.jsonl", "auto", 0),
        (f"{data}/c.jsonl.zst", "auto", 0),
        ("hf:org/name", "sharegpt", 1),
        (str(one), "oasst", 2),
    ]
    split = [u for u in parts if u.path.endswith("b.jsonl")]
    assert len(split) > 2 and [u.id for u in split[:2]] == ["000-00001-0000", "000-00001-0001"]
    assert parts == sorted(parts) and len({u.id for u in parts}) == len(parts)
    assert parts[0].id == "000-00000-0000" and parts[-1].id == "002-00000-0000"


@pytest.fixture
def job(tmp_path: Path, data: Path) -> list:
    """Parts over real files: two split JSON Lines files and the OpenAI samples (6 KiB parts
    of the copies in tests/data; ../shared's full files were cut in 64 KiB parts)."""
    return plan_parts(
        [
            (str(data / "realdata/llamafactory/v1_sft_demo.jsonl"), "auto"),
            (str(data / "realdata/openai_finetune_examples/toy_chat_fine_tuning.jsonl"), "auto"),
            (str(REPO / "data_samples/openai"), "openai"),
        ],
        6 * 1024,
    )


def test_workers_1_and_2_write_identical_part_dirs(tmp_path: Path, job: list) -> None:
    assert len(job) >= 8
    seen: list[tuple[int, int]] = []
    one = run_parts(
        job, convert_part, tmp_path / "w1", config_digest="c", progress=lambda *p: seen.append(p)
    )
    two = run_parts(job, convert_part, tmp_path / "w2", config_digest="c", workers=2)
    assert [d.name for d in one] == [d.name for d in two] == [u.id for u in job]
    assert seen == [(done, len(job)) for done in range(len(job) + 1)]
    for a, b in zip(one, two, strict=True):
        assert tree_bytes(a) == tree_bytes(b)
        assert (a / "DONE").read_text().splitlines()[0] == a.name
    threads = b"".join((d / "threads.jsonl").read_bytes() for d in one)
    assert threads.count(b"\n") > 80  # the copies in tests/data and the samples: 86


def test_resume_redoes_only_unfinished_parts(tmp_path: Path, job: list) -> None:
    log = tmp_path / "calls.log"
    process = functools.partial(convert_part, log=str(log))
    dirs = run_parts(job, process, tmp_path / "work")
    first = {d.name: tree_bytes(d) for d in dirs}
    assert log.read_text().split() == [u.id for u in job]
    assert run_parts(job, process, tmp_path / "work") == dirs
    assert log.read_text().split() == [u.id for u in job]  # all DONE: nothing rerun
    (dirs[1] / "DONE").unlink()  # a part dir without DONE is redone
    (dirs[3] / "threads.jsonl").write_bytes(b"")  # cut short, without DONE
    (dirs[3] / "DONE").unlink()
    log.write_text("")
    run_parts(job, process, tmp_path / "work", workers=2)
    assert sorted(log.read_text().split()) == [dirs[1].name, dirs[3].name]
    assert {d.name: tree_bytes(d) for d in dirs} == first


def test_a_failing_part_names_itself_and_leaves_the_others_done(tmp_path: Path, job: list) -> None:
    bad = job[2]
    work = tmp_path / "work"
    with pytest.raises(PartFailed, match=f"part {bad.id} \\({bad.path} bytes .*refusing"):
        run_parts(job, functools.partial(convert_part, fail=bad.id), work, workers=2)
    done = sorted(p.parent.name for p in (work / "parts").glob("*/DONE"))
    assert bad.id not in done and not (work / "parts" / bad.id).exists()
    assert sorted(os.listdir(work / "parts")) == done
    assert not any((work / "partial").iterdir())
    log = tmp_path / "calls.log"
    run_parts(job, functools.partial(convert_part, log=str(log)), work)
    assert set(log.read_text().split()) == {u.id for u in job} - set(done)
    with pytest.raises(PartFailed, match=f"part {job[0].id} \\("):
        run_parts(job, functools.partial(convert_part, fail=job[0].id), tmp_path / "other")


def test_a_workdir_of_another_plan_is_refused_until_reset(tmp_path: Path, job: list) -> None:
    work = tmp_path / "work"
    run_parts(job[:2], convert_part, work, config_digest="sha256:aaa")
    with pytest.raises(WorkdirError, match=r"config changed: sha256:aaa -> sha256:bbb.*--fresh"):
        run_parts(job[:2], convert_part, work, config_digest="sha256:bbb")
    with pytest.raises(WorkdirError, match="the parts differ"):
        run_parts(job[:3], convert_part, work, config_digest="sha256:aaa")
    (work / "keep.txt").write_text("not the engine's")
    reset_workdir(work)
    assert sorted(os.listdir(work)) == ["keep.txt", "run.lock", "workers.lock"]
    assert len(run_parts(job[:3], convert_part, work, config_digest="sha256:bbb")) == 3


def test_a_workdir_of_the_units_layout_is_refused_never_mixed(tmp_path: Path, job: list) -> None:
    """A work directory an earlier version left (plan version 1: its finished parts listed
    as `units` and kept in `units/`) is refused, naming --fresh, and never read; --fresh
    removes its `units/` too."""
    work = tmp_path / "work"
    run_parts(job[:2], convert_part, work, config_digest="c")
    plan = orjson.loads((work / "plan.json").read_bytes())
    old = {key: value for key, value in plan.items() if key != "parts"}
    old.update(version="mms-local-engine-1", units=plan["parts"])
    (work / "plan.json").write_bytes(orjson.dumps(old))
    (work / "parts").rename(work / "units")
    with pytest.raises(WorkdirError, match=r"planned by mms-local-engine-1, not .*--fresh"):
        run_parts(job[:2], convert_part, work, config_digest="c")
    assert not (work / "parts").exists() and len(os.listdir(work / "units")) == 2
    reset_workdir(work)
    assert sorted(os.listdir(work)) == ["run.lock", "workers.lock"]
    assert len(run_parts(job[:2], convert_part, work, config_digest="c")) == 2


def test_a_changed_input_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(_chat_lines(5))
    parts = plan_parts([(str(path), "openai")])
    run_parts(parts, convert_part, tmp_path / "work", watched=[str(path)])
    path.write_bytes(_chat_lines(6))
    again = plan_parts([(str(path), "openai")])
    with pytest.raises(WorkdirError, match=f"{path} is new or changed"):
        run_parts(again, convert_part, tmp_path / "work", watched=[str(path)])


KILLED_RUN = """
import functools, sys
from pathlib import Path
from pipeline.engine import run_parts
from pipeline.sources.parts import plan_parts
from tests.engine_work import convert_part
parts = plan_parts([(sys.argv[1], "openai")], int(sys.argv[2]))
process = functools.partial(convert_part, log=sys.argv[4], delay=0.25)
run_parts(parts, process, Path(sys.argv[3]), workers=2)
"""


def test_a_run_killed_with_sigkill_resumes_to_the_same_bytes(tmp_path: Path) -> None:
    source = tmp_path / "chats.jsonl"
    source.write_bytes(_chat_lines(400))
    split = source.stat().st_size // 20
    parts = plan_parts([(str(source), "openai")], split)
    assert len(parts) >= 20
    work, log = tmp_path / "work", tmp_path / "calls.log"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(KILLED_RUN),
            str(source),
            str(split),
            str(work),
            str(log),
        ],
        cwd=REPO,
    )
    deadline = time.monotonic() + 60
    while len(list(work.glob("parts/*/DONE"))) < 4:
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    assert child.wait(10) == -signal.SIGKILL
    time.sleep(0.6)  # longer than a part: workers of the killed run must not go on
    finished = sorted(work.glob("parts/*/DONE"))
    assert 4 <= len(finished) < len(parts)
    time.sleep(0.6)
    assert sorted(work.glob("parts/*/DONE")) == finished
    log.write_text("")
    resumed = run_parts(parts, functools.partial(convert_part, log=str(log)), work, workers=2)
    assert len(log.read_text().split()) == len(parts) - len(finished)
    clean = run_parts(parts, convert_part, tmp_path / "clean")
    assert [tree_bytes(d) for d in resumed] == [tree_bytes(d) for d in clean]


@pytest.mark.parametrize("workers", [1, 2])
def test_iter_parts_hands_over_parts_in_order_and_stops_when_closed(
    tmp_path: Path, job: list, workers: int
) -> None:
    """A caller reduces each part as soon as it and the ones before it are done; closing
    the iterator early runs no further part (one process: none; a pool: only those already
    handed to a worker), and a resume runs the rest, none twice."""
    log = tmp_path / "calls.log"
    process = functools.partial(convert_part, log=str(log), delay=0.3)
    claimed: list[bool] = []
    part_dirs = iter_parts(
        job, process, tmp_path / "w", workers=workers, on_claimed=lambda: claimed.append(True)
    )
    first = next(part_dirs)
    assert claimed == [True] and first.name == job[0].id and (first / "DONE").is_file()
    part_dirs.close()
    done = sorted(p.parent.name for p in (tmp_path / "w" / "parts").glob("*/DONE"))
    assert job[0].id in done and (workers > 1 or done == [job[0].id])
    rest = run_parts(job, functools.partial(convert_part, log=str(log)), tmp_path / "w")
    assert [d.name for d in rest] == [u.id for u in job]
    calls = log.read_text().split()
    assert len(calls) == len(set(calls)) == len(job)  # no part ran twice, none was lost


def test_workers_share_the_cores_in_native_thread_pools(
    tmp_path: Path, job: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers on this machine each size the `tokenizers` (Rayon) and polars pools to
    half its cores, not all of them; a size the user set is kept."""
    for name in ("RAYON_NUM_THREADS", "POLARS_MAX_THREADS"):
        monkeypatch.delenv(name, raising=False)
    share = str(max(1, (os.cpu_count() or 1) // 2))
    dirs = run_parts(job, record_pool_sizes, tmp_path / "w", workers=2)
    assert {(d / "pool_sizes.txt").read_text() for d in dirs} == {f"{share} {share}"}
    monkeypatch.setenv("RAYON_NUM_THREADS", "7")
    dirs = run_parts(job, record_pool_sizes, tmp_path / "again", workers=2)
    assert {(d / "pool_sizes.txt").read_text() for d in dirs} == {f"7 {share}"}


def test_map_tasks_runs_a_few_small_tasks_here_and_the_others_in_workers() -> None:
    runner = LocalRunner(2)
    here = os.getpid()
    assert runner.map_tasks([PidTask(10), PidTask(local.HERE_ROWS - 10)]) == [here, here]
    in_workers = runner.map_tasks([PidTask(10), PidTask(local.HERE_ROWS)])
    assert here not in in_workers  # more rows than HERE_ROWS in all
    assert here not in runner.map_tasks([PidTask(10), PidTask(None)])  # one says nothing
