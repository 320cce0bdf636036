"""Plugins isolated by contract: a curator's plugin that changes the thread it sees,
exits, raises, returns what is not a reason or JSON tags, prints or never returns either
fails with one clear line naming it (exit 1, never the exit 3 of a bug) or leaves the
output exactly what it would be (every thread written valid MMS, the original plus
`meta.plugins`, standard output's JSON Lines whole), through `mms curate` to a file and
to standard output, and `mms run` on one and on two workers."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from pipeline import read
from pipeline.cli import main
from pipeline.jobs.batch_steps import map_batch
from pipeline.mms import validate_thread_dict
from pipeline.stages.contract import Batch, Stage, StageError
from pipeline.stages.curate.plugins import PluginError, Plugins, PluginSpec
from tests.conftest import REPO

MODULE = "hostile_filters"


@dataclass(frozen=True)
class Hostile:
    """A plugin `def NAME(thread): BODY`, what the error it causes says (None: no error,
    the output is isolated), and the seconds it may take."""

    name: str
    body: str
    says: str | None = None
    timeout: float = 60.0


HOSTILE = [
    Hostile("clears_messages", "thread.messages.clear()", "read-only thread"),
    Hostile("sets_meta", "thread.meta['mine'] = 1", "read-only thread"),
    Hostile("assigns_meta", "thread.meta = {}", "read-only thread"),
    Hostile("edits_notes", "thread.meta.setdefault('notes', []).append('x')", "read-only thread"),
    Hostile("edits_content", "thread.messages[0].content = 'changed'", "FrozenInstanceError"),
    Hostile("swaps_message", "thread.messages[0] = thread.messages[-1]", "read-only thread"),
    Hostile("exits_0", "sys.exit(0)", "raised SystemExit: 0"),
    Hostile("exits_3", "sys.exit(3)", "raised SystemExit: 3"),
    Hostile("blocks", "threading.Event().wait()", "within its timeout (0.2 s)", 0.2),
    Hostile("sleeps", "time.sleep(3600)", "within its timeout (0.2 s)", 0.2),
    Hostile("raises", "raise ValueError('boom')", "raised ValueError: boom"),
    Hostile("set_tags", "return {'seen': {1, 2}}", "tags that are not JSON"),
    Hostile("object_tags", "return {'seen': object()}", "tags that are not JSON"),
    Hostile("key_tags", "return {1: 'one'}", "tags that are not JSON"),
    Hostile("returns_int", "return 1", "returned int"),
    Hostile("returns_list", "return ['a']", "returned list"),
    Hostile("empty_reason", "return ''", "returned an empty reason"),
    Hostile("prints", "print('noise')"),
    Hostile("prints_to_stderr", "print('noise', file=sys.stderr)"),
    Hostile("writes_fd_1", "os.write(1, b'noise\\n')"),
    Hostile("tags", "return {'turns': len(thread.messages), 'meta': thread.meta}"),
    Hostile("copies_and_edits", "copy.deepcopy(thread).meta['x'] = dict(thread.meta)"),
]
"""Each hostile plugin: adding one is one line."""
PRINTING = [pytest.param(p, id=p.name) for p in HOSTILE if p.name.startswith(("prints", "writes"))]
"""The plugins that print: run in a process of their own too, where standard output is a
file descriptor."""


def _module_text() -> str:
    header = "import copy, os, sys, threading, time\n"
    return header + "".join(f"\ndef {p.name}(thread):\n    {p.body}\n" for p in HOSTILE)


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The hostile plugins' module in `tmp_path/plugins`, importable; the inputs (two files,
    so two workers each run a part) in `tmp_path/in`; `tmp_path` the working folder."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / f"{MODULE}.py").write_text(_module_text())
    monkeypatch.syspath_prepend(str(plugins))
    monkeypatch.chdir(tmp_path)
    inputs = tmp_path / "in"
    inputs.mkdir()
    for index in range(2):
        records = [
            {
                "messages": [
                    {"role": "user", "content": f"Question {index}.{n}?"},
                    {"role": "assistant", "content": f"Answer {index}.{n}."},
                ]
            }
            for n in range(3)
        ]
        (inputs / f"chats{index}.jsonl").write_bytes(
            b"".join(orjson.dumps(record) + b"\n" for record in records)
        )
    yield tmp_path
    sys.modules.pop(MODULE, None)


def mms(*args: object) -> Result:
    return CliRunner().invoke(main, [str(arg) for arg in args])


def _originals(folder: Path) -> dict[str, dict]:
    """The threads of the inputs as read, by id (what a written thread must be, its
    `meta.plugins` aside)."""
    return {thread.id: thread.to_dict() for thread in read(str(folder / "in"))}


def _check_isolated(lines: list[bytes], folder: Path) -> None:
    """Every line a valid MMS thread: an input's thread with at most `meta.plugins` added."""
    originals = _originals(folder)
    assert len(lines) == len(originals)
    for line in lines:
        written = orjson.loads(line)
        assert validate_thread_dict(written) == []
        written["meta"].pop("plugins", None)
        assert written == originals[written["id"]]


def _check_error(result: Result, plugin: Hostile) -> None:
    """Exit 1 with one error line naming the plugin, the thread and what went wrong."""
    assert plugin.says is not None
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert f"plugin {MODULE}:{plugin.name} " in errors[0], errors[0]
    assert plugin.says in errors[0], errors[0]
    assert " on thread " in errors[0] or " for thread " in errors[0], errors[0]
    assert "Traceback" not in result.output


def _curate(folder: Path, plugin: Hostile, output: Path | str) -> Result:
    """`mms curate` of the inputs with the plugin and its timeout."""
    return mms(
        "curate",
        folder / "in",
        "-o",
        output,
        "--plugin",
        f"{MODULE}:{plugin.name}",
        "--plugin-timeout",
        plugin.timeout,
    )


