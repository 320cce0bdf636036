"""Bad input costs only itself: a record nested too deep, a file that cannot be read, a
device or a symlink out of the folder, a decompression bomb, a bad `-o`. Each case is a
minimal input beside a good one; the good one is always read and the counts balance."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.formats import FORMATS
from pipeline.jobs.lint import lint
from pipeline.quarantine import raw_text
from pipeline.sources import InputError, ReadLimits, expand_inputs
from pipeline.sources.parts import iter_part_records, plan_parts
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
    assert stats.read_balanced and stats.records_read == 3
    assert [r.code for r in rejected[:2]] == ["too_deep", "too_deep"]
    assert all(r.code != "internal_error" for r in rejected)
    if name == "openai":
        assert len(threads) == 1


def test_a_record_just_within_the_depth_limit_is_never_an_internal_error(tmp_path):
    source = _jsonl(tmp_path / "deep.jsonl", _nested(ReadLimits().max_depth), GOOD)
    for name in FORMATS:
        _, rejected, stats = read_all(source, format=name)
        assert stats.read_balanced
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
    assert result.exit_code == 0 and "refused 2 files" in result.output, result.output
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


def _run_config(path: Path, source: Path, output: Path) -> Path:
    lines = ["name: nested", f"inputs: [{{path: {source}, format: openai}}]", f"output: {output}"]
    path.write_text("\n".join([*lines, "stages:", "  lint: {fail_on: never}", ""]))
    return path


def test_convert_and_run_leave_out_an_mms_output_folder_inside_a_folder_input(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    _jsonl(folder / "chats.jsonl", *[{**GOOD, "id": str(n)} for n in range(3)])
    first = _run_config(tmp_path / "first.yaml", folder, folder / "out")
    assert CliRunner().invoke(main, ["run", str(first)]).exit_code == 0
    assert (folder / "out" / "manifest.json").is_file()
    out = tmp_path / "converted.jsonl"
    converted = CliRunner().invoke(main, ["convert", str(folder), "-o", str(out)])
    again = _run_config(tmp_path / "again.yaml", folder, tmp_path / "elsewhere")
    ran = CliRunner().invoke(main, ["run", str(again)])
    for result in (converted, ran):
        assert result.exit_code == 0, result.output
        assert "3 read = 3 converted + 0 quarantined" in result.output, result.output
        assert f"{folder / 'out'}: an mms output folder" in " ".join(result.output.split())
    assert len(out.read_bytes().splitlines()) == 3
    assert expand_inputs([f"{folder}/*"]).files == [str(folder / "chats.jsonl")]
    with pytest.raises(InputError, match="out: an mms output folder"):
        expand_inputs([f"{folder}/**/*.parquet"])


def test_a_decompression_bomb_is_stopped_with_one_line(tmp_path):
    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as out:
        out.write(orjson.dumps(GOOD) + b"\n")
        out.write(b"\n" * (80 * 1024 * 1024))
    _jsonl(tmp_path / "good.jsonl", GOOD)
    limits = ReadLimits(max_decompression_ratio=10)
    threads, rejected, stats = read_all(bomb, tmp_path / "good.jsonl", limits=limits)
    assert len(threads) == 2 and stats.read_balanced
    (bombed,) = rejected
    assert bombed.code == "unreadable_file" and "decompression bomb" in bombed.message
    command = ["convert", str(bomb), "-o", str(tmp_path / "o.jsonl"), "--max-decompression-ratio"]
    result = CliRunner().invoke(main, [*command, "10"])
    assert "2 read = 1 converted + 1 quarantined" in result.output, result.output
    result = CliRunner().invoke(main, [*command, "2000"])
    assert "1 read = 1 converted + 0 quarantined" in result.output, result.output


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
        raise RuntimeError("boom in [/tmp/x.parquet]")  # brackets are text, not markup

    monkeypatch.setattr("pipeline.jobs.convert.convert", broken)
    monkeypatch.delenv("MMS_DEBUG", raising=False)
    result = CliRunner().invoke(main, ["convert", "x", "-o", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 3
    assert "internal error" in result.output and "boom in [/tmp/x.parquet]" in result.output
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
    assert stats.read_balanced
    assert all("must not be empty" not in r.message for r in rejected)


def test_a_line_deeper_than_json_parses_is_too_deep_and_linted_as_unreadable(tmp_path):
    source = tmp_path / "deep.jsonl"
    source.write_bytes(b"[" * 2000 + b"]" * 2000 + b"\n" + b"[" * 300 + b"]" * 300 + b"\n")
    _jsonl(tmp_path / "good.jsonl", GOOD)
    threads, rejected, stats = read_all(source, tmp_path / "good.jsonl")
    assert [r.code for r in rejected] == ["too_deep", "too_deep"]
    assert "more than 1024 levels" in rejected[0].message
    assert "more than 128 levels" in rejected[1].message
    assert len(threads) == 1 and stats.read_balanced
    findings = [(d.code, d.message) for d in lint(str(source)).diagnostics]
    assert [code for code, _ in findings] == ["MMS105", "MMS105"]
    assert all("[too_deep]" in message for _, message in findings)


def test_yaml_too_deep_to_load_is_too_deep_naming_where(tmp_path):
    source = tmp_path / "deep.yaml"
    source.write_text("- {messages: " + "[" * 500 + "]" * 500 + "}\n")
    threads, rejected, stats = read_all(source, _jsonl(tmp_path / "good.jsonl", GOOD))
    assert [r.code for r in rejected] == ["too_deep"] and len(threads) == 1
    assert "more than 129 levels deep (line 1, column 141)" in rejected[0].message
    assert stats.read_balanced


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter, stopped after a minute: a reader that hangs on
    a device fails the test instead of holding it."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60
    )


def test_a_deep_skprompt_config_is_too_deep_and_a_device_config_is_never_read(tmp_path):
    for name in ("deep", "device"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "skprompt.txt").write_text("Hello {{$input}}")
    (tmp_path / "deep" / "config.json").write_bytes(b'{"a":' + b"[" * 300 + b"]" * 300 + b"}")
    _, rejected, stats = read_all(tmp_path / "deep" / "skprompt.txt")
    assert [r.code for r in rejected] == ["too_deep"] and stats.read_balanced
    os.symlink("/dev/zero", tmp_path / "device" / "config.json")
    code = (
        "import sys, pipeline; rejected = []\n"
        "list(pipeline.read(sys.argv[1:2], on_reject=rejected.append))\n"
        "print([r.message for r in rejected])"
    )
    result = _python(code, str(tmp_path / "device" / "skprompt.txt"))
    assert "config.json: not a regular file" in result.stdout, result.stderr


def test_a_path_that_is_not_a_regular_file_is_one_rejection_never_opened(tmp_path):
    os.symlink("/dev/zero", tmp_path / "zero.jsonl")
    os.mkfifo(tmp_path / "pipe.jsonl")
    code = (
        "import sys\nfrom pipeline.sources import iter_file\n"
        "for path in sys.argv[1:]:\n"
        "    print([(item.code, item.message) for item in iter_file(path)])"
    )
    result = _python(code, str(tmp_path / "zero.jsonl"), str(tmp_path / "pipe.jsonl"))
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and all("unreadable_file" in line for line in lines), result.stderr
    assert all("is not a regular file" in line for line in lines)


def test_folder_symlinks_are_never_followed_out_nor_round_a_cycle(tmp_path):
    folder, outside = tmp_path / "in", tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    outside.mkdir()
    _jsonl(outside / "secret.jsonl", GOOD)
    _jsonl(folder / "good.jsonl", GOOD)
    os.symlink(outside, folder / "sub" / "out")
    os.symlink("..", folder / "sub" / "up")
    os.symlink("../..", folder / "sub" / "cycle")  # with `up`, a plain glob never ends
    for given in (str(folder), f"{folder}/**/*.jsonl", f"{folder}/*/*"):
        args = ["convert", given, "-o", str(tmp_path / "o.jsonl")]
        result = _python("from pipeline.cli import main; main()", *args)
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        assert "Check: 1 read = 1 converted + 0 quarantined" in result.stderr, given
        assert "secret" not in (tmp_path / "o.jsonl").read_text()
        assert "a symlink leading outside" in result.stderr, given
        refused = expand_inputs([given]).refused  # each once, however often it was met
        assert set(refused) == {f"{folder.as_posix()}/sub/{n}" for n in ("out", "cycle")}


def test_blank_lines_of_any_whitespace_are_skipped_in_runs_keeping_line_numbers(tmp_path):
    source = tmp_path / "blank.jsonl"
    source.write_bytes(orjson.dumps(GOOD) + b"\r\n \t\n" * 1_000_000 + b"  {not json}\n")
    _, rejected, _ = read_all(source)
    assert [r.locator.rsplit(":", 1)[1] for r in rejected] == ["2000001"]


def test_a_line_too_long_to_skip_gives_up_the_rest_of_the_file(tmp_path):
    source = tmp_path / "long.jsonl"
    source.write_bytes(b'"' + b"x" * 500 + b'"\n' + b"y" * 5000 + b"\n" + orjson.dumps(GOOD))
    limits = ReadLimits(max_record_bytes=100, max_skip_bytes=1000)
    threads, rejected, stats = read_all(source, limits=limits)
    assert [r.code for r in rejected] == ["oversize_record", "oversize_record"]
    assert "502 bytes" in rejected[0].message
    assert "the rest of the file is not read" in rejected[1].message
    assert threads == [] and stats.records_read == 2 and stats.read_balanced
    (part,) = plan_parts([(str(source), "auto")], split_bytes=10**6)
    assert [r.code for r in iter_part_records(part, limits)] == ["oversize_record"] * 2


def test_an_unreadable_part_of_a_split_file_costs_only_that_part(tmp_path):
    source = tmp_path / "parts.jsonl"
    good = orjson.dumps(GOOD) + b"\n"
    source.write_bytes(good * 20 + b"[" * 300 + b"]" * 300 + b"\n" + b"z" * 3000 + b"\n" + good)
    limits = ReadLimits(max_record_bytes=700, max_skip_bytes=1000)
    parts = plan_parts([(str(source), "auto")], split_bytes=len(good) * 20)
    first, second, third = ([*iter_part_records(part, limits)] for part in parts)
    assert [r.code for r in second] == ["too_deep", "oversize_record"]
    assert second[0].locator.endswith(":21")
    assert len(first) == 20 and [r.locator.rsplit(":", 1)[1] for r in third] == ["23"]


def test_a_device_or_pipe_as_output_is_refused_not_replaced(tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for command in (["convert", "data_samples/mms", "-o"], ["lint", "data_samples/mms", "-o"]):
        result = CliRunner().invoke(main, [*command, str(pipe)])
        assert result.exit_code == 2 and "not a regular file" in result.output, result.output
    assert pipe.is_fifo()


def test_a_bug_while_tokenizing_is_never_called_a_usage_error(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr("pipeline.jobs.tokenize.tokenize_dataset", broken)
    monkeypatch.delenv("MMS_DEBUG", raising=False)
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    args = ["tokenize", "data_samples/mms", "--tokenizer", "configs/sample_tokenizer"]
    result = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "out")])
    assert result.exit_code == 3 and "internal error" in result.output, result.output
