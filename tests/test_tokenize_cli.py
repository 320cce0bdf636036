"""`mms tokenize` end to end: the dataset it writes (shards, tokenizer, quarantine), the
counts it prints, its determinism and its errors."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from tokenizers import Tokenizer, models, pre_tokenizers

from pipeline.cli import main
from pipeline.tokenize import IGNORE, MMS_SPECIAL_TOKENS
from tests.conftest import REPO, SHARED
from tests.reading import read_all
from tests.tokenizer_fixtures import repo_threads, shared_present, tokenizer_file, write_threads

OPENAI = str(REPO / "data_samples" / "openai")
CHECK = re.compile(
    r"Check: ([\d,]+) records read = ([\d,]+) converted \+ ([\d,]+) quarantined; "
    r"([\d,]+) threads = ([\d,]+) written \+ ([\d,]+) dropped ✓"
)
COLUMNS = {
    "id": pa.string(),
    "input_ids": pa.list_(pa.int32()),
    "labels": pa.list_(pa.int32()),
    "num_tokens": pa.int32(),
    "num_trained": pa.int32(),
    "meta": pa.string(),
}


def run(*args: str):
    """`mms tokenize ARGS`, its media not read: data_samples' media files are not in the
    repository, and these tests are about tokenizing (tests/test_media_tokens.py checks
    media in `mms tokenize`)."""
    return CliRunner().invoke(main, ["tokenize", *args, "--no-check-media"])


@pytest.fixture(scope="module")
def word_tokenizer(tmp_path_factory) -> Path:
    """A word-level tokenizer.json (with a tokenizer_config.json naming `<s>` as BOS)."""
    directory = tmp_path_factory.mktemp("tokenizer")
    words = ["[UNK]", "<s>", "user", "assistant", "developer", "context", "markdown"]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, "[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text('{"bos_token": "<s>"}')
    return directory


def counts(output: str) -> list[int]:
    found = CHECK.search(output)
    assert found, output
    return [int(number.replace(",", "")) for number in found.groups()]


def lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def shard_table(out: Path) -> pa.Table:
    return pa.concat_tables(pq.read_table(p) for p in sorted((out / "data").glob("*.parquet")))


def test_writes_the_dataset_and_a_balanced_count(tmp_path, word_tokenizer):
    out = tmp_path / "out"
    result = run(OPENAI, "--tokenizer", str(word_tokenizer), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "data").iterdir()) == ["train-00000-of-00001.parquet"]
    table = pq.read_table(out / "data" / "train-00000-of-00001.parquet")
    assert table.column_names == [
        "id",
        "messages",
        "input_ids",
        "labels",
        "num_tokens",
        "num_trained",
        "meta",
        "media",  # the sample's threads hold images and audio: their media (DESIGN §7)
        "images",
        "audios",
    ]
    assert {name: table.schema.field(name).type for name in COLUMNS} == COLUMNS
    threads, rejected, stats = read_all(OPENAI)
    assert table["id"].to_pylist() == [t.id for t in threads]
    for row in table.to_pylist():
        assert len(row["input_ids"]) == len(row["labels"]) == row["num_tokens"]
        trained = [
            (x, y) for x, y in zip(row["labels"], row["input_ids"], strict=True) if x != IGNORE
        ]
        assert all(x == y for x, y in trained) and len(trained) == row["num_trained"]
    read, converted, quarantined, threads_in, written, dropped = counts(result.output)
    assert (
        (read, converted, quarantined)
        == (27, 23, 4)
        == (
            stats.records_read,
            stats.records_converted,
            len(rejected),
        )
    )
    assert (threads_in, written, dropped) == (len(threads), table.num_rows, 0)
    assert len(lines(out / "quarantine" / "rejected.jsonl")) == quarantined
    assert not (out / "quarantine" / "dropped.jsonl").exists()  # nothing dropped: no file


def test_the_tokenizer_is_saved_with_its_special_ids_and_hashes(tmp_path, word_tokenizer):
    out = tmp_path / "out"
    assert run(OPENAI, "--tokenizer", str(word_tokenizer), "-o", str(out)).exit_code == 0
    saved = out / "tokenizer" / "tokenizer.json"
    record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    tokenizer = Tokenizer.from_file(str(saved))
    assert record["special_tokens"] == {t: tokenizer.token_to_id(t) for t in MMS_SPECIAL_TOKENS}
    assert list(record["special_tokens"].values()) == [7, 8, 9, 10, 11]
    assert record["tokenizer"]["sha256"] == hashlib.sha256(saved.read_bytes()).hexdigest()
    base = word_tokenizer / "tokenizer.json"
    assert record["base_tokenizer"] == {
        "path": str(base),
        "sha256": hashlib.sha256(base.read_bytes()).hexdigest(),
    }
    assert (record["renderer"], record["ignore_index"], record["bos"]) == ("mms-v0", -100, None)


def test_bos_starts_every_thread_and_is_recorded(tmp_path, word_tokenizer):
    out = tmp_path / "out"
    result = run(OPENAI, "--tokenizer", str(word_tokenizer), "-o", str(out), "--bos")
    assert result.exit_code == 0, result.output
    table = shard_table(out)
    assert {ids[0] for ids in table["input_ids"].to_pylist()} == {1}
    assert {labels[0] for labels in table["labels"].to_pylist()} == {IGNORE}
    record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    assert record["bos"] == {"token": "<s>", "id": 1}


def test_the_same_inputs_give_the_same_bytes(tmp_path, word_tokenizer):
    outputs = [tmp_path / "one", tmp_path / "two"]
    for out in outputs:
        result = run(
            OPENAI, "--tokenizer", str(word_tokenizer), "-o", str(out), "--shard-rows", "4"
        )
        assert result.exit_code == 0, result.output
    files = sorted(p.relative_to(outputs[0]) for p in outputs[0].rglob("*") if p.is_file())
    assert len([f for f in files if f.parts[0] == "data"]) == 7  # 27 threads, 4 per shard
    assert Path("data/train-00006-of-00007.parquet") in files
    for name in files:
        assert (outputs[0] / name).read_bytes() == (outputs[1] / name).read_bytes(), name


def test_overlong_drop_lists_every_dropped_thread(tmp_path, word_tokenizer):
    out = tmp_path / "out"
    result = run(OPENAI, "--tokenizer", str(word_tokenizer), "-o", str(out), "--max-tokens", "30")
    assert result.exit_code == 0, result.output
    *_, threads_in, written, dropped = counts(result.output)
    assert dropped > 0 and threads_in == written + dropped
    entries = lines(out / "quarantine" / "dropped.jsonl")
    assert len(entries) == dropped
    assert {e["code"] for e in entries} == {"overlong"}
    assert all(re.fullmatch(r"overlong: \d+ tokens > max 30", e["reason"]) for e in entries)
    # each names the thread's file as its lineage does: relative to the input folder
    names = {path.name for path in Path(OPENAI).iterdir()}
    assert all(e["locator"].rsplit(":", 1)[0] in names for e in entries)
    assert max(shard_table(out)["num_tokens"].to_pylist()) <= 30
    assert f"{dropped:>8,}  overlong" in result.output


def test_overlong_truncate_keeps_threads_under_the_maximum(tmp_path, word_tokenizer):
    out = tmp_path / "out"
    args = ["--max-tokens", "60", "--overlong", "truncate"]
    result = run(OPENAI, "--tokenizer", str(word_tokenizer), "-o", str(out), *args)
    assert result.exit_code == 0, result.output
    table = shard_table(out)
    truncated = [m for m in table["meta"].to_pylist() if "truncated by mms tokenize" in m]
    assert truncated and f"{len(truncated)} truncated at a message boundary" in result.output
    assert max(table["num_tokens"].to_pylist()) <= 60
    assert min(table["num_trained"].to_pylist()) > 0


def test_overlong_error_names_the_thread_and_writes_nothing(tmp_path, word_tokenizer):
    out = tmp_path / "out"
    args = ["--max-tokens", "30", "--overlong", "error"]
    result = run(OPENAI, "--tokenizer", str(word_tokenizer), "-o", str(out), *args)
    assert result.exit_code == 1
    assert re.search(r"thread \S+ \(\S+\.jsonl:\d+\) has \d+ tokens", result.output)
    assert "more than the maximum of 30" in result.output
    assert not [p for p in out.rglob("*") if p.is_file()]


def test_overlong_without_max_tokens_is_a_usage_error(tmp_path, word_tokenizer):
    result = run(OPENAI, "--tokenizer", str(word_tokenizer), "-o", str(tmp_path), "--overlong", "error")  # fmt: skip
    assert result.exit_code == 2
    assert "--overlong applies only with --max-tokens" in result.output


def test_bos_without_a_bos_token_is_a_usage_error(tmp_path, word_tokenizer):
    tokenizer = word_tokenizer / "tokenizer.json"
    plain = tmp_path / "plain" / "tokenizer.json"
    plain.parent.mkdir()
    plain.write_bytes(tokenizer.read_bytes())
    result = run(OPENAI, "--tokenizer", str(plain), "-o", str(tmp_path / "out"), "--bos")
    assert result.exit_code == 2
    assert "names no bos_token" in result.output


def test_a_tokenizer_that_cannot_load_is_a_usage_error(tmp_path):
    """Llama-2's tokenizer.json as older `tokenizers` wrote it (the real one when ../shared
    is present, else the small one of its shape)."""
    out = tmp_path / "out"
    llama2 = tokenizer_file("sentencepiece-llama2-legacy").parent
    result = run(OPENAI, "--tokenizer", str(llama2), "-o", str(out))
    assert result.exit_code == 2
    assert "Merges text file invalid" in result.output
    assert str(llama2 / "tokenizer.json") in result.output
    assert not out.exists()


def test_a_missing_tokenizer_is_a_usage_error(tmp_path):
    result = run(OPENAI, "--tokenizer", str(tmp_path / "nope"), "-o", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "no such file or directory" in result.output


def test_help_teaches_with_examples():
    result = CliRunner().invoke(main, ["tokenize", "--help"])
    assert result.exit_code == 0
    for text in ("Examples:", "--max-tokens 4096 --overlong truncate", "labels: -100"):
        assert text in result.output


def expected_parts(messages: list[dict]) -> list[tuple[str, bool]]:
    """DESIGN §4 written out independently of the renderer: (text, is a special token)."""
    parts = []
    for m in messages:
        parts += [("<|role|>", True), (m["role"], False)]
        if m["role"] == "context" and m["name"]:
            parts += [("<|name|>", True), (m["name"], False)]
        if m["role"] == "assistant":
            parts += [("<|format|>", True), (m["format"], False)]
        parts += [("<|content|>", True), (m["content"], False)]
        if m["role"] == "assistant" and m["end_turn"]:
            parts.append(("<|end_turn|>", True))
    if messages and messages[-1]["role"] == "assistant" and messages[-1]["end_turn"] is False:
        parts.append(("<|role|>", True))
    return parts


def test_llama3_on_a_real_file_decodes_to_the_rendering(tmp_path):
    """kto_en_demo.json holds literal `</s>` and `<|user|>` in content (without ../shared,
    the repository's threads, remarkable ones among them, hold them): they stay text. The
    MMS special ids appear exactly where §4 puts them, and the saved tokenizer of the
    Llama-3 family decodes every row to the rendered text."""
    if shared_present():
        source = SHARED / "realdata" / "llamafactory" / "kto_en_demo.json"
    else:
        source = write_threads(tmp_path / "threads" / "threads.jsonl", repo_threads())
    out = tmp_path / "out"
    tokenizer = tokenizer_file("bytelevel-llama3").parent
    result = run(str(source), "--tokenizer", str(tokenizer), "-o", str(out))
    assert result.exit_code == 0, result.output
    read, converted, quarantined, threads_in, written, dropped = counts(result.output)
    assert read == converted + quarantined and threads_in == written + dropped
    saved = Tokenizer.from_file(str(out / "tokenizer" / "tokenizer.json"))
    special = {saved.token_to_id(t): t for t in MMS_SPECIAL_TOKENS}
    table = shard_table(out)
    assert table.num_rows == written > 100
    literal = 0
    for row in table.to_pylist():
        parts = expected_parts(row["messages"])
        text = "".join(part for part, _ in parts)
        assert saved.decode(row["input_ids"], skip_special_tokens=False) == text
        assert [special[i] for i in row["input_ids"] if i in special] == [
            part for part, is_special in parts if is_special
        ]
        literal += "</s>" in text or "<|user|>" in text
    assert literal >= 2
