"""An output folder is written only where mms owns it (pipeline/output/folder.py): a user's
folder is refused without --overwrite, nothing is written or removed through a symbolic
link, no output lands over an input or inside another output's managed places, another
command's folder is left alone, and a kill at any point of publishing resumes to the
bytes of an uninterrupted run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.output.folder import OutputFolder
from tests.conftest import REPO
from tests.kill_points import tree

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
USER_FILES = {
    "README.md": b"# my dataset\n",
    "tokenizer/my.json": b'{"mine": true}\n',
    "data/test-00003-of-00009.parquet": b"PAR1 not really\n",
    "quarantine/rejected.jsonl": b'{"kept": "by me"}\n',
    "notes.txt": b"do not lose this\n",
}


def mms(*args: str):
    return CliRunner().invoke(main, [str(arg) for arg in args])


def thread(number: int) -> dict:
    return {
        "id": f"t-{number}",
        "messages": [
            {"role": "user", "content": f"What is {number} + {number}?"},
            {"role": "assistant", "content": f"It is {2 * number}.", "end_turn": True},
        ],
    }


def inputs(folder: Path, count: int = 12, bad: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [orjson.dumps(thread(n)) for n in range(count)]
    (folder / "threads.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    if bad:
        (folder / "bad.jsonl").write_bytes(b"{not json\n")
    return folder


def config(folder: Path, source: Path, out: Path, *stages: str, name: str = "run") -> Path:
    path = folder / f"{name}.yaml"
    lines = [f"name: {name}", "inputs:", f"  - path: {source}", f"output: {out}", "stages:"]
    lines += ["  lint: {fail_on: never}", *(f"  {stage}" for stage in stages)]
    path.write_text("\n".join(lines) + "\n")
    return path


def tokenized(tmp_path: Path) -> Path:
    """A tokenized output (`mms tokenize`), to pack."""
    out = tmp_path / "tokens"
    result = mms(
        "tokenize", inputs(tmp_path / "tok-in"), "--tokenizer", SAMPLE_TOKENIZER, "-o", out
    )
    assert result.exit_code == 0, result.output
    return out


def snapshot(*roots: Path) -> dict[str, bytes | str]:
    """Every file and link under `roots`, by path: a file's bytes, a link's target."""
    found: dict[str, bytes | str] = {}
    for root in roots:
        for directory, folders, files in os.walk(root):
            for name in folders + files:
                path = Path(directory, name)
                if path.is_symlink():
                    found[str(path)] = os.readlink(path)
                elif path.is_file():
                    found[str(path)] = path.read_bytes()
    return found


def user_folder(root: Path) -> Path:
    for relative, data in USER_FILES.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(data)
    return root


def commands(tmp_path: Path, out: Path) -> dict[str, list[str]]:
    """Every command that writes an output folder, into `out`."""
    source = inputs(tmp_path / "in")
    run = config(tmp_path, source, out, f"tokenize: {{tokenizer: {SAMPLE_TOKENIZER}}}")
    failing = tmp_path / "failing.jsonl"  # an answer in a format nothing enables: MMS201
    unenabled = thread(1)
    unenabled["messages"][1].update(format="json", content="{}")
    failing.write_bytes(orjson.dumps(unenabled) + b"\n")
    gated = config(tmp_path, failing, out, name="gated")
    gated.write_text(gated.read_text().replace("fail_on: never", "fail_on: error"))
    return {
        "run": ["run", str(run)],
        "run with a failed gate": ["run", str(gated)],
        "tokenize": ["tokenize", str(source), "--tokenizer", str(SAMPLE_TOKENIZER), "-o", str(out)],
        "pack": ["pack", str(tokenized(tmp_path)), "--seq-len", "256", "-o", str(out)],
    }


@pytest.mark.parametrize("command", ["run", "run with a failed gate", "tokenize", "pack"])
def test_a_folder_no_mms_command_wrote_is_refused_then_taken_over_with_overwrite(tmp_path, command):
    out = user_folder(tmp_path / "out")
    args = commands(tmp_path, out)[command]
    before = snapshot(tmp_path)
    refused = mms(*args)
    assert refused.exit_code == 2, refused.output
    assert "no mms command wrote it" in refused.output and "--overwrite" in refused.output
    assert snapshot(tmp_path) == before  # nothing written, nothing removed

    taken = mms(*args, "--overwrite")
    assert taken.exit_code in (0, 1), taken.output  # 1: the gate failed, as it should
    assert (out / "notes.txt").read_bytes() == USER_FILES["notes.txt"]  # not a managed place
    assert not (out / "tokenizer" / "my.json").exists()
    assert not (out / "data" / "test-00003-of-00009.parquet").exists()
    assert "--overwrite: replaced or removed" in taken.output
    assert "tokenizer/my.json" in taken.output
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["format"].startswith("mms-pipeline-manifest")


@pytest.mark.parametrize(
    "link", ["data", "tokenizer", ".work", "quarantine", "reports", "README.md"]
)
def test_a_link_in_the_output_folder_is_refused_before_anything_is_written(tmp_path, link):
    """`OUT/data` (or another managed place) a link to a folder elsewhere: the command
    names the link and changes nothing on either side of it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "train-00007-of-00009.parquet").write_bytes(b"theirs\n")
    (outside / "train-00000-of-00001.parquet").write_bytes(b"theirs too\n")
    for command, args in commands(tmp_path, tmp_path / "out").items():
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        target = outside / "file.md" if link == "README.md" else outside
        (out / link).unlink(missing_ok=True)
        (out / link).symlink_to(target)
        before = snapshot(tmp_path)
        result = mms(*args)
        assert result.exit_code == 2, (command, result.output)
        assert f"{out / link} is a symbolic link" in result.output.replace("\n", ""), command
        assert "internal error" not in result.output
        assert snapshot(tmp_path) == before, command


