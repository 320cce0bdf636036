"""`mms run` end to end: the quickstart config writes the output of DESIGN §7, the counts
balance, the dataset loads with `datasets`, the output does not depend on the number of
workers, and a run killed with SIGKILL and started again ends with the same bytes."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import REPO
from tests.tokenizer_fixtures import tokenizer_file

QUICKSTART = REPO / "configs" / "quickstart.yaml"
OPENAI_SAMPLES = REPO / "data_samples" / "openai"
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
NO_GATE = "lint: {fail_on: never}"
OVERLONG_ERROR = f"tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 8, overlong: error}}"


def run_cli(*args: str):
    return CliRunner().invoke(main, ["run", *args])


def write_config(
    folder: Path,
    name: str,
    source: Path | str,
    *stages: str,
    output: Path | str | None = None,
    engine: str | None = None,
) -> Path:
    """`folder/NAME.yaml`: a run of `source` with the given `stages:` lines (YAML, one
    stage each) and `engine`; its own output goes to `folder/unused` unless named."""
    lines = [f"name: {name}", "inputs:", f"  - path: {source}"]
    lines += [f"output: {output if output is not None else folder / 'unused'}", "stages:"]
    lines += [f"  {stage}" for stage in stages]
    lines += [f"engine: {engine}"] if engine else []
    config = folder / f"{name}.yaml"
    config.write_text("\n".join(lines) + "\n")
    return config


def output_files(out: Path) -> dict[str, bytes]:
    """Every file a run left (its work directory aside), by relative path."""
    return {
        str(path.relative_to(out)): path.read_bytes()
        for path in sorted(out.rglob("*"))
        if path.is_file() and ".work" not in path.relative_to(out).parts
    }


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "quickstart"
    result = run_cli(str(QUICKSTART), "-o", str(out), "--workers", "2")
    assert result.exit_code == 0, result.output
    return out


def test_quickstart_writes_the_design_output_layout(quickstart):
    files = set(output_files(quickstart))
    assert {
        "README.md",
        "manifest.json",
        "quarantine/rejected.jsonl",
        "reports/lint.json",
        "reports/lint.md",
        "reports/lint.html",
        "tokenizer/tokenizer.json",
        "data/train-00000-of-00001.parquet",
        "data/test-00000-of-00001.parquet",
    } <= files
    manifest = orjson.loads((quickstart / "manifest.json").read_bytes())
    counts = manifest["counts"]
    assert counts["balanced"] is True
    written = sum(counts["threads_written"].values())
    assert counts["threads"] == written + sum(counts["threads_dropped"].values())
    assert counts["records_read"] == counts["records_converted"] + sum(
        counts["records_quarantined"].values()
    )
    quarantined = (quickstart / "quarantine" / "rejected.jsonl").read_bytes().count(b"\n")
    assert quarantined == sum(counts["records_quarantined"].values()) > 0
    assert manifest["tokenizer"]["renderer"] == "mms-v0"
    for split in manifest["splits"].values():
        for shard in split["shards"]:
            assert (quickstart / shard["path"]).stat().st_size == shard["bytes"]


def test_the_dataset_loads_with_the_declared_features(quickstart, offline_hf):
    import datasets

    loaded = datasets.load_dataset(str(quickstart))
    manifest = orjson.loads((quickstart / "manifest.json").read_bytes())
    assert {name: len(split) for name, split in loaded.items()} == {
        name: split["rows"] for name, split in manifest["splits"].items()
    }
    row = loaded["train"][0]
    assert len(row["input_ids"]) == len(row["labels"]) == row["num_tokens"]


def test_workers_do_not_change_the_output(quickstart, tmp_path):
    first = output_files(quickstart)
    again = tmp_path / "again"
    quickstart.rename(again)  # the same output path, so the manifest and card match too
    try:
        result = run_cli(str(QUICKSTART), "-o", str(quickstart), "--workers", "1", "--fresh")
        assert result.exit_code == 0, result.output
        assert output_files(quickstart) == first
    finally:
        if quickstart.exists():
            shutil.rmtree(quickstart)
        again.rename(quickstart)


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    out = tmp_path / "never"
    result = run_cli(str(QUICKSTART), "-o", str(out), "--dry-run")
    assert result.exit_code == 0 and re.search(r", \d+ parts? -> ", result.output)
    assert "tokenize" in result.output
    assert not out.exists()


def test_a_config_error_is_a_usage_error_with_the_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\ninputs:\n  - path: data\noutput: out\nstages:\n  dedup: {enabld: true}\n"
    )
    result = run_cli(str(bad))
    assert result.exit_code == 2 and "line 6" in result.output


def _kill_config(data: Path, tmp_path: Path) -> Path:
    tokenize = f"tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 512}}"
    source = data / "realdata" / "llamafactory"
    return write_config(tmp_path, "kill-test", source, tokenize, engine="{workers: 1}")


def test_a_run_killed_mid_way_resumes_to_the_same_bytes(data, tmp_path):
    config = _kill_config(data, tmp_path)
    out = tmp_path / "out"
    assert run_cli(str(config), "-o", str(out)).exit_code in (0, 1)
    clean = output_files(out)
    shutil.rmtree(out)
    command = [sys.executable, "-m", "pipeline.cli", "run", str(config), "-o", str(out)]
    child = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    parts = out / ".work" / "parts"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(parts.glob("*/DONE"))) < 3:
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    done = len(list(parts.glob("*/DONE")))
    total = len(orjson.loads((out / ".work" / "plan.json").read_bytes())["parts"])
    assert 3 <= done < total, f"the run was not killed mid-way ({done} of {total} parts done)"
    assert not (out / "manifest.json").exists()
    resumed = run_cli(str(config), "-o", str(out))
    assert resumed.exit_code in (0, 1), resumed.output
    assert output_files(out) == clean
    said = re.search(r"Resumed: (\d+) of (\d+) parts were done by an earlier run", resumed.output)
    assert said is not None and int(said.group(1)) >= done, resumed.output


def test_mix_weights_and_samples_by_a_stable_hash(tmp_path):
    out = tmp_path / "mix"
    result = run_cli(str(REPO / "configs" / "mix.yaml"), "-o", str(out))
    assert result.exit_code == 0, result.output
    counts = orjson.loads((out / "manifest.json").read_bytes())["counts"]
    assert counts["balanced"] is True and counts["threads_dropped"]["sampled_out"] > 0
    table = pq.read_table(out / "data" / "train-00000-of-00001.parquet", columns=["id", "meta"])
    ids = table["id"].to_pylist()
    copies = [thread_id for thread_id in ids if thread_id.endswith("#1")]
    assert copies and all(thread_id.removesuffix("#1") in ids for thread_id in copies)
    assert counts["weighted_copies"] == len(copies)
    again = tmp_path / "again"
    assert run_cli(str(REPO / "configs" / "mix.yaml"), "-o", str(again)).exit_code == 0
    same = pq.read_table(again / "data" / "train-00000-of-00001.parquet", columns=["id"])
    assert same["id"].to_pylist() == ids  # the sample is the same threads every time


def test_a_finished_run_says_what_to_do_next(tmp_path, monkeypatch):
    """The report to open, how to load, inspect, verify and push the output, as commands
    that work from here; a fresh run says nothing of resuming."""
    monkeypatch.chdir(tmp_path)
    result = run_cli(str(QUICKSTART), "-o", "out")
    assert result.exit_code == 0, result.output
    steps = result.output.split("Next:\n")[1].splitlines()
    commands = [line.split("  ")[1] for line in steps]
    assert commands[0] == "open out/reports/lint.html" and (tmp_path / commands[0][5:]).is_file()
    assert commands[1] == "open out/reports/stats.html" and (tmp_path / commands[1][5:]).is_file()
    assert commands[2] == 'datasets.load_dataset("./out")'
    shard = commands[3].removeprefix("mms inspect ")
    assert shard.startswith("out/data/") and (tmp_path / shard).is_file()
    assert commands[4:] == ["mms verify out", "mms push out ORG/NAME"]
    assert "Resumed" not in result.output


def test_the_lint_gate_fails_the_run_and_still_writes_the_reports(tmp_path):
    out = tmp_path / "lint"
    result = run_cli(str(REPO / "configs" / "lint_only.yaml"), "-o", str(out))
    assert result.exit_code == 1 and "lint gate" in result.output
    assert "Next:" not in result.output  # nothing was published: nothing to load
    assert {"reports/lint.json", "manifest.json", "quarantine/rejected.jsonl"} <= set(
        output_files(out)
    )
    assert not (out / "data").exists()


def test_shard_size_and_codec_come_from_the_config(tmp_path):
    shard = "shard: {rows_per_shard: 4, compression: snappy}"
    config = write_config(tmp_path, "small-shards", OPENAI_SAMPLES, NO_GATE, shard)
    out = tmp_path / "out"
    assert run_cli(str(config), "-o", str(out)).exit_code == 0
    shards = sorted((out / "data").glob("train-*.parquet"))
    rows = [pq.ParquetFile(s).metadata.num_rows for s in shards]
    # a cut moves to the start of the preference pair it would split: one row either way
    assert len(shards) > 1 and all(3 <= count <= 5 for count in rows[:-1]), rows
    assert sum(rows[: len(rows) - 1]) % 4 in (0, 3) or len(rows) == 1
    codec = pq.ParquetFile(shards[0]).metadata.row_group(0).column(0).compression
    assert codec == "SNAPPY"


def test_a_run_that_fails_in_the_ordered_pass_writes_no_shards(tmp_path):
    config = write_config(tmp_path, "overlong", OPENAI_SAMPLES, NO_GATE, OVERLONG_ERROR)
    out = tmp_path / "out"
    result = run_cli(str(config), "-o", str(out))
    assert result.exit_code == 1 and "nothing was written" in result.output
    assert not list(out.glob("data/*.parquet")) and not (out / "manifest.json").exists()


def test_a_relative_output_directory_is_taken_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_cli(str(QUICKSTART), "-o", "rel/out", "--workers", "1")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "rel" / "out" / "manifest.json").is_file()


def test_the_run_lints_in_its_workers_exactly_as_mms_lint_does(data, tmp_path):
    """Thread rules run in the workers, dataset rules in the ordered pass: the report must
    be `mms lint`'s for the same input, finding for finding, examples included."""
    source = data / "realdata" / "llamafactory"
    # the copy of reason_tool_use_demo_50 has 3 threads (the full file 50): dataset rules
    # judge capabilities enabled in 3 threads, not the default 10, in the run and in mms lint
    lint = "lint: {fail_on: never, dataset_min_threads: 3}"
    settings = tmp_path / "lint.toml"
    settings.write_text("dataset-min-threads = 3\n")
    no_dedup = "dedup: {enabled: false}"
    config = write_config(tmp_path, "lint-parity", source, lint, no_dedup, engine="{workers: 2}")
    out = tmp_path / "out"
    assert run_cli(str(config), "-o", str(out)).exit_code == 0
    # the run names sources as its config writes them: this one, absolute
    options = ["--fail-on", "never", "--config", str(settings)]
    linted = CliRunner().invoke(main, ["lint", str(source), "--output-format", "json", *options])
    assert linted.exit_code == 0, linted.output
    expected = orjson.loads(linted.output)
    got = orjson.loads((out / "reports" / "lint.json").read_bytes())
    assert got["summary"] == expected["summary"]
    assert got["summary"]["by_code"].keys() >= {"MMS403", "MMS405", "MMS501", "MMS502"}
    assert got["diagnostics"] == expected["diagnostics"]
    markdown = CliRunner().invoke(
        main, ["lint", str(source), "--output-format", "markdown", *options]
    )

    def body(text: str) -> list[str]:  # the inputs line names the paths as given
        return [line for line in text.splitlines() if not line.startswith("Inputs:")]

    assert body((out / "reports" / "lint.md").read_text()) == body(markdown.output)
    html = CliRunner().invoke(main, ["lint", str(source), "--output-format", "html", *options])

    def example_threads(page: str) -> list[str]:
        return [part.split("</details>")[0] for part in page.split('<div class="thread">')[1:]]

    shown = example_threads((out / "reports" / "lint.html").read_text())
    assert len(shown) > 20 and shown == example_threads(html.output)


