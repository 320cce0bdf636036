"""The `mms` command line: version, formats, convert with quarantine, summary and the
counting invariant, --strict, determinism, and the golden output of the samples."""

from __future__ import annotations

import os

import orjson
import pytest
from click.testing import CliRunner

import pipeline
from pipeline.cli import main
from tests.conftest import REPO


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def good_thread(n: int) -> bytes:
    return orjson.dumps(
        {
            "id": f"good-{n}",
            "messages": [
                {"role": "developer", "content": "Answer in `json`."},
                {"role": "user", "content": f"question {n}"},
                {"role": "assistant", "format": "json", "content": "{}", "end_turn": True},
            ],
        }
    )


def lines_of(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_version_and_formats():
    assert run("--version").output.strip() == f"mms, version {pipeline.__version__}"
    out = run("formats").output.splitlines()
    assert out[0].startswith("auto ")
    assert any(line.startswith("mms ") for line in out)
    assert len(out) == len(pipeline.FORMATS) + 1


def test_help_starts_with_mms_run():
    """`mms --help` leads with the whole job: the first example and the first command are
    `mms run`; every command is listed once."""
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    examples = result.output.split("Start with:")[1].split("Options:")[0].split()
    assert examples[:2] == ["mms", "run"]
    commands = [line.split()[0] for line in result.output.split("Commands:")[1].splitlines()[1:]]
    assert commands[0] == "run"
    assert commands == main.list_commands(None) and len(set(commands)) == len(commands)


def test_mixed_good_and_bad_lines_quarantine_each_bad_one(tmp_path):
    source = tmp_path / "mixed.jsonl"
    source.write_bytes(
        b"\n".join(
            [
                good_thread(1),
                good_thread(2)[:40],  # truncated line
                b'"just a string"',
                good_thread(3),
                b'{"id": "bad-utf8", "messages": [{"role": "user", "content": "caf\xe9"}]}',
                b'{"id": "huge", "messages": [{"role": "user", "content": "'
                + b"x" * 5000
                + b'"}]}',
                b'{"id": "robot", "messages": [{"role": "robot", "content": "beep"}]}',
                good_thread(4),
            ]
        )
        + b"\n"
    )
    out, quarantine = tmp_path / "out.jsonl", tmp_path / "q.jsonl"
    result = run(
        "convert",
        str(source),
        "-o",
        str(out),
        "--quarantine",
        str(quarantine),
        "--max-record-bytes",
        "4096",
    )
    assert result.exit_code == 0, result.output
    assert [t["id"] for t in lines_of(out)] == ["good-1", "good-3", "good-4"]
    rejected = lines_of(quarantine)
    assert [(r["locator"], r["code"]) for r in rejected] == [
        (f"{source}:2", "invalid_json"),
        (f"{source}:3", "not_an_object"),
        (f"{source}:5", "invalid_utf8"),
        (f"{source}:6", "oversize_record"),
        (f"{source}:7", "invalid_thread"),
    ]
    assert all(r["source"] == str(source) and r["message"] and r["raw"] for r in rejected)
    assert rejected[2]["raw"].endswith('"caf\\xe9"}]}')
    assert rejected[3]["raw_truncated"] is True and len(rejected[3]["raw"]) == 4096
    assert 'unknown role "robot"' in rejected[4]["message"]
    assert rejected[4]["details"] == [
        {
            "path": "messages[0].role",
            "kind": "unknown_role",
            "message": rejected[4]["message"].split(": ", 1)[1],
        }
    ]
    assert "Read 8 records from 1 file (mms: 1)" in result.output
    assert "Wrote 3 threads" in result.output
    assert "Quarantined 5 records" in result.output
    for code in (
        "invalid_json",
        "not_an_object",
        "invalid_utf8",
        "oversize_record",
        "invalid_thread",
    ):
        assert f"1  {code}" in result.output
    assert "Check: 8 read = 3 converted + 5 quarantined ✓" in result.output


def test_strict_exits_1_only_when_something_was_quarantined(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_bytes(good_thread(1) + b"\n")
    assert run("convert", str(good), "-o", str(tmp_path / "a.jsonl"), "--strict").exit_code == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(good_thread(1) + b"\n{oops\n")
    result = run("convert", str(bad), "-o", str(tmp_path / "b.jsonl"), "--strict")
    assert result.exit_code == 1
    assert "--strict: 1 record quarantined" in result.output
    assert len(lines_of(tmp_path / "b.jsonl")) == 1
    assert len(lines_of(tmp_path / "b.rejected.jsonl")) == 1


def test_undetectable_file_is_quarantined_as_unknown_format(tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_bytes(b'{"sample_id": 1, "steps": ["a"]}\n{"sample_id": 2, "steps": ["b"]}\n')
    result = run("convert", str(path), "-o", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 0
    assert f"none of the 2 records of {path} converted (mostly unknown_format)" in result.output
    assert f"mms formats --suggest-mapping {path}" in result.output
    assert "(unknown: 1)" in result.output  # not `-`, which reads as standard input
    assert [r["code"] for r in lines_of(tmp_path / "o.rejected.jsonl")] == ["unknown_format"] * 2
    named = run("convert", str(path), "-o", str(tmp_path / "o2.jsonl"), "--from", "mms")
    assert named.exit_code == 1  # a --from that converts nothing is an error
    assert "auto-detection recognises none of them either" in named.output
    assert [r["code"] for r in lines_of(tmp_path / "o2.rejected.jsonl")] == ["invalid_thread"] * 2


def test_usage_errors_are_clear(tmp_path):
    missing = run("convert", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "o.jsonl"))
    assert missing.exit_code == 2 and "no such file or directory" in missing.output
    bad_format = run("convert", str(tmp_path), "-o", str(tmp_path / "o.jsonl"), "--from", "xml")
    assert bad_format.exit_code == 2 and "'xml' is not one of" in bad_format.output
    help_text = run("convert", "--help").output
    assert "Quarantine codes" in help_text and "oversize_record" in help_text


def test_compressed_output_is_deterministic(tmp_path):
    outputs = []
    for name in ("a.jsonl.gz", "b.jsonl.gz", "c.jsonl.zst"):
        assert (
            run("convert", str(REPO / "data_samples" / "mms"), "-o", str(tmp_path / name)).exit_code
            == 0
        )
        outputs.append((tmp_path / name).read_bytes())
    assert outputs[0] == outputs[1]
    assert outputs[2][:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic
    assert not list(tmp_path.glob(".*.tmp"))


def test_real_spec_example_converts_to_five_threads(data, tmp_path):
    out = tmp_path / "x.jsonl"  # tests/data holds a stand-in of the file's shape
    result = run("convert", str(data / "formats" / "mms" / "src__example.json"), "-o", str(out))
    assert result.exit_code == 0
    threads = [pipeline.Thread.from_dict(line) for line in lines_of(out)]
    assert len(threads) == 5
    assert not (tmp_path / "x.rejected.jsonl").exists()  # nothing quarantined: no file


def test_converter_crash_on_one_record_is_quarantined_not_fatal(tmp_path, monkeypatch):
    from pipeline.formats import FORMATS

    real = FORMATS["mms"]

    def flaky(record, options):
        if record.locator.endswith(":2"):
            raise KeyError("boom")
        return real.to_threads(record, options)

    monkeypatch.setitem(FORMATS, "mms", type(real)(real.name, real.summary, real.sniff, flaky))
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(good_thread(i) for i in range(3)))
    result = run("convert", str(path), "-o", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 0
    (rejected,) = lines_of(tmp_path / "o.rejected.jsonl")
    assert rejected["code"] == "internal_error" and "KeyError" in rejected["message"]
    assert len(lines_of(tmp_path / "o.jsonl")) == 2


@pytest.mark.skipif(os.name != "posix", reason="shell quoting")
def test_readme_test_command_is_what_ci_runs():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    blocks = [b.split("```", 1)[0].strip() for b in readme.split("```bash\n")[1:]]
    quickstart = blocks[:2]
    assert "mms run configs/quickstart.yaml" in quickstart[0]  # the main job comes first
    assert "pytest" in quickstart[1]
    assert quickstart[1] in ci.splitlines()


def test_an_output_over_an_input_is_refused_and_the_input_kept(tmp_path):
    """`mms convert in -o in/a.jsonl`: a.jsonl is an input (the folder names it), so it is
    never replaced: the command refuses, naming it, and writes nothing."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_bytes(good_thread(1) + b"\n")
    (data / "b.jsonl").write_bytes(good_thread(2) + b"\n")
    original = (data / "a.jsonl").read_bytes()
    for target in (data / "a.jsonl", tmp_path / "link.jsonl"):
        if target.name == "link.jsonl":
            target.symlink_to(data / "a.jsonl")
        result = run("convert", str(data), "-o", str(target))
        assert result.exit_code == 2, result.output
        assert "a.jsonl" in result.output and "Traceback" not in result.output
    assert (data / "a.jsonl").read_bytes() == original
    assert sorted(p.name for p in data.iterdir()) == ["a.jsonl", "b.jsonl"]


USER_ONLY = {"role": "user", "content": "hi"}


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path):
    """`mms lint ... | head -1`: the closed pipe is no error and no traceback. The findings,
    one line each in the concise format (about 1 MB), are far more than a pipe holds, so
    the command is still writing when the reader goes."""
    import subprocess
    import sys

    threads = tmp_path / "threads.jsonl"
    with threads.open("wb") as out:
        for number in range(5000):  # a user message and no answer: findings on every one
            out.write(orjson.dumps({"id": f"t{number}", "messages": [USER_ONLY]}) + b"\n")
    command = [sys.executable, "-m", "pipeline.cli", "lint", str(threads), "--fail-on", "never"]
    command += ["--output-format", "concise"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()
    errors = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141
    assert "internal error" not in errors and "Traceback" not in errors


def test_a_from_that_converts_nothing_says_what_detection_reads_and_exits_1(tmp_path):
    samples = REPO / "data_samples" / "openai"
    out = tmp_path / "out.jsonl"
    args = ["convert", str(samples), "--from", "sharegpt", "-o", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    files = len(list(samples.glob("*.jsonl")))
    assert "--from sharegpt converted none of the" in result.output
    assert f"auto-detection reads them as: openai ({files} files)" in result.output
    assert "run again with --from openai or without --from" in result.output
    assert out.is_file()  # what was asked is still written: the quarantine says why
    right = CliRunner().invoke(main, [*args[:3], "openai", "-o", str(tmp_path / "ok.jsonl")])
    assert right.exit_code == 0, right.output


def test_standard_input_and_output_are_dash(tmp_path, monkeypatch):
    """`-` reads standard input (JSON Lines, or one JSON document over many lines) and
    `-o -` writes standard output; records are located as `-:LINE`, never by a spool."""
    monkeypatch.chdir(tmp_path)
    sample = REPO / "data_samples" / "openai" / "chat_completions.jsonl"
    runner = CliRunner()
    to_file = runner.invoke(
        main, ["convert", "-", "-o", "threads.jsonl"], input=sample.read_bytes()
    )
    assert to_file.exit_code == 0, to_file.output
    threads = lines_of(tmp_path / "threads.jsonl")
    assert threads and {t["meta"]["source"] for t in threads} == {"-"}
    assert all(t["meta"]["locator"].startswith("-:") for t in threads)
    rejected = lines_of(tmp_path / "threads.rejected.jsonl")
    assert rejected and all(r["source"] == "-" and r["locator"].startswith("-:") for r in rejected)
    assert "mms-stdin" not in (tmp_path / "threads.rejected.jsonl").read_text()

    document = b'{"messages": [{"role": "user", "content": "hi"},\n {"role": "assistant", "content": "yo"}]}\n'
    to_stdout = runner.invoke(main, ["convert", "-", "-o", "-"], input=document)
    assert to_stdout.exit_code == 0
    (line,) = [text for text in to_stdout.stdout.splitlines() if text.startswith("{")]
    assert orjson.loads(line)["messages"][1]["content"] == "yo"
    assert "Wrote 1 thread to standard output" in to_stdout.stderr
    assert not (tmp_path / "rejected.jsonl").exists()  # nothing quarantined
