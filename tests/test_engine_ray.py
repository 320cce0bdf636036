"""The Ray engine (`--engine ray`): the same config writes the same bytes as the local
engine (the manifest's engine aside) for any number of Ray workers, with dedup, a mix and
three splits on real files; a run whose driver or a worker is killed ends with the same
bytes. The tests share one local Ray cluster started with `ray start` (two CPUs)."""

from __future__ import annotations

import functools
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from pipeline.engine import PartFailed, run_parts
from pipeline.jobs.run import shard_tasks
from pipeline.sources.parts import plan_parts
from tests.cluster_gate import add_gate, gate_of
from tests.conftest import REPO
from tests.engine_work import convert_part, note_prepared, numbered_task, tree_bytes
from tests.realdata_mix import write_mix_config
from tests.test_media_real import assert_media_published, write_copy_config
from tests.test_run import QUICKSTART, output_files, run_cli
from tests.test_run_faults import write_config as write_faults_config

pytest.importorskip("ray", reason="the ray extra is not installed (pip install '.[ray]')")

from pipeline.engine.ray import RayRunner, RaySettings, map_parts


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A local Ray cluster of two CPUs for the module's tests (without token
    authentication: it serves this machine's tests only), named by RAY_ADDRESS as `ray job
    submit` names one. `ray start --block` runs it; ending that command stops this cluster
    alone (`ray stop` would stop every Ray instance of the machine). Gives its address
    and the pid of `ray start`, whose descendants are the cluster's processes."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ray = str(Path(sys.executable).with_name("ray"))
    log = tmp_path_factory.mktemp("ray") / "ray-start.log"
    with open(log, "w") as out:
        head = subprocess.Popen(
            [ray, "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
             "--include-dashboard=false", "--disable-usage-stats"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "RAY_AUTH_MODE": "disabled"},
        )  # fmt: skip
    deadline = time.monotonic() + 120
    said = None
    while said is None:  # started: it says the address it gives itself (its node's IP)
        said = re.search(r"--address='([^']+)'", log.read_text(errors="replace"))
        assert head.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    address = said.group(1)
    previous = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = address
    try:
        yield address, head.pid
    finally:
        if previous is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = previous
        head.send_signal(signal.SIGTERM)
        head.wait(120)


@pytest.fixture(scope="module")
def ray_address(ray_head: tuple[str, int]) -> str:
    """The address of the module's Ray cluster (also in RAY_ADDRESS while it runs)."""
    return ray_head[0]


def _descendants(root: int) -> set[int]:
    """Every process under `root`, from the parent ids in /proc (a process that ends
    meanwhile is left out)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.add(child)
            todo.append(child)
    return found


def same_but_engine(local: dict[str, bytes], on_ray: dict[str, bytes]) -> None:
    """Every file byte-identical, the manifest but for the engine it names."""
    assert set(local) == set(on_ray)
    for name, data in local.items():
        got = on_ray[name]
        if name == "manifest.json":
            assert b'"kind": "ray"' in got
            got = got.replace(b'"kind": "ray"', b'"kind": "local"')
        assert got == data, f"{name} differs between the engines"


@pytest.fixture(scope="module")
def realdata(data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A config of real files (tests/data) — a mix (a weight, a sample, a file read twice),
    exact and near dedup, three splits — and the bytes the local engine writes for it."""
    folder = tmp_path_factory.mktemp("realdata")
    config = write_mix_config(folder / "ray-realdata.yaml", data / "realdata")
    add_gate(config)  # open, but for the test that kills a worker running a held part
    local = folder / "local" / "out"
    result = run_cli(str(config), "-o", str(local), "--workers", "2")
    assert result.exit_code == 0, result.output
    return config, output_files(local)


@pytest.mark.slow
def test_quickstart_writes_the_same_bytes_on_ray(tmp_path: Path, ray_address: str) -> None:
    local, on_ray = tmp_path / "local" / "out", tmp_path / "ray" / "out"
    assert run_cli(str(QUICKSTART), "-o", str(local)).exit_code == 0
    result = run_cli(str(QUICKSTART), "-o", str(on_ray), "--engine", "ray")
    assert result.exit_code == 0, result.output
    same_but_engine(output_files(local), output_files(on_ray))


def test_realdata_with_dedup_a_mix_and_three_splits_is_the_same_for_any_workers(
    realdata: tuple[Path, dict], tmp_path: Path, ray_address: str
) -> None:
    config, expected = realdata
    counts = orjson.loads(expected["manifest.json"])["counts"]
    dropped = counts["threads_dropped"]
    assert dropped["duplicate"] > 0 and dropped["near_duplicate"] > 0
    assert counts["weighted_copies"] > 0 and dropped["sampled_out"] > 0
    assert {"data/train-00000-of-00001.parquet", "data/test-00000-of-00001.parquet"} <= set(
        expected
    )
    assert any(name.startswith("data/validation-") for name in expected)
    for workers in ("1", "2"):
        out = tmp_path / f"ray{workers}" / "out"
        result = run_cli(str(config), "-o", str(out), "--engine", "ray", "--workers", workers)
        assert result.exit_code == 0, result.output
        same_but_engine(expected, output_files(out))


def _ray_child(config: Path, out: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "pipeline.cli", "run", str(config), "-o", str(out)]
    return subprocess.Popen(
        [*command, "--engine", "ray", "--workers", "2"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _wait_for_parts(parts: Path, count: int, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while len(list(parts.glob("*/DONE"))) < count:
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        assert time.monotonic() < deadline, "the Ray run made no progress"
        time.sleep(0.02)


def test_a_ray_run_whose_driver_is_killed_resumes_to_the_same_bytes(
    realdata: tuple[Path, dict], tmp_path: Path, ray_address: str
) -> None:
    config, expected = realdata
    out = tmp_path / "killed" / "out"
    child = _ray_child(config, out)
    parts = out / ".work" / "parts"
    _wait_for_parts(parts, 3, child)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    done = len(list(parts.glob("*/DONE")))
    total = len(orjson.loads((out / ".work" / "plan.json").read_bytes())["parts"])
    assert 3 <= done < total, f"the run was not killed mid-way ({done} of {total} parts done)"
    assert not (out / "manifest.json").exists()
    resumed = run_cli(str(config), "-o", str(out), "--engine", "ray")
    assert resumed.exit_code == 0, resumed.output
    same_but_engine(expected, output_files(out))


def test_a_ray_run_whose_worker_is_killed_finishes_with_the_same_bytes(
    realdata: tuple[Path, dict], tmp_path: Path, ray_head: tuple[str, int]
) -> None:
    config, expected = realdata
    out = tmp_path / "worker" / "out"
    gate = gate_of(config)
    gate.unlink()  # the held parts (tests/cluster_gate.py) run until the worker is killed
    try:
        child = _ray_child(config, out)
        _wait_for_parts(out / ".work" / "parts", 1, child)
        # a worker running a part's task: Ray titles it `ray::` and the remote function's name
        running = f"ray::{map_parts.__name__}"
        ours = _descendants(ray_head[1])  # not a worker of another Ray cluster of this machine
        pids: list[int] = []
        deadline = time.monotonic() + 60
        while not pids and time.monotonic() < deadline:
            found = subprocess.run(["pgrep", "-f", running], capture_output=True, text=True)
            pids = [int(pid) for pid in found.stdout.split() if int(pid) in ours]
            time.sleep(0.05)
        assert pids, "no Ray worker running a part was found"
        os.kill(pids[0], signal.SIGKILL)
    finally:
        gate.touch()
    assert child.wait(180) == 0, child.stderr.read() if child.stderr else ""
    same_but_engine(expected, output_files(out))


def test_a_failing_part_on_ray_is_named(tmp_path: Path, ray_address: str) -> None:
    parts = plan_parts([(str(REPO / "data_samples" / "openai"), "openai")])
    bad = parts[1]
    with RayRunner(RaySettings(workers=2)) as runner, pytest.raises(PartFailed) as failed:
        process = functools.partial(convert_part, fail=bad.id)
        run_parts(parts, process, tmp_path / "work", runner=runner)
    assert bad.id in str(failed.value) and "ValueError: refusing part" in str(failed.value)
    with RayRunner(RaySettings(workers=2)) as runner:
        on_ray = run_parts(parts, convert_part, tmp_path / "work", runner=runner)
    local = run_parts(parts, convert_part, tmp_path / "local")
    assert [tree_bytes(d) for d in on_ray] == [tree_bytes(d) for d in local]


def test_map_tasks_on_ray_keep_a_few_in_flight_and_raise_the_first_failure(
    tmp_path: Path, ray_address: str
) -> None:
    """Results come in the tasks' order; after a failure nothing more is submitted (at
    most two tasks per worker were), the ones in flight end, and the first failure in
    task order is raised."""
    log = tmp_path / "tasks.log"
    tasks = [functools.partial(numbered_task, str(log), n) for n in range(30)]
    finished: list[int] = []
    with RayRunner(RaySettings(workers=2)) as runner:
        assert runner.map_tasks(tasks, finished.append) == [n * n for n in range(30)]
    assert finished[-1] == 30 and finished == sorted(finished)
    log.unlink()
    failing = [functools.partial(numbered_task, str(log), n, (7, 9)) for n in range(30)]
    with RayRunner(RaySettings(workers=2)) as runner, pytest.raises(ValueError) as raised:
        runner.map_tasks(failing)
    assert "task 7 refuses" in str(raised.value)
    ran = {int(line) for line in log.read_text().split()}  # Ray may run a task twice
    # every task before the first failure ran; after a failure nothing more is submitted
    # (4 batches of 3 in flight: a later one that finished first let one more in)
    assert set(range(8)) <= ran and max(ran) < 20, sorted(ran)


def test_runs_in_a_session_of_the_caller_prepare_each_worker_once_and_do_not_wait(
    tmp_path: Path, ray_address: str
) -> None:
    """A Ray session the caller started outlives a run, and so do its worker processes: a
    second run on the same work directory (here after a failed one) starts at once (a
    worker holds the workers lock only while it runs a part) and prepares each worker
    process once for itself."""
    import ray

    parts = plan_parts([(str(REPO / "data_samples" / "openai"), "openai")])
    work = tmp_path / "work"
    logs = [tmp_path / "prepared-1.log", tmp_path / "prepared-2.log"]
    ray.init(address=ray_address, log_to_driver=False)
    try:
        with RayRunner(RaySettings(workers=2)) as runner, pytest.raises(PartFailed):
            process = functools.partial(convert_part, fail=parts[-1].id)
            prepare = functools.partial(note_prepared, str(logs[0]))
            run_parts(parts, process, work, runner=runner, prepare_workers=prepare)
        # a worker holding the lock for its life would make this run wait, then fail
        # (WorkdirError): finishing at all is the check
        with RayRunner(RaySettings(workers=2)) as runner:
            prepare = functools.partial(note_prepared, str(logs[1]))
            on_ray = run_parts(parts, convert_part, work, runner=runner, prepare_workers=prepare)
    finally:
        ray.shutdown()
    for log in logs:
        pids = log.read_text().split()
        assert pids and len(pids) == len(set(pids)), f"not once per worker process: {pids}"
    local = run_parts(parts, convert_part, tmp_path / "local")
    assert [tree_bytes(d) for d in on_ray] == [tree_bytes(d) for d in local]


def test_without_ray_installed_the_engine_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    result = run_cli(str(QUICKSTART), "-o", str(tmp_path / "out"), "--engine", "ray")
    assert result.exit_code == 2
    assert "pip install 'mms-pipeline[ray]'" in result.output


def test_ray_address_needs_the_ray_engine(tmp_path: Path) -> None:
    result = run_cli(str(QUICKSTART), "-o", str(tmp_path), "--ray-address", "auto")
    assert result.exit_code == 2 and "--ray-address applies only with --engine ray" in result.output
    assert not (tmp_path / "manifest.json").exists()


def _on_both_engines(config: Path, tmp_path: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The files `config` writes on the local engine and on Ray (two workers each), in
    folders of the same name (the card names its folder)."""
    outputs = []
    for engine in ("local", "ray"):
        out = tmp_path / engine / "out"
        result = run_cli(str(config), "-o", str(out), "--engine", engine, "--workers", "2")
        assert result.exit_code == 0, result.output
        outputs.append(output_files(out))
    return outputs[0], outputs[1]


CURATION_PLUGIN = """
def no_urls(thread):
    return "has urls" if any("http" in m.content for m in thread.messages) else None
"""


def test_a_curating_run_writes_the_same_bytes_on_ray(
    tmp_path: Path, ray_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All five curation stages, a curator's plugin among them: Ray puts the directory the
    run starts from on its workers' path, as a curator runs from their project."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ray_curation_filters.py").write_text(CURATION_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    mt_bench = REPO / "data_samples" / "mt-bench" / "question.jsonl"
    prompt = orjson.loads(mt_bench.read_bytes().splitlines()[0])["turns"][0]
    chats = [(f"Mail {n}@example.com about item {n}", f"Item {n} is done.") for n in range(20)]
    chats += [
        (prompt, "Here it is."),
        ("法国的首都是哪里? 请告诉我。", "是巴黎。这是法国的首都。"),
        ("see http://x.example", "ok"),
        ("Say it.", "I'm sorry, but as an AI language model I cannot do that."),
    ]
    source = tmp_path / "in.jsonl"
    source.write_bytes(
        b"".join(
            orjson.dumps(
                {"messages": [{"role": "user", "content": u}, {"role": "assistant", "content": a}]}
            )
            + b"\n"
            for u, a in chats
        )
    )
    config = tmp_path / "curate.yaml"
    config.write_text(
        f"name: curated\ninputs:\n  - path: {source}\noutput: out\n"
        "stages:\n  lint: {fail_on: never}\n  pii: {}\n  language: {languages: [en]}\n"
        f"  quality: {{action: drop}}\n  decontaminate: {{against: [{mt_bench}]}}\n"
        "  plugins: [{use: 'ray_curation_filters:no_urls'}]\n"
        f"  tokenize: {{tokenizer: {REPO / 'configs' / 'sample_tokenizer'}}}\n"
        "  shard: {rows_per_shard: 5}\n"
    )
    expected, on_ray = _on_both_engines(config, tmp_path)
    counts = orjson.loads(expected["manifest.json"])["counts"]
    assert counts["threads_dropped"] == {
        "contaminated": 1,
        "language:zh": 1,
        "plugin:no_urls:has urls": 1,
        "quality:refusal": 1,
    }
    assert counts["threads_tagged"]["pii:redacted:EMAIL"] == 20
    same_but_engine(expected, on_ray)


def test_a_preference_run_writes_the_same_bytes_on_ray(tmp_path: Path, ray_address: str) -> None:
    """Pair rows (`objective: preference`), a weighted input among them, are the
    same bytes on both engines."""
    samples = REPO / "data_samples"
    config = tmp_path / "pairs.yaml"
    config.write_text(
        "name: pairs\ninputs:\n"
        f"  - path: {samples / 'openai' / 'preference.jsonl'}\n    weight: 2\n"
        f"  - path: {samples / 'hh-rlhf' / 'pairs.jsonl'}\n"
        f"  - path: {samples / 'alpaca' / 'preference.json'}\n"
        "output: out\nstages:\n  lint: {fail_on: never}\n"
        f"  tokenize: {{tokenizer: {REPO / 'configs' / 'sample_tokenizer'}, objective: preference}}\n"
        "  shard: {rows_per_shard: 3}\n"
    )
    expected, on_ray = _on_both_engines(config, tmp_path)
    assert any(name.startswith("data/train-") for name in expected)
    same_but_engine(expected, on_ray)


def test_copy_mode_writes_the_same_media_on_ray(tmp_path: Path, ray_address: str) -> None:
    """`stages.media.copy` on real media (LLaMA-Factory's images, video and
    audio, xtuner's photographs), small shards in two splits: Ray's workers check and copy
    them, its shard tasks publish media/ once each, and every file (shards, manifest,
    media/) is the local engine's."""
    config = write_copy_config(tmp_path / "copy.yaml", tmp_path / "unused")
    expected, on_ray = _on_both_engines(config, tmp_path)
    assert_media_published(expected)
    same_but_engine(expected, on_ray)


@pytest.mark.slow
def test_a_full_disk_in_a_shard_task_on_ray_is_the_resumable_error(
    tmp_path: Path, ray_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard task that cannot write on a Ray worker: exit 1 naming the phase and the
    file, as on the local engine; started again, the run ends with the local run's bytes."""
    config = write_faults_config(tmp_path)
    local = tmp_path / "local" / "out"  # the card names the output folder
    assert run_cli(str(config), "-o", str(local)).exit_code == 0
    plan_tasks = shard_tasks.plan_shard_tasks

    def blocked(*args: Any) -> Any:
        tasks = plan_tasks(*args)
        data: Path = args[-1]
        if data.is_dir():
            data.rmdir()
        data.write_bytes(b"")  # a file where the tasks write their shards
        return tasks

    out = tmp_path / "ray" / "out"
    with monkeypatch.context() as patch:
        patch.setattr(shard_tasks, "plan_shard_tasks", blocked)
        failed = run_cli(str(config), "-o", str(out), "--engine", "ray")
    assert failed.exit_code == 1, failed.output
    assert f"error: phase 'write shards' failed on {out / '.work' / 'publish' / 'data'}" in (
        failed.output
    )
    resumed = run_cli(str(config), "-o", str(out), "--engine", "ray")
    assert resumed.exit_code == 0, resumed.output
    same_but_engine(output_files(local), output_files(out))
