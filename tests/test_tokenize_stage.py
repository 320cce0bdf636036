"""Threads to token tables (batches of input_ids/labels, overlong policies, counts) and the
deterministic Parquet shard writer."""

from __future__ import annotations

import hashlib
import itertools
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

import pipeline
from pipeline.accounting import Account
from pipeline.mms import Message, Thread
from pipeline.output.shards import ShardWriter
from pipeline.tokenize import IGNORE, Renderer, load_tokenizer
from pipeline.tokenize.overlong import OverlongThreadError
from pipeline.tokenize.tables import TOKENIZED_SCHEMA, tokenize_threads
from tests.conftest import SHARED
from tests.tokenizer_fixtures import sample_threads, shared_present, tokenizer_file

WORDS = ["[UNK]", "user", "assistant", "context", "markdown", *"abcdefghijk"]
"""A word-level vocabulary: every word is one token, so token counts are read off a thread."""
R, N, F, C, E = range(len(WORDS), len(WORDS) + 5)  # the MMS special ids appended after it
W = {word: number for number, word in enumerate(WORDS)}
X = IGNORE


@pytest.fixture(scope="module")
def renderer() -> Renderer:
    tokenizer = Tokenizer(models.WordLevel(W, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return Renderer(tokenizer)


def thread(id: str, *messages: Message) -> Thread:
    return Thread(id, list(messages), meta={"source": "t.jsonl", "locator": f"t.jsonl:{id}"})


def run(threads: list[Thread], renderer: Renderer, **kwargs):
    """The tables, the account a job keeps of them, and the drops."""
    drops = []
    tables = list(tokenize_threads(threads, renderer, on_drop=drops.append, **kwargs))
    table = pa.concat_tables(tables) if tables else TOKENIZED_SCHEMA.empty_table()
    stats = Account(threads=len(threads))
    stats.dropped.update(drop.code for drop in drops)
    stats.count_written("train", table)
    read_lengths = {thread.id: len(thread.messages) for thread in threads}
    written = zip(table["id"].to_pylist(), table["messages"].to_pylist(), strict=True)
    stats.truncated = sum(len(messages) < read_lengths[id] for id, messages in written)
    return table, stats, drops


# Four messages: 5 + 8 + 6 + 7 = 26 tokens, prefixes end at 5, 13, 19, 26; 9 trained.
FOUR = thread(
    "four",
    Message.user("a b"),
    Message.assistant("c d"),
    Message.user("e f g"),
    Message.assistant("h"),
)
FOUR_IDS = [
    *[R, W["user"], C, W["a"], W["b"]],
    *[R, W["assistant"], F, W["markdown"], C, W["c"], W["d"], E],
    *[R, W["user"], C, W["e"], W["f"], W["g"]],
    *[R, W["assistant"], F, W["markdown"], C, W["h"], E],
]
FOUR_LABELS = [X] * 5 + [X, X, X, W["markdown"], C, W["c"], W["d"], E] + [X] * 6
FOUR_LABELS += [X, X, X, W["markdown"], C, W["h"], E]


def test_rows_hold_the_thread_and_its_exact_tokens(renderer):
    table, stats, drops = run([FOUR], renderer)
    assert table.schema == TOKENIZED_SCHEMA
    row = table.to_pylist()[0]
    assert row["id"] == "four"
    assert row["input_ids"] == FOUR_IDS
    assert row["labels"] == FOUR_LABELS
    assert (row["num_tokens"], row["num_trained"]) == (26, 9)
    assert row["meta"] == '{"source":"t.jsonl","locator":"t.jsonl:four"}'
    assert pipeline.threads_from_arrow(
        table.select(["id", "messages", "meta"]).append_column(
            "settings", pa.nulls(1, pipeline.THREAD_ARROW_SCHEMA.field("settings").type)
        )
    ) == [FOUR]
    assert (stats.threads, stats.kept, stats.tokens, stats.trained_tokens) == (
        1,
        1,
        26,
        9,
    )
    assert stats.longest == 26 and stats.balanced and not drops


def test_drop_counts_the_thread_with_its_reason(renderer):
    table, stats, drops = run([FOUR], renderer, max_tokens=20, overlong="drop")
    assert table.num_rows == 0
    assert stats.dropped == {"overlong": 1} and stats.balanced
    assert [(d.thread.id, d.code, d.reason) for d in drops] == [
        ("four", "overlong", "overlong: 26 tokens > max 20")
    ]


def test_a_thread_that_fits_exactly_is_kept_whole(renderer):
    table, stats, _ = run([FOUR], renderer, max_tokens=26, overlong="drop")
    assert table["input_ids"].to_pylist() == [FOUR_IDS]
    assert stats.dropped_total == 0 and stats.truncated == 0


@pytest.mark.parametrize(("max_tokens", "kept"), [(13, 2), (18, 2), (19, 3), (25, 3)])
def test_truncate_keeps_the_longest_prefix_that_fits(renderer, max_tokens, kept):
    table, stats, drops = run([FOUR], renderer, max_tokens=max_tokens, overlong="truncate")
    row = table.to_pylist()[0]
    length = [5, 13, 19, 26][kept - 1]
    assert [m["role"] for m in row["messages"]] == [m.role for m in FOUR.messages[:kept]]
    assert row["input_ids"] == FOUR_IDS[:length]
    assert row["labels"] == FOUR_LABELS[:length]
    assert (row["num_tokens"], row["num_trained"]) == (length, 5)
    note = row["meta"].split('"notes":["')[1]
    assert note.startswith(f"truncated by mms tokenize to its first {kept} of 4 messages")
    assert "max_tokens" in note and "26 tokens" in note
    assert stats.truncated == 1 and stats.kept == 1 and not drops
    assert "notes" not in FOUR.meta  # the input thread is left as it was


def test_truncate_drops_when_no_prefix_keeps_a_trained_token(renderer):
    table, stats, drops = run([FOUR], renderer, max_tokens=12, overlong="truncate")
    assert table.num_rows == 0
    assert stats.dropped == {"overlong_untrainable": 1}
    assert drops[0].reason == (
        "overlong: 26 tokens > max 12, and no message boundary under max 12 keeps a trained token"
    )


# user (5) | assistant end_turn=false (6) | context (4, its <|role|> is the halt) | assistant (7)
HALTING = thread(
    "halting",
    Message.user("a b"),
    Message.assistant("c", end_turn=False),
    Message.context("d"),
    Message.assistant("e"),
)


def test_full_halting_thread_trains_the_role_that_opens_the_context(renderer):
    row = run([HALTING], renderer)[0].to_pylist()[0]
    assert row["labels"][11:15] == [R, X, X, X]
    assert row["num_tokens"] == 22


def test_truncate_after_a_continuing_assistant_appends_the_trained_halt(renderer):
    table, stats, _ = run([HALTING], renderer, max_tokens=14, overlong="truncate")
    row = table.to_pylist()[0]
    assert row["input_ids"] == [
        *[R, W["user"], C, W["a"], W["b"]],
        *[R, W["assistant"], F, W["markdown"], C, W["c"], R],
    ]
    assert row["labels"] == [X] * 5 + [X, X, X, W["markdown"], C, W["c"], R]
    assert stats.truncated == 1


def test_the_halt_counts_towards_the_prefix_length(renderer):
    # the 2-message prefix is 11 tokens plus the halt: 12 do not fit in 11
    _, stats, drops = run([HALTING], renderer, max_tokens=11, overlong="truncate")
    assert stats.dropped == {"overlong_untrainable": 1}
    assert drops[0].thread.id == "halting"


def test_error_names_the_thread_its_source_tokens_and_maximum(renderer):
    with pytest.raises(OverlongThreadError) as raised:
        run([thread("short", Message.user("a")), FOUR], renderer, max_tokens=20, overlong="error")
    assert str(raised.value) == (
        "thread four (t.jsonl:four) has 26 tokens, more than the maximum of 20"
    )


def test_batches_keep_input_order_and_every_thread_is_counted(renderer):
    hopeless = thread("hopeless", Message.user("a b c d e f g h i j k"), Message.assistant("a"))
    untrained = thread("untrained", Message.user("a"))
    threads = [thread("s1", Message.user("a"), Message.assistant("b")), FOUR, hopeless, untrained]
    whole, stats, drops = run(threads * 3, renderer, max_tokens=13, overlong="truncate")
    batched, batched_stats, _ = run(
        threads * 3, renderer, max_tokens=13, overlong="truncate", batch_size=3
    )
    assert whole.equals(batched)
    assert whole["id"].to_pylist() == ["s1", "four", "untrained"] * 3
    assert whole["num_trained"].to_pylist() == [4, 5, 0] * 3
    assert [d.thread.id for d in drops] == ["hopeless"] * 3
    assert stats == batched_stats
    assert (stats.threads, stats.kept, stats.truncated, stats.untrained) == (
        12,
        9,
        3,
        3,
    )
    assert stats.dropped == {"overlong_untrainable": 3} and stats.balanced


def test_without_max_tokens_nothing_is_dropped(renderer):
    table, stats, _ = run([FOUR, HALTING], renderer, overlong="error")
    assert table["num_tokens"].to_pylist() == [26, 22] and stats.dropped_total == 0


def test_truncation_on_real_threads_is_the_rendered_prefix():
    """The Phi-3 family on real threads (glaive_toolcall_en_demo with ../shared, else the
    repository's data_samples): every truncated row is what the renderer gives for the kept
    prefix, which is the whole thread's first tokens plus the halt it may need."""
    renderer = Renderer(load_tokenizer(tokenizer_file("sentencepiece-phi3").parent))
    if shared_present():
        source = SHARED / "realdata" / "llamafactory" / "glaive_toolcall_en_demo.json"
        threads = list(itertools.islice(pipeline.read(str(source)), 300))
    else:  # the rows are matched to their threads by id: the first thread of each id
        seen: set[str] = set()
        threads = [t for t in sample_threads() if not (t.id in seen or seen.add(t.id))]
    full = {t.id: (t, renderer.encode(t)) for t in threads}
    # data_samples' threads are mostly short: a tighter limit truncates 8-12 of them (their
    # ids, and so the tool declarations' wording, hash the input's absolute path)
    limit = 400 if shared_present() else 300
    table, stats, _ = run(threads, renderer, max_tokens=limit, overlong="truncate")
    assert stats.truncated > (20 if shared_present() else 5)
    assert stats.dropped_total > 0 and stats.balanced
    for row in table.to_pylist():
        assert row["num_tokens"] <= limit
        original, encoded = full[row["id"]]
        if len(row["messages"]) == len(original.messages):
            assert row["input_ids"] == encoded.input_ids
            continue
        kept = Thread(row["id"], original.messages[: len(row["messages"])])
        again = renderer.encode(kept)
        assert (row["input_ids"], row["labels"]) == (again.input_ids, again.labels)
        assert row["num_trained"] == again.num_trained > 0
        shared_length = encoded.message_ends[len(kept.messages) - 1]
        assert again.input_ids[:shared_length] == encoded.input_ids[:shared_length]
        assert all(
            x == y for x, y in zip(row["labels"], row["input_ids"], strict=True) if x != IGNORE
        )


# --------------------------------------------------------------------------- shards

SCHEMA = pa.schema([("id", pa.string()), ("tokens", pa.list_(pa.int32()))])


def rows(count: int, start: int = 0) -> pa.Table:
    ids = [f"t{i}" for i in range(start, start + count)]
    tokens = [list(range(i % 7)) for i in range(start, start + count)]
    return pa.table({"id": ids, "tokens": tokens}, schema=SCHEMA)


def write(directory: Path, batches: list[pa.Table], **kwargs) -> list:
    with ShardWriter(directory, SCHEMA, shard_rows=10, row_group_rows=4, **kwargs) as writer:
        for batch in batches:
            writer.write(batch)
    return writer.shards


def test_shards_are_named_sized_and_hashed(tmp_path):
    shards = write(tmp_path, [rows(25)])
    names = ["train-00000-of-00003.parquet", "train-00001-of-00003.parquet"]
    names.append("train-00002-of-00003.parquet")
    assert [s.name for s in shards] == names
    assert sorted(os.listdir(tmp_path)) == names  # no temp file left
    assert [s.rows for s in shards] == [10, 10, 5]
    for shard in shards:
        data = (tmp_path / shard.name).read_bytes()
        assert shard.sha256 == hashlib.sha256(data).hexdigest() and shard.bytes == len(data)
    groups = pq.ParquetFile(tmp_path / names[0]).metadata
    assert [groups.row_group(i).num_rows for i in range(groups.num_row_groups)] == [4, 4, 2]
    assert groups.row_group(0).column(0).compression == "ZSTD"
    back = pa.concat_tables(pq.read_table(tmp_path / name) for name in names)
    assert back.equals(rows(25))


def test_same_rows_give_the_same_bytes_whatever_the_batches(tmp_path):
    one = write(tmp_path / "one", [rows(25)])
    many = write(tmp_path / "many", [rows(3), rows(0, 3), rows(9, 3), rows(13, 12)])
    assert one == many
    for shard in one:
        assert (tmp_path / "one" / shard.name).read_bytes() == (
            tmp_path / "many" / shard.name
        ).read_bytes()


def test_a_failed_run_leaves_the_earlier_shards_alone(tmp_path):
    earlier = write(tmp_path, [rows(15)])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(RuntimeError), ShardWriter(tmp_path, SCHEMA, shard_rows=10) as writer:
        writer.write(rows(25))
        raise RuntimeError("stage failed")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert len(earlier) == 2


def test_a_writer_replaces_files_of_its_names_and_removes_nothing_else(tmp_path):
    """Shards of the same names are replaced; every other file stays (what an earlier
    output left is the output folder's to remove, pipeline/output/folder.py)."""
    write(tmp_path, [rows(25)])
    write(tmp_path, [rows(5)], split="test")
    shards = write(tmp_path, [rows(12)])
    assert sorted(os.listdir(tmp_path)) == [
        "test-00000-of-00001.parquet",
        "train-00000-of-00002.parquet",
        "train-00000-of-00003.parquet",
        "train-00001-of-00002.parquet",
        "train-00001-of-00003.parquet",
        "train-00002-of-00003.parquet",
    ]
    assert [pq.read_metadata(tmp_path / s.name).num_rows for s in shards] == [10, 2]


def test_no_rows_give_one_empty_shard_with_the_schema(tmp_path):
    shards = write(tmp_path, [])
    assert [(s.name, s.rows) for s in shards] == [("train-00000-of-00001.parquet", 0)]
    assert pq.read_table(tmp_path / shards[0].name).schema == SCHEMA


def test_a_table_of_another_schema_is_refused(tmp_path):
    with pytest.raises(ValueError, match="schema differs"), ShardWriter(tmp_path, SCHEMA) as w:
        w.write(pa.table({"id": ["x"]}))
    assert list(tmp_path.iterdir()) == []


def test_split_names_are_checked(tmp_path):
    with pytest.raises(ValueError, match="letters, digits and underscores"):
        ShardWriter(tmp_path, SCHEMA, split="train+test")
