"""`mms stats` agrees exactly with the same figures computed independently from the shards
with pyarrow and numpy, per split and per source, on a run over real files (the small
copies of tests/data/realdata)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.jobs.stats import PERCENTILES
from tests.conftest import REPO
from tests.realdata_mix import write_mix_config
from tests.test_run import output_files, run_cli
from tests.tokenizer_fixtures import tokenizer_file


@pytest.fixture(scope="module")
def output(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("stats")
    config = write_mix_config(folder / "mix.yaml", data / "realdata")
    out = folder / "out"
    result = run_cli(str(config), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert output_files(out)
    return out


def expected(paths: list[Path]) -> dict:
    table = pq.read_table(paths)
    tokens = table["num_tokens"].to_numpy().astype(np.int64)
    messages = table["messages"].to_pylist()
    turns = [sum(m["role"] == "user" for m in thread) for thread in messages]
    calls = [sum(":" in (m["format"] or "") for m in thread) for thread in messages]
    buckets = Counter(str(2 ** int(np.floor(np.log2(n)))) if n > 0 else "0" for n in tokens)
    found = {
        "threads": table.num_rows,
        "messages": sum(len(thread) for thread in messages),
        "tokens": int(tokens.sum()),
        "trained_tokens": int(pc.sum(table["num_trained"]).as_py()),
        "length_max": int(tokens.max()),
        "turns_max": max(turns),
        "turns_mean": round(sum(turns) / len(turns), 3),
        "tool_calls": sum(calls),
        "threads_with_tool_calls": sum(1 for c in calls if c),
        "length_histogram": dict(buckets),
    }
    for q in PERCENTILES:
        found[f"length_p{q * 100:g}"] = int(np.percentile(tokens, q * 100, method="lower"))
    return found


def test_stats_agree_with_the_shards_computed_independently(output: Path):
    result = CliRunner().invoke(
        main, ["stats", str(output), "--output-format", "json", "--by", "source"]
    )
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)["splits"]
    shards = sorted((output / "data").glob("*.parquet"))
    splits = {path.name.split("-")[0] for path in shards}
    assert set(stats) == splits == {"train", "validation", "test"}
    for split in splits:
        paths = [p for p in shards if p.name.startswith(f"{split}-")]
        figures = stats[split]
        for key, value in expected(paths).items():
            assert figures[key] == value, (split, key)
        table = pq.read_table(paths, columns=["meta", "num_tokens"])
        by_source: Counter[str] = Counter()
        tokens: Counter[str] = Counter()
        for meta, count in zip(
            table["meta"].to_pylist(), table["num_tokens"].to_pylist(), strict=True
        ):
            source = orjson.loads(meta).get("source", "-")
            by_source[source] += 1
            tokens[source] += count
        groups = {g["group"]: g for g in figures["by"]["groups"]}
        assert {name: g["threads"] for name, g in groups.items()} == dict(by_source)
        assert {name: g["tokens"] for name, g in groups.items()} == dict(tokens)


def test_text_stats_and_clear_errors(output: Path, tmp_path: Path):
    text = CliRunner().invoke(main, ["stats", str(output)])
    assert text.exit_code == 0
    manifest = orjson.loads((output / "manifest.json").read_bytes())["counts"]
    rows = manifest["threads_written"]
    for split, count in rows.items():
        assert f"{split}: {count:,} threads" in text.output
    assert "length in tokens: p50" in text.output and "threads by length:" in text.output
    missing = CliRunner().invoke(main, ["stats", str(tmp_path)])
    assert missing.exit_code == 2 and "no Parquet shards found" in missing.output
    bad_by = CliRunner().invoke(main, ["stats", str(output), "--by", "$.x"])
    assert bad_by.exit_code == 2 and "meta field name" in bad_by.output


def test_a_run_writes_its_stats_and_mms_stats_adds_its_accounting(output: Path):
    """reports/stats.json is what `mms stats OUT` says (listed and hashed in the manifest):
    the shards' figures and the run's accounting from the manifest."""
    written = json.loads((output / "reports" / "stats.json").read_text())
    result = CliRunner().invoke(main, ["stats", str(output), "--output-format", "json"])
    shown = json.loads(result.output)
    assert shown == written
    run = shown["run"]
    manifest = orjson.loads((output / "manifest.json").read_bytes())
    assert "reports/stats.json" in manifest["reports"]
    counts = manifest["counts"]
    assert run["threads"] == counts["threads"] and run["inputs"] == counts["inputs"]
    assert run["duplicate_rate"]["exact"] == round(
        counts["threads_dropped"]["duplicate"] / counts["threads"], 6
    )
    assert run["duplicate_rate"]["exact"] > 0 and run["duplicate_rate"]["near"] > 0
    assert run["tokens_dropped"] == counts["tokens_dropped"] and run["tokens_dropped"]


def test_a_shard_counted_a_few_rows_at_a_time_gives_the_same_figures(output: Path, monkeypatch):
    """A shard is counted STATS_ROWS rows at a time (its tables merged as they come): the
    figures, per split and per source, do not depend on how many rows that is."""
    import pipeline.jobs.stats.compute as compute

    def shown(*by: str) -> dict:
        result = CliRunner().invoke(main, ["stats", str(output), "--output-format", "json", *by])
        assert result.exit_code == 0, result.output
        return dict(json.loads(result.output))

    whole = {by: shown(*by) for by in ((), ("--by", "source"))}
    rows = pq.ParquetFile(sorted((output / "data").glob("train-*.parquet"))[0]).metadata.num_rows
    monkeypatch.setattr(compute, "STATS_ROWS", 7)
    assert rows > 7 * 3  # the shard is counted in several scans
    assert {by: shown(*by) for by in whole} == whole
    assert whole[()]["splits"]["train"]["roles"] and whole[()]["splits"]["train"]["capabilities"]


def test_tokens_per_role_agree_with_the_shards_split_at_each_role_token(output: Path):
    """Each message's tokens run from its `<|role|>` id to the next message's (the last to
    the row's end), a trained `<|role|>` (a halt) counted with the message before it:
    counted here in Python over every row, against the run's figures."""
    role_id = orjson.loads((output / "tokenizer" / "mms_special_tokens.json").read_bytes())[
        "special_tokens"
    ]["<|role|>"]
    stats = json.loads((output / "reports" / "stats.json").read_text())["splits"]
    for split, figures in stats.items():
        table = pq.read_table(sorted((output / "data").glob(f"{split}-*.parquet")))
        tokens: Counter[str] = Counter()
        trained: Counter[str] = Counter()
        messages: Counter[str] = Counter()
        for thread, ids, labels in zip(
            table["messages"].to_pylist(),
            table["input_ids"].to_pylist(),
            table["labels"].to_pylist(),
            strict=True,
        ):
            opens = [i for i, token in enumerate(ids) if token == role_id][: len(thread)]
            assert len(opens) == len(thread)
            ends = [*opens[1:], len(ids)]
            for index, (message, start, end) in enumerate(zip(thread, opens, ends, strict=True)):
                role = message["role"]
                messages[role] += 1
                tokens[role] += end - start
                trained[role] += sum(label != -100 for label in labels[start:end])
                if index and labels[start] != -100:
                    halted = thread[index - 1]["role"]
                    assert halted == "assistant"
                    for counts in (tokens, trained):
                        counts[role] -= 1
                        counts[halted] += 1
        roles = figures["roles"]
        assert {role: r["tokens"] for role, r in roles.items()} == dict(tokens), split
        assert {role: r["trained_tokens"] for role, r in roles.items()} == dict(trained)
        assert {role: r["messages"] for role, r in roles.items()} == dict(messages)
        assert sum(tokens.values()) == figures["tokens"]
        assert sum(trained.values()) == figures["trained_tokens"]
        assert {role for role, count in trained.items() if count} == {"assistant"}


def test_capabilities_agree_with_the_linters_reading_of_each_thread(output: Path):
    from pipeline.capabilities import DEFAULT_CAPABILITY, thread_capabilities
    from pipeline.mms import THREAD_ARROW_SCHEMA, threads_from_arrow

    stats = json.loads((output / "reports" / "stats.json").read_text())["splits"]
    for split, figures in stats.items():
        table = pq.read_table(sorted((output / "data").glob(f"{split}-*.parquet")))
        enabled: Counter[str] = Counter()
        used: Counter[str] = Counter()
        for thread in threads_from_arrow(
            table.select([n for n in THREAD_ARROW_SCHEMA.names if n in table.column_names])
        ):
            caps = thread_capabilities(thread)
            enabled.update(name for name in caps.enabled if name != DEFAULT_CAPABILITY)
            used.update({use.format for use in caps.uses})
        found = figures["capabilities"]
        assert {f: c["enabled"] for f, c in found.items() if c["enabled"]} == dict(enabled)
        assert {f: c["used"] for f, c in found.items() if c["used"]} == dict(used), split
    assert any(figures["capabilities"] for figures in stats.values())


def test_tokens_cut_by_truncation_are_the_whole_threads_less_the_written(output: Path):
    """Each truncated thread's note gives its whole length; the written row its own."""
    table = pq.read_table(
        sorted((output / "data").glob("*.parquet")), columns=["meta", "num_tokens"]
    )
    whole = re.compile(r"\(the whole thread has (\d+) tokens\)")
    cut = threads = 0
    for meta, tokens in zip(
        table["meta"].to_pylist(), table["num_tokens"].to_pylist(), strict=True
    ):
        notes = " ".join(orjson.loads(meta).get("notes", []))
        if match := whole.search(notes):
            cut += int(match.group(1)) - tokens
            threads += 1
    run = json.loads((output / "reports" / "stats.json").read_text())["run"]
    counts = orjson.loads((output / "manifest.json").read_bytes())["counts"]
    assert threads > 0
    assert run["truncated"] == counts["threads_truncated"]
    assert run["tokens_truncated"] == counts["tokens_truncated"]


def test_the_json_follows_its_schema(output: Path):
    from jsonschema import Draft202012Validator

    from tests.conftest import REPO

    schema = json.loads((REPO / "schemas" / "stats.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    result = CliRunner().invoke(
        main, ["stats", str(output), "--output-format", "json", "--by", "source"]
    )
    shown = json.loads(result.output)
    assert not list(validator.iter_errors(shown))
    assert not list(
        validator.iter_errors(json.loads((output / "reports" / "stats.json").read_text()))
    )
    shown["splits"]["train"]["threads"] = -1
    assert list(validator.iter_errors(shown))


def test_markdown_is_the_same_figures_and_the_run_writes_it(output: Path):
    shown = CliRunner().invoke(main, ["stats", str(output), "--output-format", "markdown"])
    assert shown.exit_code == 0
    assert shown.output.rstrip("\n") == (output / "reports" / "stats.md").read_text().rstrip("\n")
    page, run = shown.output.split("\n## The run\n")
    figures = json.loads((output / "reports" / "stats.json").read_text())["splits"]["train"]
    assert f"| `train` | {figures['threads']:,} | {figures['messages']:,} |" in page
    assert "exact duplicates" in run and "| input |" in run and "tokens cut" in run
    assert "## train: tokens per role" in page and "| `assistant` |" in page


def test_a_packed_output_gives_its_rows_and_the_threads_packed_in_them(output: Path, tmp_path):
    packed = tmp_path / "packed"
    made = CliRunner().invoke(main, ["pack", str(output), "--seq-len", "512", "-o", str(packed)])
    assert made.exit_code == 0, made.output
    shown = CliRunner().invoke(main, ["stats", str(packed), "--output-format", "json"])
    assert shown.exit_code == 0, shown.output
    figures = json.loads(shown.output)["splits"]
    assert set(figures) == {"train", "validation", "test"}
    for split in figures:
        table = pq.read_table(sorted((packed / "data").glob(f"{split}-*.parquet")))
        assert figures[split]["rows"] == table.num_rows
        assert figures[split]["threads"] == sum(len(s) for s in table["seq_lens"].to_pylist())
        assert figures[split]["length_max"] <= 512
    text = CliRunner().invoke(main, ["stats", str(packed)])
    assert (
        text.exit_code == 0 and "threads packed in" in text.output and "row length" in text.output
    )


def test_the_card_carries_the_headline_figures_and_points_at_the_reports(output: Path):
    counts = orjson.loads((output / "manifest.json").read_bytes())["counts"]
    card = (output / "README.md").read_text()
    dropped = counts["threads_dropped"]
    assert f"| exact duplicates removed | {dropped['duplicate']:,} |" in card
    assert f"| near duplicates removed | {dropped['near_duplicate']:,} |" in card
    cut = f"{counts['threads_truncated']:,} ({counts['tokens_truncated']:,} tokens cut)"
    assert f"| threads truncated to fit | {cut} |" in card
    share = counts["trained_tokens"] / counts["tokens"]
    assert f"| trained share | {share:.1%} |" in card
    assert "(reports/stats.md)" in card
    figures = json.loads((output / "reports" / "stats.json").read_text())["splits"]["train"]
    p = [figures[f"length_p{q}"] for q in (50, 90, 99)]
    assert f"| {p[0]:,} / {p[1]:,} / {p[2]:,} / {figures['length_max']:,} |" in card


def test_a_bos_is_counted_before_the_first_message_and_is_no_message(tmp_path: Path):
    config = tmp_path / "bos.yaml"
    config.write_text(
        f"name: bos\ninputs:\n  - path: {REPO / 'data_samples' / 'mms'}\n"
        "stages:\n  lint: {fail_on: never}\n"
        f"  tokenize: {{tokenizer: {tokenizer_file('sentencepiece-phi3').parent}, bos: true}}\n"
        "  shard: {splits: {train: 1.0}}\noutput: out\n"
    )
    result = run_cli(str(config))
    assert result.exit_code == 0, result.output
    figures = json.loads((tmp_path / "out" / "reports" / "stats.json").read_text())["splits"]
    train = figures["train"]
    assert train["roles"]["bos"] == {
        "messages": 0,
        "tokens": train["threads"],
        "trained_tokens": 0,
        "token_share": round(train["threads"] / train["tokens"], 6),
    }
    assert sum(r["tokens"] for r in train["roles"].values()) == train["tokens"]
    assert sum(r["messages"] for r in train["roles"].values()) == train["messages"]