def test_a_link_inside_a_managed_folder_is_refused(tmp_path):
    out = tmp_path / "out"
    source = inputs(tmp_path / "in")
    run = config(tmp_path, source, out)
    assert mms("run", run).exit_code == 0
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"not yours\n")
    (shard,) = (out / "data").glob("*.parquet")
    shard.unlink()
    shard.symlink_to(victim)
    result = mms("run", run, "--fresh")
    assert result.exit_code == 2 and f"{shard} is a symbolic link" in result.output
    assert victim.read_bytes() == b"not yours\n" and shard.is_symlink()


def test_no_command_writes_over_one_of_its_inputs(tmp_path):
    folder = inputs(tmp_path / "in")
    (folder / "b.jsonl").write_bytes(orjson.dumps(thread(99)) + b"\n")
    original = snapshot(folder)
    first = folder / "threads.jsonl"
    cases = [
        ["convert", folder, "-o", first],
        ["convert", folder, "-o", tmp_path / "x.jsonl", "--quarantine", first],
        ["lint", folder, "-o", first],
        ["export", folder, "--to", "harmony", "-o", first],
        ["export", folder, "--to", "harmony", "-o", folder],
        ["tokenize", tmp_path, "--tokenizer", SAMPLE_TOKENIZER, "-o", folder.parent],
    ]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "t.jsonl").write_bytes(orjson.dumps(thread(7)) + b"\n")
    for args in cases:
        result = mms(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output and "internal error" not in result.output
        assert snapshot(folder) == original, args
    tokenize_into_data = ["tokenize", tmp_path / "data", "--tokenizer", SAMPLE_TOKENIZER]
    result = mms(*tokenize_into_data, "-o", tmp_path, "--overwrite")
    assert result.exit_code == 2 and "which the output folder" in result.output


def test_an_output_inside_another_outputs_managed_folder_is_refused(tmp_path):
    """`mms pack OUT -o OUT/data` would leave OUT damaged (its next run would remove the
    packed output); `mms convert ... -o OUT/reports/x.jsonl` likewise."""
    source = tokenized(tmp_path)
    before = snapshot(source)
    for args in (
        ["pack", source, "--seq-len", "256", "-o", source / "data"],
        ["pack", source, "--seq-len", "256", "-o", source / ".work" / "x"],
        ["convert", inputs(tmp_path / "in"), "-o", source / "quarantine" / "x.jsonl"],
    ):
        result = mms(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "which mms manages for the output folder" in result.output.replace("\n", " ")
        assert snapshot(source) == before
    assert mms("verify", source).exit_code == 0


def test_a_second_command_on_a_folder_in_use_is_a_clear_error(tmp_path):
    """Another command holds the folder (here: this test): `mms run` and `mms run --fresh`
    say so in one line, exit 2, and touch nothing."""
    out = tmp_path / "out"
    run = config(tmp_path, inputs(tmp_path / "in"), out)
    assert mms("run", run).exit_code == 0
    before = snapshot(out)
    with OutputFolder(out):
        for extra in ([], ["--fresh"]):
            result = mms("run", run, *extra)
            assert result.exit_code == 2, result.output
            assert "is being written by another mms command" in result.output
            assert "internal error" not in result.output
    after = snapshot(out)
    assert {k: v for k, v in after.items() if "/.work/" not in k} == before


def test_a_finished_run_started_again_says_it_is_finished(tmp_path):
    out = tmp_path / "out"
    run = config(tmp_path, inputs(tmp_path / "in"), out)
    assert mms("run", run).exit_code == 0
    before = snapshot(out)
    again = mms("run", run)
    assert again.exit_code == 0 and "Nothing to do" in again.output
    assert snapshot(out) == before
    (out / "reports" / "lint.md").write_text("edited\n")
    refused = mms("run", run)  # not finished any more: the edited report is named
    assert refused.exit_code == 2 and "reports/lint.md" in refused.output


def _kill_lines(out: Path, before: Path, args: list[str]) -> list[dict]:
    command = [sys.executable, "-m", "tests.kill_points", str(out), str(before), "--", *args]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.slow
def test_a_kill_at_any_point_of_publishing_resumes_to_the_same_bytes(tmp_path):
    """The run replaces an earlier run's output (another split list, a quarantine it no
    longer has): killed before each rename, replace, unlink and removal of publishing and
    cleaning up, then started again, it ends with the bytes of an uninterrupted run, no
    work directory left, and the earlier output's extra files gone."""
    out, before = tmp_path / "out", tmp_path / "before"
    source = inputs(tmp_path / "in", bad=True)
    splits = "shard: {splits: {train: 0.5, validation: 0.5}}"
    assert mms("run", config(tmp_path, source, before, splits, name="earlier")).exit_code == 0
    (source / "bad.jsonl").unlink()
    later = config(tmp_path, source, out, f"tokenize: {{tokenizer: {SAMPLE_TOKENIZER}}}")
    later.write_text(later.read_text() + "engine: {workers: 1}\n")  # no pool to start
    clean = _clean_run(tmp_path, before, later, out)
    lines = _kill_lines(out, before, ["run", str(later), "-o", str(out)])
    print(f"{len(lines)} kill points")
    killed = [line for line in lines if line["killed"]]
    assert len(killed) >= 15, "publishing was not interrupted at every change"
    assert not lines[-1]["killed"]
    for line in lines:
        assert line["resumed"] == 0, line["point"]
        assert line["files"] == clean, line["point"]


def _clean_run(tmp_path: Path, before: Path, config_file: Path, out: Path) -> dict[str, str]:
    """The files of an uninterrupted run of `config_file` into a copy of `before` at
    `out` (the same path, so the card and the manifest are the same bytes)."""
    shutil.copytree(before, out, symlinks=True)
    result = mms("run", config_file, "-o", out)
    assert result.exit_code == 0, result.output
    assert "Removed" in result.output  # the earlier output's validation split and quarantine
    files = tree(out)
    shutil.rmtree(out)
    return files


# ------------------------------------------------------------ property: sentinel files

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

IN_MANAGED_PLACES = {
    "README.md": b"user card\n",
    "data/x-00000-of-00001.parquet": b"user shard\n",
    "tokenizer/my.json": b"{}\n",
    "quarantine/rejected.jsonl": b"user quarantine\n",
    "reports/mine.md": b"user report\n",
    "media/mine.png": b"user media\n",
    "manifest.json": b'{"mine": 1}\n',
}
IN_MANAGED_PLACES_TOP = (
    "data",
    "tokenizer",
    "quarantine",
    "reports",
    "media",
    ".work",
    "README.md",
    "manifest.json",
)
LINKS = ("data", "tokenizer", ".work", "quarantine", "reports", "README.md", "result.jsonl")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Inputs, a tokenized output to pack, and an earlier run's output to start from."""
    root = tmp_path_factory.mktemp("world")
    inputs(root / "in", bad=True)
    tokenized(root)
    earlier = config(root, root / "in", root / "earlier", name="earlier")
    assert mms("run", earlier).exit_code == 0
    return root


def _command(name: str, world: Path, out: Path, tmp: Path) -> list[str]:
    source = str(world / "in")
    tokenizer = str(SAMPLE_TOKENIZER)
    if name == "convert":
        return ["convert", source, "-o", str(out / "result.jsonl")]
    if name == "lint":
        return ["lint", source, "-o", str(out / "result.jsonl"), "--output-format", "json"]
    if name == "export":
        return ["export", source, "--to", "harmony", "-o", str(out / "result.jsonl")]
    if name == "tokenize":
        return ["tokenize", source, "--tokenizer", tokenizer, "-o", str(out)]
    if name == "pack":
        return ["pack", str(world / "tokens"), "--seq-len", "256", "-o", str(out)]
    run = config(tmp, world / "in", out, f"tokenize: {{tokenizer: {tokenizer}}}")
    return ["run", str(run)]


@pytest.mark.parametrize("command", ["convert", "lint", "export", "tokenize", "pack", "run"])
@settings(max_examples=10, deadline=None)
@given(
    earlier=st.booleans(),
    user_files=st.sets(st.sampled_from(sorted(IN_MANAGED_PLACES))),
    links=st.sets(st.sampled_from(LINKS), max_size=2),
    overwrite=st.booleans(),
)
def test_no_command_changes_a_file_it_does_not_own(
    world, tmp_path_factory, command, earlier, user_files, links, overwrite
):
    """Whatever the folder holds (an earlier mms output or not, a user's files in the
    places mms manages, links out of it): no file outside the output folder changes, nor
    any file in it outside mms's places; without --overwrite no file mms did not write
    changes at all; the command never fails with an internal error."""
    tmp = tmp_path_factory.mktemp("sentinels")
    outside, out = tmp / "outside", tmp / "out"
    outside.mkdir()
    (outside / "train-00000-of-00001.parquet").write_bytes(b"outside shard\n")
    (outside / "file.md").write_bytes(b"outside file\n")
    if earlier:
        shutil.copytree(world / "earlier", out)
    out.mkdir(exist_ok=True)
    (out / "notes.txt").write_bytes(b"notes\n")
    (out / "sub").mkdir()
    (out / "sub" / "keep.jsonl").write_bytes(b"keep\n")
    for relative in sorted(user_files):
        target = out / relative
        if target.exists() or any(p.is_symlink() for p in target.parents):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(IN_MANAGED_PLACES[relative])
    for name in sorted(links):
        link = out / name
        if link.exists() and not link.is_symlink():
            shutil.rmtree(link) if link.is_dir() else link.unlink()
        link.symlink_to(outside / "file.md" if "." in name else outside)
    ours = set(snapshot(world / "earlier")) if earlier else set()
    watched = snapshot(world, outside, out)
    args = _command(command, world, out, tmp) + (["--overwrite"] if overwrite else [])
    if overwrite and command in ("convert", "lint", "export"):
        args = args[:-1]
    result = mms(*args)
    assert result.exit_code in (0, 1, 2), result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    after = snapshot(world, outside, out)
    for path, content in watched.items():
        relative = Path(path).relative_to(out).as_posix() if path.startswith(f"{out}/") else None
        if relative is None:  # outside the output folder: never changed
            assert after.get(path) == content, path
            continue
        first = relative.split("/")[0]
        if first not in (*IN_MANAGED_PLACES_TOP, "result.jsonl"):
            assert after.get(path) == content, path  # not one of mms's places
        elif not overwrite and str(world / "earlier" / relative) not in ours:
            assert after.get(path) == content, path  # not written by mms
