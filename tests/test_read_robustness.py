"""Bad input costs only itself: a record nested too deep, a file that cannot be read, a
device or a symlink out of the folder, a decompression bomb, a bad `-o`. Each case is a
minimal input beside a good one; the good one is always read and the counts balance."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.formats import FORMATS
from pipeline.quarantine import raw_text
from pipeline.sources import InputError, ReadLimits, expand_inputs
from tests.reading import read_all

GOOD = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}


def _nested(depth: int) -> dict:
    value: list = []
    for _ in range(depth - 2):
        value = [value]
    return {"messages": value}


def _jsonl(path: Path, *records: object) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_record_nested_too_deep_is_quarantined_and_the_next_is_read(tmp_path, name):
    source = tmp_path / "deep.jsonl"
    deep_object = b'{"messages":' + b"[" * 600 + b"]" * 600 + b"}"
    source.write_bytes(b"[" * 1000 + b"]" * 1000 + b"\n" + deep_object + b"\n")
    source.write_bytes(source.read_bytes() + orjson.dumps(GOOD) + b"\n")
    threads, rejected, stats = read_all(source, format=name)
    assert stats.balanced and stats.records_read == 3
    assert [r.code for r in rejected[:2]] == ["too_deep", "too_deep"]
    assert all(r.code != "internal_error" for r in rejected)
    if name == "openai":
        assert len(threads) == 1


def test_a_record_just_within_the_depth_limit_is_never_an_internal_error(tmp_path):
    source = _jsonl(tmp_path / "deep.jsonl", _nested(ReadLimits().max_depth), GOOD)
    for name in FORMATS:
        _, rejected, stats = read_all(source, format=name)
        assert stats.balanced
        assert all(r.code not in ("internal_error", "too_deep") for r in rejected), name


def test_raw_text_never_raises_on_a_value_json_cannot_write():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    assert "cannot be shown" in raw_text(None, deep)
    assert raw_text(None, {"n": 10**30}) is not None


def test_an_unreadable_file_costs_only_itself(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "broken.parquet").write_bytes(b"PAR1 this is not parquet")
    (folder / "huge_int.yaml").write_text("messages:\n  - role: user\n    content: " + "9" * 5000)
    _jsonl(folder / "good.jsonl", GOOD)
    result = CliRunner().invoke(main, ["convert", str(folder), "-o", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    rejected = [
        orjson.loads(line) for line in (tmp_path / "o.rejected.jsonl").read_bytes().splitlines()
    ]
    codes = {Path(r["source"]).name: r["code"] for r in rejected}
    assert codes == {"broken.parquet": "unreadable_file", "huge_int.yaml": "invalid_yaml"}
    assert len((tmp_path / "o.jsonl").read_bytes().splitlines()) == 1
    assert "3 read = 1 converted + 2 quarantined" in result.output


def test_devices_and_symlinks_out_of_the_folder_are_refused_not_read(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    outside = _jsonl(tmp_path / "secret.jsonl", GOOD)
    os.symlink("/dev/zero", folder / "zero.jsonl")
    os.symlink(outside, folder / "escape.jsonl")
    os.symlink(folder / "good.jsonl", folder / "inside.jsonl")
    _jsonl(folder / "good.jsonl", GOOD)
    found = expand_inputs([str(folder)])
    assert sorted(Path(p).name for p in found.refused) == ["escape.jsonl", "zero.jsonl"]
    assert "outside" in found.refused[f"{folder.as_posix()}/escape.jsonl"]
    assert [Path(p).name for p in found.files] == ["good.jsonl"]  # inside.jsonl is the same file
    result = CliRunner().invoke(main, ["convert", str(folder), "-o", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 0 and "refused 2 file(s)" in result.output, result.output
    globbed = expand_inputs([f"{folder}/*.jsonl"])
    assert sorted(Path(p).name for p in globbed.refused) == ["escape.jsonl", "zero.jsonl"]


def test_an_explicitly_named_symlink_is_read_as_named_and_a_device_is_refused(tmp_path):
    target = _jsonl(tmp_path / "real.jsonl", GOOD)
    link = tmp_path / "elsewhere" / "link.jsonl"
    link.parent.mkdir()
    os.symlink(target, link)
    threads, _, _ = read_all(link)
    assert len(threads) == 1
    with pytest.raises(InputError, match="not a regular file"):
        expand_inputs(["/dev/zero"])


def test_a_decompression_bomb_is_stopped_with_one_line(tmp_path):
    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as out:
        out.write(orjson.dumps(GOOD) + b"\n")
        out.write(b"\n" * (80 * 1024 * 1024))
    _jsonl(tmp_path / "good.jsonl", GOOD)
    limits = ReadLimits(max_decompression_ratio=10)
    threads, rejected, stats = read_all(bomb, tmp_path / "good.jsonl", limits=limits)
    assert len(threads) == 2 and stats.balanced
    (bombed,) = rejected
    assert bombed.code == "unreadable_file" and "decompression bomb" in bombed.message


def test_a_long_run_of_blank_lines_keeps_the_line_numbers(tmp_path):
    source = tmp_path / "blank.jsonl"
    source.write_bytes(orjson.dumps(GOOD) + b"\n" * 3_000_001 + b"{not json}\n")
    _, rejected, _ = read_all(source)
    assert [r.locator.rsplit(":", 1)[1] for r in rejected] == ["3000002"]


@pytest.mark.parametrize(
    "command",
    [
        ["convert", "data_samples/mms", "-o", "{file}/out.jsonl"],
        ["lint", "data_samples/mms", "-o", "{file}/report.json"],
        ["tokenize", "data_samples/mms", "--tokenizer", "configs/sample_tokenizer", "-o", "{file}"],
        ["convert", "data_samples/mms", "-o", "/proc/out.jsonl"],
    ],
)
def test_a_bad_output_path_is_one_clear_line(tmp_path, command, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    args = [part.replace("{file}", str(a_file)) for part in command]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "file" in result.output.splitlines()[-1] or "cannot" in result.output


def test_a_bug_is_one_line_saying_so_never_a_traceback(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("pipeline.cli.convert", broken)
    monkeypatch.delenv("MMS_DEBUG", raising=False)
    result = CliRunner().invoke(main, ["convert", "x", "-o", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 3
    assert "internal error" in result.output and "boom" in result.output
    assert "Traceback" not in result.output


def test_an_empty_context_name_is_no_name_with_a_note(tmp_path):
    thread = {
        "id": "t",
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "format": "f:json", "content": "{}", "end_turn": False},
            {"role": "context", "name": "", "content": "r"},
            {"role": "assistant", "content": "ok", "end_turn": True},
        ],
    }
    threads, rejected, _ = read_all(_jsonl(tmp_path / "t.jsonl", thread), format="mms")
    assert rejected == []
    assert threads[0].messages[2].name is None
    assert "empty context name" in " ".join(threads[0].meta["notes"])
    tool_chat = {
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "name": "", "content": "r"},
            {"role": "assistant", "content": "done"},
        ]
    }
    _, rejected, stats = read_all(_jsonl(tmp_path / "o.jsonl", tool_chat), format="openai")
    assert stats.balanced
    assert all("must not be empty" not in r.message for r in rejected)
