"""Nothing of a PPE script is ever run or opened: `!fn` code that would start a process
is kept as text, `import:` entries and `[[@file(...)]]` targets are never opened, Python
YAML tags and alias bombs are refused, and templates cannot reach interpreter internals."""

from __future__ import annotations

import builtins
import io
import os
import pathlib
import subprocess
from contextlib import contextmanager

import pytest

from pipeline.formats import FORMATS
from pipeline.formats.base import ConvertOptions
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record, TextDocument
from tests.reading import read_all

PROCESS_FUNCTIONS = {
    subprocess: ("Popen", "run", "call", "check_call", "check_output", "getoutput"),
    os: ("system", "popen", "execv", "execve", "execvp", "spawnv", "posix_spawn", "fork"),
}


@pytest.fixture
def no_processes(monkeypatch):
    """Any attempt to start a process fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"a process was started: {args!r}")

    for module, names in PROCESS_FUNCTIONS.items():
        for name in names:
            if hasattr(module, name):
                monkeypatch.setattr(module, name, refuse)


@contextmanager
def files_opened(monkeypatch):
    """Every file opened (by builtins.open, io.open, os.open or Path.open) while inside."""
    opened: list[str] = []

    def spy(original):
        def wrapper(file, *args, **kwargs):
            opened.append(os.fspath(file) if not isinstance(file, int) else f"fd {file}")
            return original(file, *args, **kwargs)

        return wrapper

    with monkeypatch.context() as patch:
        patch.setattr(builtins, "open", spy(builtins.open))
        patch.setattr(io, "open", spy(io.open))
        patch.setattr(os, "open", spy(os.open))
        path_open = pathlib.Path.open
        patch.setattr(pathlib.Path, "open", lambda self, *a, **k: spy(path_open)(self, *a, **k))
        yield opened


def to_threads(text):
    """The PPE adapter on one script, as the reader hands it over."""
    source = "script.ai.yaml"
    record = Record(source, source, TextDocument("ppe", text), raw=text.encode())
    return FORMATS["ppe"].to_threads(record, ConvertOptions())


def test_fn_code_that_would_start_a_process_is_kept_as_text(tmp_path, no_processes):
    marker = tmp_path / "ran"
    javascript = f"[js]pwn() {{ return require('child_process').execSync('touch {marker}') }}"
    python = f"[python] def pwn():\n  __import__('os').system('touch {marker}')"
    script = tmp_path / "pwn.ai.yaml"
    script.write_text(
        f"!fn |-\n  {javascript}\n"
        "!fn# |-\n  " + python.replace("\n", "\n  ") + "\n"
        "$pwn: {}\n"
        "$exec:\n  filename: pwn\n"
        "system: Be safe.\n"
        "---\n"
        "user: Hello\n"
        "assistant: '[[@$pwn]] [[AI]]'\n"
        "---\n"
        "user: Hi\n"
        'assistant: "[[AI]]"\n'
    )
    (thread,), rejected, _ = read_all(script)
    assert not marker.exists()
    assert [r.code for r in rejected] == []
    kept = {entry["construct"]: entry["reason"] for entry in thread.meta["unrenderable"]}
    assert kept[f"!fn {javascript}"] == "function code is kept as text and never run"
    assert kept[f"!fn# {python}"] == "function code is kept as text and never run"
    assert "$pwn: {}" in kept and '$exec: {"filename":"pwn"}' in kept
    assert any("`[[@$pwn]]` at line 12" in note for note in thread.meta["notes"])
    assert [m.content for m in thread.messages] == ["Be safe.", "Hi"]


def test_a_template_cannot_call_a_fn_block(tmp_path, no_processes):
    marker = tmp_path / "ran"
    found = read_all_one_rejection(
        tmp_path,
        f"!fn# |-\n  run() {{ require('child_process').execSync('touch {marker}') }}\n"
        'user: "{{ run() }}"\n',
    )
    assert not marker.exists()
    assert found.code == "unrenderable_template" and "run()" in found.message


def read_all_one_rejection(tmp_path, text):
    path = tmp_path / "script.ai.yaml"
    path.write_text(text)
    threads, rejected, _ = read_all(path)
    assert threads == [] and len(rejected) == 1
    return rejected[0]


def test_imports_are_recorded_and_never_opened(tmp_path, monkeypatch):
    module = tmp_path / "tools.js"
    module.write_text("module.exports = { hi() { throw new Error('opened') } }\n")
    agent = tmp_path / "agent.ai.yaml"
    agent.write_text("user: this script is never opened\n")
    text = (
        "---\n"
        "import:\n"
        f"  - {module}: ['hi']\n"
        f"  - {agent}: asAgent\n"
        "  - js:child_process\n"
        "---\n"
        "system: Be brief.\n"
        "user: Hello\n"
    )
    to_threads(text)
    with files_opened(monkeypatch) as opened:
        (thread,) = to_threads(text)
    assert opened == []
    assert thread.meta["ppe"]["import"] == [
        {str(module): ["hi"]},
        {str(agent): "asAgent"},
        "js:child_process",
    ]
    assert any("never opened or run" in note for note in thread.meta["notes"])


def test_file_calls_are_never_opened(tmp_path, monkeypatch):
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret\n")
    text = f"system: Summarise.\nuser: '[[@file(/etc/passwd)]] and [[@file({secret})]]'\n"
    with pytest.raises(RecordRejected):
        to_threads(text)
    with files_opened(monkeypatch) as opened, pytest.raises(RecordRejected) as caught:
        to_threads(text)
    assert opened == []
    assert caught.value.code == "unrenderable_template"
    assert "`[[@file(/etc/passwd)]]` at line 2" in caught.value.message
    assert "root:" not in caught.value.message and "the secret" not in caught.value.message


def test_python_yaml_tags_are_refused(tmp_path, no_processes):
    marker = tmp_path / "ran"
    for text in (
        f"---\nx: !!python/object/apply:os.system ['touch {marker}']\n---\nuser: hi\n",
        f"user: hi\n$set:\n  x: !!python/object/apply:os.system ['touch {marker}']\n",
    ):
        found = read_all_one_rejection(tmp_path, text)
        assert found.code == "unsafe_yaml"
        assert "refused the YAML tag !!python/object/apply:os.system at line" in found.message
    assert not marker.exists()


def test_a_billion_laughs_body_is_refused(tmp_path):
    levels = ["a: &a ['lol','lol','lol','lol','lol','lol','lol','lol','lol']"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    body = "user: hi\n$set:\n" + "".join(f"  {level}\n" for level in levels)
    found = read_all_one_rejection(tmp_path, body)
    assert found.code == "invalid_yaml"
    assert "line 2: YAML rejected: the document expands to more than" in found.message


def test_a_template_reaching_for_interpreter_internals_is_refused(tmp_path):
    found = read_all_one_rejection(
        tmp_path, "system: Be safe.\nuser: \"{{ ''.__class__.__mro__ }}\"\n"
    )
    assert found.code == "unsafe_template"
    assert found.message.startswith("line 2: ")


def test_a_template_calling_os_system_runs_nothing(tmp_path, monkeypatch, no_processes):
    monkeypatch.chdir(tmp_path)
    found = read_all_one_rejection(
        tmp_path,
        "system: Be safe.\nuser: \"{{ cycler.__init__.__globals__.os.system('touch RAN') }}\"\n",
    )
    assert found.code in ("unsafe_template", "unrenderable_template")
    assert not (tmp_path / "RAN").exists()
