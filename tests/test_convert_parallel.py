"""`mms convert --workers N`: the inputs' parts converted in worker processes give the
same output, quarantine and counts, byte for byte, as one process reading every file in
turn; on the real files (one part each) and on a big MMS file cut into byte ranges."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

import pipeline.jobs.parallel
from pipeline.accounting import Account
from pipeline.cli import main
from pipeline.jobs.convert import convert, default_quarantine_path
from pipeline.jobs.parallel import job_parts
from pipeline.jobs.read import ReadSpec
from pipeline.sources.parts import InputPart

SPLIT_BYTES = 4096
"""Parts of about 4 KiB: the generated file below is cut into about 30 of them."""
BROKEN = b'{"id": "broken", "messages": [\n'
"""A line that is not JSON, quarantined as invalid_json."""
ROBOT = b'{"id": "robot", "messages": [{"role": "robot", "content": "beep"}]}\n'
"""A record that is JSON but no MMS thread (an unknown role), quarantined as invalid_thread."""


def generated_thread(number: int) -> dict:
    """One of several kinds of threads, varied by `number`: clean, with a capability not
    enabled, invalid JSON content, a special-token literal, no assistant message, and every
    seventh a copy of the one before (a duplicate)."""
    if number % 7 == 0 and number > 0:
        return {**generated_thread(number - 1), "id": f"gen-{number:05d}"}
    kind = number % 6
    user = {"role": "user", "content": f"question {number}: what is {number} squared?"}
    if kind == 0:
        answer = {"role": "assistant", "format": "json", "content": f"[{number * number}]"}
        messages = [{"role": "developer", "content": "Reply in `json`."}, user, answer]
    elif kind == 1:
        messages = [user, {"role": "assistant", "format": "json", "content": f"[{number}]"}]
    elif kind == 2:
        messages = [
            {"role": "developer", "content": "Answer in `json`."},
            user,
            {"role": "assistant", "format": "json", "content": "{not json"},
        ]
    elif kind == 3:
        messages = [user, {"role": "assistant", "content": f"{number * number}<|im_end|>"}]
    elif kind == 4:
        messages = [user]
    else:
        messages = [user, {"role": "assistant", "content": f"It is {number * number}."}]
    for message in messages:
        if message["role"] == "assistant":
            message["end_turn"] = True
    return {"id": f"gen-{number:05d}", "messages": messages}


def write_dataset(path: Path, threads: int = 600, bad_every: int = 101) -> list[int]:
    """Write `threads` generated threads as MMS JSON Lines, with a bad record after every
    `bad_every`-th (two broken lines, then an unknown role, in turn), so that parts of
    SPLIT_BYTES have bad records in their middle; returns the bad lines' numbers."""
    lines: list[bytes] = []
    bad: list[int] = []
    for number in range(threads):
        lines.append(orjson.dumps(generated_thread(number)) + b"\n")
        if number % bad_every == bad_every // 2:
            lines.append(ROBOT if len(bad) % 3 == 2 else BROKEN)
            bad.append(len(lines))
    path.write_bytes(b"".join(lines))
    return bad


def parts_of(path: Path) -> list[InputPart]:
    """The parts two workers read the generated file in."""
    return job_parts(str(path), ReadSpec("mms"), Account(), 2, SPLIT_BYTES)


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def converted(inputs: list[str], out: Path, workers: int, *options: str) -> dict[str, bytes]:
    """`mms convert` with `workers`: its summary, output and quarantine, by name."""
    result = cli("convert", *inputs, "-o", str(out), "--workers", str(workers), *options)
    assert result.exit_code == 0, result.output
    return {
        "summary": result.output.encode(),
        "output": out.read_bytes(),
        "quarantine": default_quarantine_path(out).read_bytes(),
    }


def test_the_real_files_convert_to_the_same_bytes_with_any_number_of_workers(data, tmp_path):
    realdata = str(data / "realdata")
    out = tmp_path / "threads.jsonl"
    one = converted([realdata], out, 1)
    assert one["output"].count(b"\n") > 800 and one["quarantine"]  # the copies: 853 threads
    for workers in (2, 3):
        assert converted([realdata], out, workers) == one
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no work dir left


