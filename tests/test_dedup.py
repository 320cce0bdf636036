"""Dedup that understands threads: one content key for exact dedup, MMS501 and the split
(tool declarations by what they declare, not their per-thread wording); duplicates and
both sides of a preference pair always in one split; MinHash near-dedup, deterministic
and counted."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from unittest.mock import patch

import numpy as np
import orjson
import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import pipeline
from pipeline.cli import main
from pipeline.dedup import (
    NearDedupSettings,
    NearDuplicateIndex,
    content_key,
    first_seen,
    thread_signature,
)
from pipeline.mms import Message, Thread
from pipeline.stages.contract import repeated_column
from pipeline.stages.dedup import NEAR_SIGNATURE, Dedup, DedupSettings
from pipeline.stages.sample import CONTENT_KEY
from tests.conftest import REPO

TOOLS_SAMPLE = REPO / "data_samples" / "sharegpt" / "llamafactory_tools.jsonl"
PREFERENCE_SAMPLE = REPO / "data_samples" / "openai" / "preference.jsonl"


def _copies(tmp_path: Path, line: bytes, count: int) -> Path:
    """A JSON Lines file holding the same source record `count` times (no ids: each copy
    gets its own thread id, hence its own wording of the tool declaration)."""
    path = tmp_path / "copies.jsonl"
    path.write_bytes((line.rstrip(b"\n") + b"\n") * count)
    return path


def _run(tmp_path: Path, source: Path, *stages: str, splits: str = "{a: 0.5, b: 0.5}") -> Path:
    out = tmp_path / "out"
    config = tmp_path / "run.yaml"
    lines = [
        "name: dedup-test",
        "inputs:",
        f"  - path: {source}",
        f"output: {out}",
        "stages:",
        "  lint: {fail_on: never}",
        f"  shard: {{splits: {splits}}}",
        *(f"  {stage}" for stage in stages),
    ]
    config.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 0, result.output
    return out


def _splits_by_key(out: Path, splits: tuple[str, ...]) -> dict[int, set[str]]:
    where: dict[int, set[str]] = defaultdict(set)
    for split in splits:
        if not list((out / "data").glob(f"{split}-*.parquet")):
            continue
        for thread in pipeline.read([f"hf:{out}"], pipeline.ReadSpec(split=split)):
            where[content_key(thread)].add(split)
    return where


def test_copies_of_one_source_conversation_share_a_key_whatever_their_wording(tmp_path):
    line = TOOLS_SAMPLE.read_bytes().splitlines()[0]
    threads = list(pipeline.read([str(_copies(tmp_path, line, 8))]))
    declarations = {t.messages[t.meta["declaration"]["message"]].content for t in threads}
    assert len({t.id for t in threads}) == 8
    assert len(declarations) > 1, "the copies must be worded differently for this to test"
    assert len({content_key(t) for t in threads}) == 1


def test_handwritten_developer_wording_is_content(tmp_path):
    """Only the converter's own declaration is compared by what it declares: two
    developer messages a person wrote differently are two threads."""
    first = Thread(
        "a", [Message.developer("Answer in `json`."), Message.user("x"), Message.assistant("{}")]
    )
    second = Thread(
        "b",
        [Message.developer("Reply using `json`."), Message.user("x"), Message.assistant("{}")],
    )
    assert content_key(first) != content_key(second)
    assert content_key(first) == content_key(Thread("c", first.messages, meta={"k": 1}))


def test_run_drops_reworded_copies_and_lint_finds_no_duplicate(tmp_path):
    line = TOOLS_SAMPLE.read_bytes().splitlines()[0]
    out = _run(tmp_path, _copies(tmp_path, line, 6), splits="{a: 1.0}")
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["counts"]["threads_dropped"] == {"duplicate": 5}
    lint = CliRunner().invoke(main, ["lint", f"hf:{out}", "--split", "a", "--select", "MMS501"])
    assert lint.exit_code == 0, lint.output


def test_duplicates_kept_by_choice_never_straddle_splits(tmp_path):
    """With dedup off the copies stay, and all of them land in one split (the split hashes
    the content key, not the thread id)."""
    lines = TOOLS_SAMPLE.read_bytes().splitlines()
    source = tmp_path / "many.jsonl"
    source.write_bytes(b"".join((line + b"\n") * 5 for line in lines))
    out = _run(tmp_path, source, "dedup: {enabled: false}")
    where = _splits_by_key(out, ("a", "b"))
    assert sum(len(_ids) for _ids in where.values()) >= 2
    assert all(len(splits) == 1 for splits in where.values()), where


def test_both_sides_of_a_preference_pair_land_in_one_split(tmp_path):
    out = _run(tmp_path, PREFERENCE_SAMPLE, splits="{a: 0.5, b: 0.5}")
    pairs: dict[str, set[str]] = defaultdict(set)
    for split in ("a", "b"):
        if not list((out / "data").glob(f"{split}-*.parquet")):
            continue
        for thread in pipeline.read([f"hf:{out}"], pipeline.ReadSpec(split=split)):
            if "pair_id" in thread.meta:
                pairs[thread.meta["pair_id"]].add(split)
    assert len(pairs) >= 2
    assert all(len(splits) == 1 for splits in pairs.values()), pairs


def _long_thread(thread_id: str, answer: str) -> Thread:
    words = " ".join(f"word{i}" for i in range(120))
    return Thread(thread_id, [Message.user(f"Summarize: {words}"), Message.assistant(answer)])


def test_near_duplicate_index_finds_a_one_word_edit_and_not_a_different_text():
    settings = NearDedupSettings(threshold=0.8)
    index = NearDuplicateIndex(settings)
    base = _long_thread("a", "It lists the words.")
    edited = _long_thread("b", "It lists all the words.")
    other = Thread(
        "c", [Message.user("What is the capital of France?"), Message.assistant("Paris")]
    )
    assert index.check(thread_signature(base, settings)) is None
    assert index.check(thread_signature(edited, settings)) == 0
    assert index.check(thread_signature(other, settings)) is None
    assert thread_signature(base, settings) == thread_signature(base, settings)


def test_near_dedup_in_a_run_is_counted_and_deterministic(tmp_path):
    source = tmp_path / "near.jsonl"
    rows = [_long_thread(f"t{i}", f"It lists the words{'!' * i}.") for i in range(4)]
    rows.append(Thread("z", [Message.user("Hello"), Message.assistant("Hi there.")]))
    source.write_bytes(b"".join(t.to_json_line() for t in rows))
    out = _run(tmp_path, source, "dedup: {near: {threshold: 0.7}}", splits="{a: 1.0}")
    first = (out / "manifest.json").read_bytes()
    assert orjson.loads(first)["counts"]["threads_dropped"] == {"near_duplicate": 3}
    again = _run(tmp_path, source, "dedup: {near: {threshold: 0.7}}", splits="{a: 1.0}")
    assert (again / "data" / "a-00000-of-00001.parquet").read_bytes() == (
        out / "data" / "a-00000-of-00001.parquet"
    ).read_bytes()


def test_near_dedup_config_is_checked(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text(
        f"name: x\ninputs:\n  - path: {PREFERENCE_SAMPLE}\noutput: {tmp_path / 'o'}\n"
        "stages:\n  dedup:\n    near: {threshold: 1.5}\n"
    )
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 2
    assert "threshold" in result.output and "line" in result.output


def test_realdata_mix_leaves_no_duplicate_in_or_across_splits(tmp_path, data):
    """A mix of real tool-call sets: glaive (LLaMA-Factory) + Hermes + OpenAI tool examples, dedup on,
    a 90/10 split: MMS501 finds nothing in the output, no key is in two splits."""
    realdata = data / "realdata"
    out = tmp_path / "out"
    config = tmp_path / "mix.yaml"
    config.write_text(
        "\n".join(
            [
                "name: realdata-mix",
                "inputs:",
                f"  - path: {realdata / 'llamafactory' / 'glaive_toolcall_en_demo.json'}",
                f"  - path: {realdata / 'hermes_function_calling' / 'few_shot.json'}",
                f"  - path: {realdata / 'openai_finetune_examples' / 'weather_chat_fine_tuning.jsonl'}",
                "stages:",
                "  lint: {fail_on: never}",
                "  dedup: {enabled: true}",
                "  shard: {splits: {train: 0.9, validation: 0.1}}",
                f"output: {out}",
            ]
        )
        + "\n"
    )
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 0, result.output
    dropped = orjson.loads((out / "manifest.json").read_bytes())["counts"]["threads_dropped"]
    assert dropped.get("duplicate", 0) >= 9  # the copies: 9 (the full files: > 18)
    lint = CliRunner().invoke(
        main, ["lint", f"hf:{out}", "--split", "train+validation", "--select", "MMS501"]
    )
    assert lint.exit_code == 0 and "no findings" in lint.output, lint.output
    where = _splits_by_key(out, ("train", "validation"))
    assert all(len(splits) == 1 for splits in where.values())


@pytest.mark.parametrize("threshold", [0.5, 0.8, 0.95])
def test_estimated_similarity_tracks_the_true_one(threshold):
    """The index's answer agrees with the true shingle Jaccard away from the threshold."""
    settings = NearDedupSettings(threshold=threshold, shingle=1)
    vocabulary = [f"w{i}" for i in range(200)]
    base = " ".join(vocabulary[:100])
    for shared_words in (20, 60, 98):
        other = " ".join(vocabulary[:shared_words] + vocabulary[100 : 200 - shared_words])
        true = shared_words / (200 - shared_words)
        if abs(true - threshold) < 0.15:
            continue
        index = NearDuplicateIndex(settings)
        index.check(thread_signature(Thread("a", [Message.user(base)]), settings))
        found = index.check(thread_signature(Thread("b", [Message.user(other)]), settings))
        assert (found is not None) == (true >= threshold), (shared_words, true)