def test_a_thread_an_earlier_stage_drops_never_reaches_the_overlong_error(tmp_path):
    """Stages run in order: a thread the filters leave out is not tokenized into an error."""
    filters = "filters: {min_messages: 1000}"
    config = write_config(
        tmp_path, "overlong-filtered", OPENAI_SAMPLES, NO_GATE, filters, OVERLONG_ERROR
    )
    out = tmp_path / "out"
    result = run_cli(str(config), "-o", str(out))
    assert result.exit_code == 0, result.output
    counts = orjson.loads((out / "manifest.json").read_bytes())["counts"]
    assert counts["threads"] > 0 and counts["threads_dropped"] == {
        "too_few_messages": counts["threads"]
    }


def test_a_changed_tokenizer_refuses_to_resume_the_parts_it_tokenized(tmp_path):
    """Finished parts hold tokens of the tokenizer they were made with: a run resumed after
    the tokenizer file changed must not mix the two."""
    tokenizer = tmp_path / "tokenizer"
    shutil.copytree(REPO / "configs" / "sample_tokenizer", tokenizer)
    tokenize = f"tokenize: {{tokenizer: {tokenizer}, max_tokens: 8, overlong: error}}"
    config = write_config(tmp_path, "stopped", OPENAI_SAMPLES, NO_GATE, tokenize)
    out = tmp_path / "out"
    assert run_cli(str(config), "-o", str(out)).exit_code == 1  # stopped, parts kept
    assert list((out / ".work" / "parts").glob("*/DONE"))
    file = tokenizer / "tokenizer.json"
    file.write_text(file.read_text() + "\n")
    resumed = run_cli(str(config), "-o", str(out))
    assert resumed.exit_code == 2
    assert f"{file} is new or changed since" in resumed.output