def test_a_file_cut_into_parts_converts_to_the_same_bytes_and_counts(tmp_path):
    source = tmp_path / "big.jsonl"
    bad = write_dataset(source)
    assert len(parts_of(source)) > 20
    results = {}
    for workers in (1, 2, 3):
        out = tmp_path / f"w{workers}" / "threads.jsonl.gz"
        spec = ReadSpec("mms")
        result = convert(str(source), out, spec, workers=workers, split_bytes=SPLIT_BYTES)
        account = result.account
        assert account.balanced and account.quarantined_total == len(bad) == 6
        assert account.threads == account.written["threads"] == 600
        results[workers] = (
            out.read_bytes(),
            result.quarantine.read_bytes(),
            account.to_dict(),
            account.formats,
            account.files,
        )
    assert results[1] == results[2] == results[3]


def test_a_bad_record_inside_a_part_is_quarantined_at_its_line(tmp_path):
    source = tmp_path / "big.jsonl"
    bad = write_dataset(source)
    starts = {part.first_line for part in parts_of(source)}
    assert not starts & set(bad) and not starts & {line + 1 for line in bad}  # inside parts
    quarantines = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}" / "threads.jsonl"
        spec = ReadSpec("mms")
        result = convert(str(source), out, spec, workers=workers, split_bytes=SPLIT_BYTES)
        quarantines.append(result.quarantine.read_bytes())
        rejected = [orjson.loads(line) for line in quarantines[-1].splitlines()]
        assert [r["locator"] for r in rejected] == [f"{source}:{line}" for line in bad]
        assert {r["code"] for r in rejected} == {"invalid_json", "invalid_thread"}
    assert quarantines[0] == quarantines[1]


def test_several_files_and_the_summary_are_the_same_through_the_cli(tmp_path):
    for name in ("a", "b", "c"):
        write_dataset(tmp_path / f"{name}.jsonl", threads=50, bad_every=20)
    inputs = [str(tmp_path / f"{name}.jsonl") for name in ("a", "b", "c")]
    out = tmp_path / "out" / "threads.jsonl.zst"
    one = converted(inputs, out, 1, "--from", "mms")
    assert b"Check: 156 read = 150 converted + 6 quarantined" in one["summary"]
    assert converted(inputs, out, 2, "--from", "mms") == one


def test_zero_workers_is_a_usage_error(tmp_path):
    source = tmp_path / "a.jsonl"
    write_dataset(source, threads=5)
    result = cli("convert", str(source), "-o", str(tmp_path / "out.jsonl"), "--workers", "0")
    assert result.exit_code == 2
    assert "Invalid value for '--workers': 0 is not in the range x>=1" in result.output
    with pytest.raises(ValueError, match="workers must be at least 1"):
        convert(str(source), tmp_path / "out.jsonl", workers=0)


def three_files_one_failing(
    folder: Path, monkeypatch: pytest.MonkeyPatch, failing: str, error: BaseException
) -> None:
    """`a.jsonl`, `b.jsonl` and `c.jsonl` in `folder`; reading the part of `failing`
    raises `error` (in the workers too: they are forked with the patch)."""
    for name in ("a", "b", "c"):
        write_dataset(folder / f"{name}.jsonl", threads=10)
    read_items = pipeline.jobs.parallel.read_items

    def read_or_fail(path: str, *args, **kwargs):
        if path.endswith(failing):
            raise error
        return read_items(path, *args, **kwargs)

    monkeypatch.setattr(pipeline.jobs.parallel, "read_items", read_or_fail)


def test_a_failing_part_is_a_clean_error_naming_its_file(tmp_path, monkeypatch):
    three_files_one_failing(tmp_path, monkeypatch, "b.jsonl", OSError("the disk is on fire"))
    out = tmp_path / "out" / "threads.jsonl"
    result = cli("convert", str(tmp_path), "-o", str(out), "--from", "mms", "--workers", "2")
    assert result.exit_code == 1
    assert f"({tmp_path}/b.jsonl) failed: OSError: the disk is on fire" in result.output
    assert "Traceback" not in result.output
    assert list((tmp_path / "out").iterdir()) == []  # nothing written, no work dir left
