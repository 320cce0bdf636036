"""Groups stay whole (pipeline/mms/groups.py): every stage that leaves threads out (sampling,
the gate's drop_on, filters, exact and near dedup, overlong, too few trained tokens) keeps
or drops a preference pair, or any group, whole; near dedup compares a pair with other
pairs, never its two sides with each other; and every thread left out is listed in
quarantine/dropped.jsonl with its stage and reason."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pyarrow.parquet as pq
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cli import main
from tests.conftest import REPO

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
WORDS = ["the", "cat", "sat", "on", "a", "mat", "while", "it", "rained", "all", "day", "long"]


def mms(*args: object):
    return CliRunner().invoke(main, [str(arg) for arg in args])


def hh_record(prompt: str, chosen: str, rejected: str) -> dict:
    return {
        "chosen": f"\n\nHuman: {prompt}\n\nAssistant: {chosen}",
        "rejected": f"\n\nHuman: {prompt}\n\nAssistant: {rejected}",
    }


def written(out: Path) -> list[dict]:
    """Every row the output's shards hold: id and meta."""
    rows = []
    for path in sorted((out / "data").glob("*.parquet")):
        table = pq.read_table(path, columns=["id", "meta"])
        for thread_id, meta in zip(table["id"].to_pylist(), table["meta"].to_pylist(), strict=True):
            rows.append({"id": thread_id, "meta": orjson.loads(meta)})
    return rows


def assert_no_orphan(rows: list[dict]) -> None:
    sides = Counter(row["meta"]["pair_id"] for row in rows if "pair_id" in row["meta"])
    assert all(count == 2 for count in sides.values()), sides


def _line(locator: str) -> int:
    """The line a `file:line` locator names (the train shards are written shuffled)."""
    return int(locator.rsplit(":", 1)[1])