CASES = [pytest.param(plugin, id=plugin.name) for plugin in HOSTILE]


@pytest.mark.parametrize("plugin", CASES)
def test_curate_to_a_file(hostile: Path, plugin: Hostile) -> None:
    out = hostile / "out.jsonl"
    result = _curate(hostile, plugin, out)
    if plugin.says is not None:
        _check_error(result, plugin)
        assert not out.exists()
        return
    assert result.exit_code == 0, result.output
    _check_isolated(out.read_bytes().splitlines(), hostile)


@pytest.mark.parametrize("plugin", CASES)
def test_curate_to_standard_output(hostile: Path, plugin: Hostile) -> None:
    result = _curate(hostile, plugin, "-")
    if plugin.says is not None:
        _check_error(result, plugin)
        assert result.stdout_bytes == b""
        return
    assert result.exit_code == 0, result.output
    _check_isolated(result.stdout_bytes.splitlines(), hostile)


def _run_config(folder: Path, plugin: Hostile, workers: int) -> Path:
    """A run of the inputs with the plugin (tagging) on `workers` workers, no shard gate."""
    config = folder / f"{plugin.name}-{workers}.yaml"
    use = {"use": f"{MODULE}:{plugin.name}", "action": "tag", "timeout": plugin.timeout}
    config.write_text(
        f"name: hostile\ninputs:\n  - path: {folder / 'in'}\n"
        f"output: {folder / f'out-{workers}'}\n"
        f"stages:\n  lint: {{fail_on: never}}\n  plugins: [{orjson.dumps(use).decode()}]\n"
        f"engine: {{workers: {workers}}}\n"
    )
    return config


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("plugin", CASES)
def test_run(hostile: Path, plugin: Hostile, workers: int) -> None:
    result = mms("run", _run_config(hostile, plugin, workers))
    if plugin.says is not None:
        _check_error(result, plugin)
        return
    assert result.exit_code == 0, result.output
    shards = read(str(hostile / f"out-{workers}" / "data"))
    # a shard read back keeps the thread's own meta under `upstream`
    written = [{**thread.to_dict(), "meta": thread.meta["upstream"]} for thread in shards]
    _check_isolated([orjson.dumps(thread) for thread in written], hostile)


def test_a_timeout_holds_off_the_main_thread_too(hostile: Path) -> None:
    """Where no signal can be handled (a thread other than the process's main one), the
    call runs on a thread of its own and the caller stops waiting when its time is up."""
    stage = Plugins((PluginSpec(f"{MODULE}:blocks", timeout=0.2),))
    thread = next(read(str(hostile / "in")))
    with ThreadPoolExecutor(1) as pool, pytest.raises(PluginError, match=r"timeout \(0.2 s\)"):
        pool.submit(stage.inspect, thread).result()
    kept = Plugins((PluginSpec(f"{MODULE}:tags"),))
    with ThreadPoolExecutor(1) as pool:
        finding = pool.submit(kept.inspect, thread).result()
    assert finding.thread.meta["plugins"]["tags"]["turns"] == 2


def _cli(folder: Path, *args: object) -> subprocess.CompletedProcess[bytes]:
    """`mms ARGS` in a process of its own, the plugins importable, in `folder`."""
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(folder / "plugins"), str(REPO)]),
    }
    command = [sys.executable, "-m", "pipeline.cli", *map(str, args)]
    return subprocess.run(command, cwd=folder, env=environment, capture_output=True, timeout=300)


@pytest.mark.parametrize("plugin", PRINTING)
def test_what_a_plugin_prints_never_reaches_the_data(hostile: Path, plugin: Hostile) -> None:
    """Standard output a file descriptor: `print`, `print(file=sys.stderr)` and writes to
    file descriptor 1 all go to standard error; standard output holds the JSON Lines."""
    done = _cli(hostile, "curate", "in", "-o", "-", "--plugin", f"{MODULE}:{plugin.name}")
    assert done.returncode == 0, done.stderr.decode()
    _check_isolated(done.stdout.splitlines(), hostile)
    assert b"noise" in done.stderr


def test_what_a_worker_prints_goes_to_standard_error(hostile: Path) -> None:
    """A run's worker processes send what they print to standard error."""
    plugin = next(p for p in HOSTILE if p.name == "writes_fd_1")
    done = _cli(hostile, "run", _run_config(hostile, plugin, 2))
    assert done.returncode == 0, done.stderr.decode()
    assert b"noise" not in done.stdout and b"noise" in done.stderr


class _Rewrites(Stage):
    """A stage that rewrites every thread with `change` (its own map side)."""

    name = "rewrites"

    def __init__(self, change: dict[str, object]):
        self.change = change

    def map(self, batch: Batch) -> Batch:
        batch.threads = [dataclasses.replace(t, **self.change) for t in batch.threads]
        return batch


def test_a_stage_that_makes_a_thread_invalid_is_an_error_naming_it(hostile: Path) -> None:
    """Every thread a stage rewrote is checked before any job writes it: one that is no
    longer MMS stops the job with an error naming the stage and the thread."""
    threads = list(read(str(hostile / "in")))
    with pytest.raises(StageError, match=r"stage rewrites made thread \w+ \(chats0.jsonl:1\)"):
        map_batch(Batch(threads), [_Rewrites({"messages": []})])
    with pytest.raises(StageError, match="meta is list"):
        map_batch(Batch(threads), [_Rewrites({"meta": []})])
    tagged = map_batch(Batch(threads), [_Rewrites({"meta": {"seen": 1}})])
    assert [thread.meta for thread in tagged.threads] == [{"seen": 1}] * len(threads)