def test_tiktoken_and_tokenizers_write_the_same_dataset(data, tmp_path):
    """With a Llama-3 tokenizer the run encodes with tiktoken unless told otherwise; the
    shards and the shipped tokenizer are the same bytes either way, the manifest says which."""
    llama3 = tokenizer_file("bytelevel-llama3").parent  # the real one when ../shared is here
    outputs = {}
    for encoder in ("auto", "tokenizers"):
        tokenize = f"tokenize: {{tokenizer: {llama3}, encoder: {encoder}}}"
        source = data / "realdata" / "llamafactory"
        config = write_config(tmp_path, encoder, source, NO_GATE, tokenize, engine="{workers: 2}")
        out = tmp_path / encoder
        result = run_cli(str(config), "-o", str(out))
        assert result.exit_code == 0, result.output
        named = "tiktoken" if encoder == "auto" else "tokenizers"
        assert f"(text encoded by {named})" in result.output
        outputs[encoder] = output_files(out)
    fast, slow = outputs["auto"], outputs["tokenizers"]
    data = [name for name in fast if name.startswith("data/")]
    assert data and all(fast[name] == slow[name] for name in data)
    assert fast["tokenizer/tokenizer.json"] == slow["tokenizer/tokenizer.json"]
    encoders = [
        orjson.loads(files["manifest.json"])["tokenizer"]["text_encoder"] for files in (fast, slow)
    ]
    assert encoders == ["tiktoken", "tokenizers"]


