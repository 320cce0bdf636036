"""Faults in every phase of `mms run`: a full disk at any write the run makes is one clear,
resumable error (exit 1, never an internal error), and the run started again ends with the
bytes of an uninterrupted run; a finished part damaged since (here or on a store) is run
again, named; an input that changes during the run is refused, named, and nothing is
published.

The writes are enumerated, not guessed: a counting wrapper around every way the run opens a
file for writing or moves one into place records them in a clean run, and each phase's
first and last write is then made to fail with ENOSPC."""

from __future__ import annotations

import builtins
import errno
import hashlib
import io
import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from click.testing import CliRunner, Result

from pipeline.cli import main
from pipeline.jobs.run import job, outputs
from tests.conftest import REPO
from tests.kill_points import tree
from tests.object_store import Bucket
from tests.test_storage_outputs import _comparable as comparable

SAMPLES = REPO / "data_samples" / "openai"
TOKENIZER = REPO / "configs" / "sample_tokenizer"
PHASES = {
    "claim": r"\.work/MMS_WORK_DIR$",
    "locks": r"\.work/(run|workers)\.lock$",
    "plan": r"\.work/\.?plan\.json",
    "map side": r"\.work/(partial|parts)/",
    "repeated rows": r"\.work/resolved/",
    "decisions": r"\.work/(decided|selected|findings|checks)/",
    "quarantine": r"\.work/publish/quarantine/",
    "shards": r"\.work/publish/data/",
    "lint reports": r"\.work/publish/reports/\.?lint\.",
    "tokenizer": r"\.work/publish/tokenizer/",
    "stats": r"\.work/publish/reports/\.?stats\.",
    "card": r"\.work/publish/\.?README\.md",
    "manifest": r"\.work/publish/\.?manifest\.json",
    "publish": r"^(data|quarantine|reports|tokenizer)/|^README\.md$|^manifest\.json$",
    "clean up": r"^\.work-removing-",
}
"""Each phase's writes, by where they go (relative to the output folder): every write a
run makes under its output is one of them (test_every_write_belongs_to_a_phase)."""


@dataclass
class Writes:
    """The writes a run made under `out` (where each went), in order; the one numbered
    `fail_at` raises ENOSPC instead."""

    out: Path
    fail_at: int | None = None
    seen: list[str] | None = None

    def record(self, target: object) -> None:
        """Count a write to `target`; fail it when it is the chosen one."""
        path = Path(os.fsdecode(target)) if isinstance(target, (str, os.PathLike)) else None
        if path is None or not path.is_relative_to(self.out):
            return
        assert self.seen is not None
        self.seen.append(path.relative_to(self.out).as_posix())
        if len(self.seen) - 1 == self.fail_at:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def _writing(mode: object) -> bool:
    return isinstance(mode, str) and any(flag in mode for flag in "wax+")