def _decisions(rows, kept, settings, partitioned: bool) -> list[str | None]:
    """The dedup stage's decisions on `rows` in batches of 7; with `partitioned`, each batch
    carries the `repeated` column an engine that partitions by key would add (a key of the
    row shared with another row anywhere), computed here from the stage's own keys."""
    stage = Dedup(settings)
    keys = stage.partition_keys(rows)
    owners: dict[bytes, set[int]] = defaultdict(set)
    for row, key in zip(keys["row"].to_pylist(), keys["key"].to_pylist(), strict=True):
        owners[key].add(row)
    repeated = [False] * rows.num_rows
    for rows_of_key in owners.values():
        if len(rows_of_key) > 1:
            for row in rows_of_key:
                repeated[row] = True
    decided: list[str | None] = []
    for start in range(0, rows.num_rows, 7):
        batch = rows.slice(start, 7)
        if partitioned:
            flags = pa.array(repeated[start : start + 7], pa.bool_())
            batch = batch.append_column(repeated_column(stage.name), flags)
        decided += Dedup.decide(stage, batch, kept[start : start + 7])
    return decided


@given(
    st.lists(
        st.tuples(
            st.integers(0, 5), st.lists(st.integers(0, 2), min_size=8, max_size=8), st.booleans()
        ),
        min_size=1,
        max_size=60,
    ),
    st.booleans(),
    st.booleans(),
)
def test_deciding_only_rows_whose_keys_repeat_gives_the_same_decisions(rows, exact, near):
    """The partition pass (either engine): a row none of whose keys (content key, LSH bands)
    another row has is decided without state, and every decision is the same as when the
    stage sees every row."""
    signatures = [np.array(slots, dtype="<u4").tobytes() for _, slots, _ in rows]
    table = pa.table(
        {
            CONTENT_KEY: pa.array([key for key, _, _ in rows], pa.uint64()),
            NEAR_SIGNATURE: pa.array(signatures if near else [None] * len(rows), pa.binary()),
        }
    )
    kept = [keep for _, _, keep in rows]
    settings = DedupSettings(
        enabled=exact, near=NearDedupSettings(threshold=0.5, permutations=8) if near else None
    )
    whole = _decisions(table, kept, settings, partitioned=False)
    assert _decisions(table, kept, settings, partitioned=True) == whole
    with patch.object(first_seen, "SETTLE_KEYS", 2):  # the kept keys settle batch by batch
        assert _decisions(table, kept, settings, partitioned=False) == whole