def test_files_that_are_not_data_are_listed_as_skipped(tmp_path):
    """A folder input's README is read by no part; the summary and the report say so, as
    `mms convert` and `mms lint` do, so nothing is left out unseen."""
    folder = tmp_path / "inputs"
    folder.mkdir()
    shutil.copy(REPO / "data_samples" / "openai" / "chat_completions.jsonl", folder)
    (folder / "notes.md").write_text("# where these came from\n")
    config = write_config(tmp_path, "skipping", folder, NO_GATE, output=tmp_path / "out")
    result = run_cli(str(config))
    assert result.exit_code == 0, result.output
    assert f"skipped 1 unsupported file: {folder / 'notes.md'}" in result.output
    html = (tmp_path / "out" / "reports" / "lint.html").read_text()
    assert "1 skipped (not data files)" in html


def test_the_same_config_and_data_elsewhere_write_the_same_bytes(tmp_path):
    """Paths are recorded relative to the config's folder (manifest inputs and config, its
    digest, the base tokenizer's path): a checkout moved to another folder, run with the
    same config, writes every output file byte for byte the same."""
    outputs = []
    for place in ("first", "second/deeper"):
        root = tmp_path / place
        shutil.copytree(REPO / "data_samples" / "openai", root / "data")
        shutil.copytree(REPO / "configs" / "sample_tokenizer", root / "tokenizer")
        tokenize = "tokenize: {tokenizer: tokenizer}"
        config = write_config(root, "moved", "data", NO_GATE, tokenize, output="out")
        result = run_cli(str(config))
        assert result.exit_code == 0, result.output
        outputs.append(output_files(root / "out"))
    assert outputs[0] == outputs[1]
    manifest = orjson.loads(outputs[0]["manifest.json"])
    assert all(record["path"].startswith("data/") for record in manifest["inputs"])
    assert manifest["tokenizer"]["base"]["path"] == "tokenizer/tokenizer.json"


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "configs").glob("*.yaml")))
def test_every_bundled_config_runs_on_a_fresh_clone(name, tmp_path):
    """Each config in configs/ runs as shipped (only the output is moved): the counts
    balance, and only lint_only.yaml, whose gate fails on warnings by design, exits 1."""
    out = tmp_path / "out"
    result = run_cli(str(REPO / "configs" / name), "-o", str(out))
    assert "Traceback" not in result.output
    assert result.exit_code == (1 if name == "lint_only.yaml" else 0), result.output
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["counts"]["balanced"] is True
    assert manifest["gate"]["passed"] is (name != "lint_only.yaml")
    per_input_agrees_with_the_totals(manifest["counts"], result.output)