def listed_drops(out: Path) -> list[dict]:
    path = out / "quarantine" / "dropped.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def run_config(
    folder: Path, source: Path, *stages: str, sample: float = 1.0, fmt: str = "auto"
) -> Path:
    path = folder / "run.yaml"
    lines = ["name: groups", "inputs:", f"  - path: {source}", f"    sample: {sample}"]
    lines += [f"    format: {fmt}"]
    lines += [f"output: {folder / 'out'}", "stages:", *(f"  {stage}" for stage in stages)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_near_dedup_keeps_hh_rlhf_pairs_whole(tmp_path):
    """Both sides of an HH-RLHF pair share their prompt, so each is near the other: near
    dedup must not drop a side for its own partner. A pair repeated word for word, or
    nearly, is dropped whole, and the list names the pair it repeats."""
    long_prompt = " ".join(WORDS * 8)
    records = [
        hh_record(f"{long_prompt} {n}", f"Answer {n} is yes.", f"Answer {n} is no.")
        for n in range(20)
    ]
    records.append(records[3])  # an exact copy of a pair
    near = dict(records[5])
    near["rejected"] = near["rejected"].replace("is no.", "is no!")
    records.append(near)
    source = tmp_path / "hh.jsonl"
    source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    config = run_config(tmp_path, source, "lint: {fail_on: never}", "dedup: {near: true}")
    result = mms("run", config)
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    rows = written(out)
    assert_no_orphan(rows), source.read_text()
    assert len(rows) == 40  # the 20 distinct pairs, both sides each
    drops = listed_drops(out)
    assert sorted(d["code"] for d in drops) == ["duplicate"] * 2 + ["near_duplicate"] * 2
    in_input_order = sorted(rows, key=lambda row: _line(row["meta"]["locator"]))
    assert {d["duplicate_of"] for d in drops} == {in_input_order[6]["id"], in_input_order[10]["id"]}
    assert "preference pairs: 20 kept and 2 left out, each whole" in result.output
    counts = orjson.loads((out / "manifest.json").read_bytes())["counts"]
    assert counts["groups_kept"] == {"pair": 20} and counts["groups_dropped"] == {"pair": 2}


def _thread(thread_id: str, words: list[str], answer_format: str = "markdown") -> dict:
    return {
        "id": thread_id,
        "messages": [
            {"role": "user", "content": " ".join(words)},
            {
                "role": "assistant",
                "format": answer_format,
                "content": " ".join(reversed(words)),
                "end_turn": True,
            },
        ],
    }


side = st.builds(
    lambda words, unenabled, long: (words * (20 if long else 1), unenabled),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
    st.booleans(),
    st.booleans(),
)
record = st.one_of(
    st.tuples(st.just("single"), side),
    st.tuples(st.just("pair"), st.tuples(side, side)),
    st.tuples(st.just("copy"), st.integers(min_value=0, max_value=30)),
)


@settings(max_examples=15, deadline=None)
@given(records=st.lists(record, min_size=1, max_size=30), sample=st.sampled_from([1.0, 0.6]))
def test_no_stage_leaves_a_pair_with_one_side(tmp_path_factory, records, sample):
    """Generated singles, pairs and copies of earlier records (exact duplicates), with
    answers in a format nothing enables (the gate drops them), overlong and one-word
    threads, through every stage that drops: no written pair misses a side, and every
    thread left out is listed once."""
    folder = tmp_path_factory.mktemp("groups")
    made: list[list[bytes]] = []  # each record's lines (a pair: its two sides, in order)
    for index, (kind, value) in enumerate(records):
        if kind == "copy":
            if made:
                made.append(made[value % len(made)])
            continue
        sides = [value] if kind == "single" else list(value)
        threads = []
        for number, (words, unenabled) in enumerate(sides):
            thread = _thread(f"r{index}-{number}", words, "json" if unenabled else "markdown")
            if kind == "pair":
                thread["meta"] = {
                    "pair_id": f"r{index}",
                    "preference": ["chosen", "rejected"][number],
                }
            threads.append(thread)
        made.append([orjson.dumps(thread) for thread in threads])
    lines = [line for record_lines in made for line in record_lines]
    source = folder / "threads.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    config = run_config(
        folder,
        source,
        "lint: {fail_on: never, drop_on: [MMS201]}",
        "filters: {max_messages: 2, min_trained_tokens: 2}",
        "dedup: {near: true}",
        f"tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 60, overlong: drop}}",
        sample=sample,
        fmt="mms",
    )
    result = mms("run", config)
    assert result.exit_code == 0, result.output
    out = folder / "out"
    rows = written(out) if (out / "data").exists() else []
    assert_no_orphan(rows)
    counts = orjson.loads((out / "manifest.json").read_bytes())["counts"]
    drops = listed_drops(out)
    assert len(drops) == sum(counts["threads_dropped"].values())
    assert len(rows) + len(drops) == counts["threads"]
    assert Counter(d["code"] for d in drops) == Counter(counts["threads_dropped"])
    pairs = sum(counts["groups_kept"].values()) + sum(counts["groups_dropped"].values())
    assert pairs == sum(len(record_lines) == 2 for record_lines in made)


def test_tokenize_drops_an_overlong_side_with_its_pair(tmp_path):
    long, short = ["word"] * 200, ["short"]
    threads = [_thread("p:chosen", short), _thread("p:rejected", long), _thread("alone", short)]
    for thread, preference in zip(threads[:2], ("chosen", "rejected"), strict=True):
        thread["meta"] = {"pair_id": "p", "preference": preference}
    source = tmp_path / "threads.jsonl"
    source.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in threads))
    out = tmp_path / "out"
    args = ["--from", "mms", "--tokenizer", SAMPLE_TOKENIZER, "--max-tokens", "50", "-o", out]
    result = mms("tokenize", source, *args)
    assert result.exit_code == 0, result.output
    assert [row["id"] for row in written(out)] == ["alone"]
    assert {(d["id"], d["code"]) for d in listed_drops(out)} == {
        ("p:rejected", "overlong"),
        ("p:chosen", "group:overlong"),
    }
    assert "left out with the rest of its pair or group" in result.output