@contextmanager
def counted_writes(writes: Writes) -> Iterator[Writes]:
    """Route every file opened for writing (open, Path.open, os.fdopen, pyarrow's OSFile)
    and every file moved into place (os.replace, os.rename) through `writes`."""
    writes.seen = []
    originals: list[tuple[Any, str, Any]] = [
        (io, "open", io.open),
        (builtins, "open", builtins.open),
        (pa, "OSFile", pa.OSFile),
        (os, "replace", os.replace),
        (os, "rename", os.rename),
    ]

    def opening(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(file: Any, mode: Any = "r", *args: Any, **kwargs: Any) -> Any:
            if _writing(kwargs.get("mode", mode)):
                writes.record(file)
            return original(file, mode, *args, **kwargs)

        return wrapper

    def moving(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(source: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
            writes.record(target)
            return original(source, target, *args, **kwargs)

        return wrapper

    try:
        for owner, name, original in originals:
            wrap = moving if owner is os else opening
            setattr(owner, name, wrap(original))
        yield writes
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


@dataclass(frozen=True)
class CleanRun:
    """A tiny run's config, its output folder, the files it published (sha256) and the
    writes it made."""

    config: Path
    out: Path
    files: dict[str, str]
    writes: list[str]


def run(config: Path, out: Path | str) -> Result:
    return CliRunner().invoke(main, ["run", str(config), "-o", str(out)])


def write_config(folder: Path) -> Path:
    """A run of two small files, tokenized, split in two, in one process (so every write
    is this process's, in a fixed order)."""
    inputs = folder / "inputs"
    inputs.mkdir()
    for name in ("chat_completions.jsonl", "tool_calls.jsonl"):
        shutil.copy(SAMPLES / name, inputs / name)
    config = folder / "faults.yaml"
    config.write_text(
        "name: faults\n"
        f"inputs:\n  - path: {inputs}\n"
        f"output: {folder / 'unused'}\n"
        "stages:\n"
        "  lint: {fail_on: never}\n"
        f"  tokenize: {{tokenizer: {TOKENIZER}, max_tokens: 512}}\n"
        "  shard: {splits: {train: 0.5, test: 0.5}}\n"
        "engine: {workers: 1}\n"
    )
    return config


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> CleanRun:
    folder = tmp_path_factory.mktemp("faults")
    config, out = write_config(folder), folder / "out"
    with counted_writes(Writes(out)) as writes:
        result = run(config, out)
    assert result.exit_code == 0, result.output
    assert writes.seen is not None
    return CleanRun(config, out, tree(out), writes.seen)


def phase_of(write: str) -> str | None:
    return next((name for name, where in PHASES.items() if re.search(where, write)), None)


def test_every_write_belongs_to_a_phase(clean: CleanRun) -> None:
    """The enumeration is whole: a new kind of write must be given a phase here (and so is
    tested below)."""
    unplaced = [write for write in clean.writes if phase_of(write) is None]
    assert not unplaced
    assert {phase_of(write) for write in clean.writes} == set(PHASES)


@pytest.mark.parametrize("phase", list(PHASES))
def test_a_full_disk_at_any_write_is_a_resumable_error(clean: CleanRun, phase: str) -> None:
    """ENOSPC at each of the phase's writes in turn: exit 1 with one `error:` line naming
    the file; the run started again ends with the uninterrupted run's bytes."""
    for number, write in enumerate(clean.writes):
        if phase_of(write) == phase:
            fail_and_resume(clean, number)


def fail_and_resume(clean: CleanRun, number: int) -> None:
    """A fresh run failed at its write `number`, then the same run again, unhindered."""
    shutil.rmtree(clean.out, ignore_errors=True)
    with counted_writes(Writes(clean.out, fail_at=number)) as writes:
        failed = run(clean.config, clean.out)
    assert writes.seen is not None and len(writes.seen) > number, "the fault was not reached"
    assert failed.exit_code == 1, failed.output
    errors = [line for line in failed.output.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("error: "), failed.output
    assert "No space left on device" in errors[0] and "run again to resume" in errors[0]
    assert written_name(clean.writes[number]) in errors[0]
    resumed = run(clean.config, clean.out)
    assert resumed.exit_code == 0, resumed.output
    assert tree(clean.out) == clean.files, f"write {number}: {clean.writes[number]}"


def written_name(write: str) -> str:
    """The name a write's file has in every run (its temporary name's pid and uuid aside)."""
    return re.sub(r"^\.|\.\d+\.tmp$|\.?[0-9a-f]{32}(\.tmp)?", "", Path(write).name)


def stopped_after_the_map_side(
    config: Path, out: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run `config` into `out` until every part is finished, then fail it (ENOSPC writing
    the lint reports): its parts stay, DONE."""

    def full(staging: Path, *_: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(staging / "reports"))

    with monkeypatch.context() as patch:
        patch.setattr(outputs, "write_reports", full)
        failed = run(config, out)
    assert failed.exit_code == 1 and "write the lint reports" in failed.output, failed.output


DAMAGES: dict[str, Callable[[Path], None]] = {
    "truncated": lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
    "junk": lambda path: path.write_bytes(b"\x00junk" * (path.stat().st_size // 5 + 1)),
    "same size": lambda path: path.write_bytes(bytes(path.stat().st_size)),
    "deleted": lambda path: path.unlink(),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_finished_part_is_run_again(
    clean: CleanRun, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished part's file damaged under its DONE marker: the part is run again, the
    file named, and the output is the uninterrupted run's."""
    shutil.rmtree(clean.out, ignore_errors=True)
    stopped_after_the_map_side(clean.config, clean.out, monkeypatch)
    part = clean.out / ".work" / "parts" / "000-00001-0000"
    DAMAGES[damage](part / "threads.arrow")
    resumed = run(clean.config, clean.out)
    assert resumed.exit_code == 0, resumed.output
    said = [line for line in resumed.output.splitlines() if line.startswith("Redone")]
    assert len(said) == 1 and "part 000-00001-0000" in said[0], resumed.output
    assert str(part / "threads.arrow") in said[0]
    assert "Resumed: 1 of 2 parts" in resumed.output
    assert tree(clean.out) == clean.files


def test_a_damaged_part_on_the_store_is_run_again(
    clean: CleanRun, s3: Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored work directory's part damaged on the store: fetched, found damaged, run
    again and uploaded again; the output is the local run's."""
    url = f"{s3.url}/runs/out"
    stopped_after_the_map_side(clean.config, url, monkeypatch)
    key = "runs/out/.work/parts/000-00000-0000/threads.arrow"
    junk = clean.out.parent / "junk.arrow"
    junk.write_bytes(b"not an arrow file")
    s3.put(junk, key)
    resumed = run(clean.config, url)
    assert resumed.exit_code == 0, resumed.output
    assert "Redone, damaged since it finished: part 000-00000-0000" in resumed.output
    local = {path: (clean.out / path).read_bytes() for path in clean.files}
    assert comparable(s3.files("runs/out")) == comparable(local)


def test_an_input_changed_during_the_run_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An input appended to once its parts were read (and hashed): the run refuses,
    naming the file, and publishes nothing; started over, it reads the new version."""
    config, out = write_config(tmp_path), tmp_path / "out"
    changed = tmp_path / "inputs" / "tool_calls.jsonl"
    line = changed.read_text().splitlines()[0] + "\n"
    write_shards = job.write_shards

    def appending(*args: Any, **kwargs: Any) -> Any:
        written = write_shards(*args, **kwargs)
        with changed.open("a") as more:
            more.write(line)
        return written

    with monkeypatch.context() as patch:
        patch.setattr(job, "write_shards", appending)
        failed = run(config, out)
    assert failed.exit_code == 2, failed.output
    assert f"error: {changed} changed while the run read it" in failed.output
    assert "nothing was published" in failed.output
    assert sorted(path for path in tree(out) if not path.startswith(".work/")) == []
    refused = run(config, out)
    assert refused.exit_code == 2 and "--fresh" in refused.output
    again = CliRunner().invoke(main, ["run", str(config), "-o", str(out), "--fresh"])
    assert again.exit_code == 0, again.output
    inputs = orjson.loads((out / "manifest.json").read_bytes())["inputs"]
    recorded = next(item for item in inputs if item["path"] == str(changed))
    assert recorded["sha256"] == hashlib.sha256(changed.read_bytes()).hexdigest()