def per_input_agrees_with_the_totals(counts: dict, summary: str) -> None:
    """The inputs' rows add up to the run's counts, per code, reason and split, and the
    summary's written lines, check line and per-input table say the same rows."""
    inputs = counts["inputs"]

    def added(key: str) -> dict[str, int]:
        total: Counter[str] = Counter()
        for source in inputs:
            total.update(source[key])
        return dict(total)

    assert added("quarantined_by") == counts["records_quarantined"]
    assert added("dropped_by") == counts["threads_dropped"]
    assert added("written_by_split") == {k: v for k, v in counts["threads_written"].items() if v}
    assert sum(source["weighted_copies"] for source in inputs) == counts["weighted_copies"]
    assert sum(source["tokens"] for source in inputs) == counts["tokens"]
    rows = sum(counts["threads_written"].values())
    number = r"([\d,]+)"
    written_lines = re.findall(rf"^\s+{number}  written ", summary, re.M)
    assert sum(_count(found) for found in written_lines) == rows
    check = re.search(rf"threads = {number} written(?: \(\+ {number} weighted copies)?", summary)
    assert check is not None, summary
    kept, copies = _count(check.group(1)), _count(check.group(2) or "0")
    assert (kept + copies, copies) == (rows, counts["weighted_copies"])
    if len(inputs) > 1:
        table = summary[summary.index("Per input") :].splitlines()[2 : 2 + len(inputs)]
        column = -2 if counts["tokens"] else -1  # written, before tokens when tokenized
        assert sum(_count(line.split()[column]) for line in table) == rows


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_tool_calling_gate_is_not_idle(tmp_path):
    """tool_calling.yaml passes because its drop_on leaves out the threads the samples
    hold on purpose (a tool the developer never declared, arguments against the schema,
    an answer before the tool result); the same job without drop_on fails on them."""
    shipped = REPO / "configs" / "tool_calling.yaml"
    out = tmp_path / "out"
    result = run_cli(str(shipped), "-o", str(out))
    assert result.exit_code == 0, result.output
    dropped = orjson.loads((out / "manifest.json").read_bytes())["counts"]["threads_dropped"]
    assert {"lint:MMS201", "lint:MMS403", "lint:MMS303"} <= set(dropped)
    summary = orjson.loads((out / "reports" / "lint.json").read_bytes())["summary"]
    assert {"MMS201", "MMS403", "MMS303"} <= set(summary["on_dropped_threads"])
    assert summary["gate"] == {"fail_on": "error", "failed": False, "failed_by": {}}

    text = shipped.read_text().replace("../data_samples", str(REPO / "data_samples"))
    text = text.replace("tokenizer: sample_tokenizer", f"tokenizer: {SAMPLE_TOKENIZER}")
    undropped = tmp_path / "undropped.yaml"
    undropped.write_text(re.sub(r"drop_on: \[.*\]", "drop_on: []", text))
    failed = run_cli(str(undropped), "-o", str(tmp_path / "failed"))
    assert failed.exit_code == 1, failed.output
    gate = orjson.loads((tmp_path / "failed" / "manifest.json").read_bytes())["gate"]
    assert {"MMS201", "MMS403", "MMS303"} <= {entry["code"] for entry in gate["failed_by"]}


