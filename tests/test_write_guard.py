"""Every place a command writes goes through the write guard: enumerated from the click
registry, each declared place is pointed at files the command must never touch (an
input, another output's places, a link, a user's file or folder) and must refuse with
exit 2 and one `error:` line naming the path, leaving every byte of the tree as it was;
pointed at a fresh place it writes, and run again it replaces its own files."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import click
import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import COMMANDS, main
from pipeline.cli.writes import declared_writes
from pipeline.output.files import written_by_mms
from pipeline.output.guard import claim_file, remove_leftovers
from tests.conftest import REPO
from tests.test_output_folder import thread

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
WRITING_NAMES = {"output", "quarantine", "dropped", "report", "out"}
"""Option names that name a place to write: a command with one must declare it (an
argument of these names, as `mms verify OUTPUT`, names what is read)."""


def command(name: str) -> click.Command:
    found = main.get_command(click.Context(main), name)
    assert found is not None
    return found


def mms(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(arg) for arg in args])
    return result.exit_code, result.stderr


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root` (links not followed) and what it holds."""
    found = {}
    for folder, subfolders, files in os.walk(root):
        for name in sorted(subfolders + files):
            path = Path(folder, name)
            key = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[key] = f"link:{os.readlink(path)}"
            elif path.is_file():
                found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[key] = "folder"
    return found


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Inputs, another mms output (tokenized), a user's folder and links into them."""
    root = tmp_path_factory.mktemp("guarded")
    inputs = root / "inputs"
    inputs.mkdir()
    lines = [orjson.dumps(thread(n)) for n in range(8)]
    (inputs / "threads.jsonl").write_bytes(b"\n".join(lines) + b"\n{broken\n")
    code, err = mms(
        "tokenize", inputs / "threads.jsonl", "--tokenizer", SAMPLE_TOKENIZER, "-o", root / "other"
    )
    assert code == 0, err
    (root / "config.yaml").write_text(
        f"name: guarded\ninputs:\n  - path: {inputs}\n"
        f"stages:\n  tokenize:\n    tokenizer: {SAMPLE_TOKENIZER}\n"
        f"output: {root / 'unused'}\n",
        encoding="utf-8",
    )
    user = root / "user"
    user.mkdir()
    (user / "notes.txt").write_text("mine\n", encoding="utf-8")
    (user / "out.rejected.jsonl").write_text("mine too\n", encoding="utf-8")
    (root / "to_other_data").symlink_to(root / "other" / "data")
    (root / "to_notes").symlink_to(user / "notes.txt")
    (root / "to_user").symlink_to(user)
    return root


Invocation = Callable[[Path, Path], list[object]]
"""The command line of a command writing its declared place at `target`, in `tree`."""

INVOCATIONS: dict[tuple[str, str], Invocation] = {
    ("run", "output"): lambda t, target: ["run", t / "config.yaml", "-o", target],
    ("convert", "output"): lambda t, target: ["convert", t / "inputs", "-o", target],
    ("convert", "quarantine"): lambda t, target: [
        "convert",
        t / "inputs",
        "-o",
        t / "scratch" / "q.jsonl",
        "--quarantine",
        target,
    ],
    ("lint", "output"): lambda t, target: ["lint", t / "inputs", "-o", target],
    ("curate", "output"): lambda t, target: [
        "curate",
        t / "inputs",
        "--redact-pii",
        "-o",
        target,
    ],
    ("stats", "output"): lambda t, target: ["stats", t / "other", "-o", target],
    ("tokenize", "output"): lambda t, target: [
        "tokenize",
        t / "inputs",
        "--tokenizer",
        SAMPLE_TOKENIZER,
        "-o",
        target,
    ],
    ("pack", "output"): lambda t, target: ["pack", t / "other", "--seq-len", 256, "-o", target],
    ("export", "output"): lambda t, target: ["export", t / "inputs", "-o", target],
    ("export", "quarantine"): lambda t, target: [
        "export",
        t / "inputs",
        "-o",
        t / "scratch" / "e.jsonl",
        "--quarantine",
        target,
    ],
}

NEVER: dict[str, Callable[[Path], Path]] = {
    "an input": lambda t: t / "inputs" / "threads.jsonl",
    "in another output's data": lambda t: t / "other" / "data" / "mine.jsonl",
    "in another output's tokenizer": lambda t: t / "other" / "tokenizer" / "nested",
    "in another output's work directory": lambda t: t / "other" / ".work" / "nested",
    "another output's manifest": lambda t: t / "other" / "manifest.json",
    "another output's card": lambda t: t / "other" / "README.md",
    "through a link into another output": lambda t: t / "to_other_data" / "nested.jsonl",
    "a link": lambda t: t / "to_notes",
    "a link to a folder": lambda t: t / "to_user",
    "a user's file": lambda t: t / "user" / "notes.txt",
}
"""Places no command may write, whatever it declared."""
FOLDER_ONLY = {"a user's folder": lambda t: t / "user"}
"""Places only an output folder or a folder of files is refused at (a file there is new)."""
BESIDE = {"beside a user's quarantine": lambda t: t / "user" / "out.jsonl"}
"""A file whose quarantine (written beside it) would replace a user's file."""
WRITES_BESIDE = {("convert", "output"), ("curate", "output"), ("export", "output")}