def test_on_a_terminal_progress_shows_parts_records_tokens_and_time_left(tmp_path):
    """Through a pseudo-terminal: one line per stage, parts done of all, the
    ordered pass's records and tokens so far, and the time left."""
    import pty

    main_fd, child_fd = pty.openpty()
    command = [sys.executable, "-m", "pipeline.cli", "run", str(QUICKSTART), "-o", str(tmp_path)]
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm-256color"}
    child = subprocess.Popen(command, cwd=REPO, stdout=child_fd, stderr=child_fd, env=env)
    os.close(child_fd)
    shown = b""
    while chunk := _read_pty(main_fd):
        shown += chunk
    os.close(main_fd)
    assert child.wait() == 0
    text = shown.decode(errors="replace")
    parts = re.findall(r"read, lint, tokenize: (\d+) of (\d+) parts", text)
    assert parts and parts[-1][0] == parts[-1][1]
    ordered = re.findall(
        r"lint, dedup, split: \d+ of \d+ parts, ([\d,]+) records?, ([\d,]+) tokens", text
    )
    manifest = orjson.loads((tmp_path / "manifest.json").read_bytes())["counts"]
    assert ordered[-1] == (f"{manifest['records_read']:,}", f"{manifest['tokens']:,}")
    assert "left" in text


def _read_pty(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # the child closed the terminal
        return b""


def test_the_cards_load_lines_name_the_folder_as_a_local_path(tmp_path, monkeypatch):
    """A card names its output `./NAME` to `load_dataset` and `from_pretrained`: run beside
    the folder they load it; run anywhere else they fail, rather than load a Hub
    repository or an older cached dataset that happens to share the folder's name."""
    import datasets

    monkeypatch.chdir(tmp_path)
    result = run_cli(str(QUICKSTART), "-o", "out")
    assert result.exit_code == 0, result.output
    card = (tmp_path / "out" / "README.md").read_text()
    targets = re.findall(r'load_dataset\("([^"]+)"', card)
    assert targets and set(targets) == {"./out"}
    assert 'from_pretrained("./out/tokenizer")' in card
    loaded = datasets.load_dataset(targets[0], cache_dir=str(tmp_path / "cache"))
    assert sum(split.num_rows for split in loaded.values()) > 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(Exception) as raised:
        datasets.load_dataset(targets[0], cache_dir=str(tmp_path / "cache"))
    assert "./out" in str(raised.value)