def declared() -> list[tuple[str, str, str]]:
    """(command, parameter, kind) for every place a registered command declares."""
    found = []
    for name in COMMANDS:
        places = declared_writes(command(name)) or {}
        found += [(name, param, kind) for param, kind in sorted(places.items())]
    return found


def test_every_command_declares_what_it_writes() -> None:
    for name in COMMANDS:
        cmd = command(name)
        places = declared_writes(cmd)
        assert places is not None, f"mms {name} does not declare what it writes (@writes)"
        for param in cmd.params:
            writing = isinstance(param, click.Option) and (
                "-o" in param.opts or param.name in WRITING_NAMES
            )
            if writing:
                assert param.name in places, f"mms {name} --{param.name} writes undeclared"


def test_every_declared_place_is_exercised() -> None:
    missing = {(name, param) for name, param, _ in declared()} - set(INVOCATIONS)
    assert not missing, f"no sentinel invocation for {sorted(missing)}"


def cases() -> list[tuple[str, str, str, str]]:
    found = []
    for name, param, kind in declared():
        places = dict(NEVER)
        if kind != "file":
            places.update(FOLDER_ONLY)
        if (name, param) in WRITES_BESIDE:
            places.update(BESIDE)
        found += [(name, param, kind, where) for where in places]
    return found


@pytest.mark.parametrize(("name", "param", "kind", "where"), cases())
def test_refused_and_nothing_touched(
    tree: Path, name: str, param: str, kind: str, where: str
) -> None:
    target = {**NEVER, **FOLDER_ONLY, **BESIDE}[where](tree)
    if name == "run" and where == "an input":
        target = tree / "inputs"  # a run's output is a folder: the folder of its inputs
    before = snapshot(tree)
    code, err = mms(*INVOCATIONS[(name, param)](tree, target))
    assert snapshot(tree) == before
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    named = {target.name, Path(os.path.realpath(target)).name, f"{target.stem}.rejected"}
    assert any(name in lines[0] for name in named), err


@pytest.mark.parametrize(("name", "param", "kind"), declared())
def test_written_then_replaced_by_itself(
    tree: Path, tmp_path: Path, name: str, param: str, kind: str
) -> None:
    suffix = {"file": ".txt", "file-or-folder": ".jsonl"}.get(kind, "")
    if param == "quarantine" or name == "export":
        suffix = ".jsonl"
    target = tmp_path / f"written{suffix}"
    before = unscratched(tree)
    for _ in range(2):
        code, err = mms(*INVOCATIONS[(name, param)](tree, target))
        assert code in (0, 1), err
        assert "error:" not in err, err
    assert target.exists()
    assert unscratched(tree) == before


def unscratched(tree: Path) -> dict[str, str]:
    """The tree but its scratch folder, where some invocations write their other file."""
    return {k: v for k, v in snapshot(tree).items() if not k.startswith("scratch")}


def test_overwrite_replaces_a_users_file(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(orjson.dumps(thread(1)) + b"\n")
    mine = tmp_path / "mine.jsonl"
    mine.write_text("mine\n", encoding="utf-8")
    assert mms("convert", source, "-o", mine)[0] == 2
    assert mine.read_text(encoding="utf-8") == "mine\n"
    code, err = mms("convert", source, "-o", mine, "--overwrite")
    assert code == 0, err
    assert written_by_mms(mine) and orjson.loads(mine.read_bytes())["id"] == "t-1"
    mine.write_text("changed by hand\n", encoding="utf-8")
    assert mms("convert", source, "-o", mine)[0] == 2


def test_a_killed_commands_leftovers_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "threads.jsonl"
    dead = 2**22 + 7  # above the default pid_max: no process has it
    leftovers = [
        tmp_path / f".threads.jsonl.{dead}.tmp",
        tmp_path / f".threads.jsonl.{dead}.parts-x",
    ]
    leftovers[0].write_bytes(b"half")
    leftovers[1].mkdir()
    kept = [tmp_path / f".threads.jsonl.{os.getpid()}.tmp", tmp_path / f".other.jsonl.{dead}.tmp"]
    for path in kept:
        path.write_bytes(b"")
    claim_file(target)
    assert [p.exists() for p in leftovers] == [False, False]
    assert all(p.exists() for p in kept)
    assert remove_leftovers(tmp_path) == 1  # the other file's, when the whole folder is swept


def test_export_folder_keeps_its_quarantine_inside_and_only_its_files(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(orjson.dumps(thread(n)) for n in range(3)) + b"\n{broken\n")
    out = tmp_path / "transcripts"
    code, err = mms("export", source, "-o", out)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == [
        ".rejected.jsonl",
        "t-0.txt",
        "t-1.txt",
        "t-2.txt",
    ]
    assert not (tmp_path / "transcripts.rejected.jsonl").exists()
    source.write_bytes(orjson.dumps(thread(0)) + b"\n")
    code, err = mms("export", source, "-o", out)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["t-0.txt"]


@pytest.mark.parametrize(
    "manifest",
    [
        b"not json\n",
        b"[1, 2]\n",
        b'{"counts": {"records_read": 1, "inputs": [], "threads_dropped": 7}}\n',
    ],
)
def test_stats_on_a_damaged_manifest_is_one_clear_line(
    tree: Path, tmp_path: Path, manifest: bytes
) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(tree / "other", damaged)
    (damaged / "manifest.json").write_bytes(manifest)
    code, err = mms("stats", damaged)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "manifest.json" in lines[0] and "mms verify" in lines[0], err
