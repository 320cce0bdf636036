"""`mms pack` and the packer under it: every thread that fits lands in exactly one packed
row with its ids and labels unchanged, positions restart at each thread, rows stay within
`--seq-len`, threads over it follow the overlong policy, and the bytes are the same twice."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.packing.best_fit import OverlongRowError, pack_rows
from tests.conftest import REPO
from tests.output_rows import shard_rows

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"


def _invoke(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def _tokenized(tmp_path: Path, *inputs: Path, name: str = "tokens") -> Path:
    out = tmp_path / name
    result = _invoke("tokenize", *inputs, "--tokenizer", SAMPLE_TOKENIZER, "-o", out)
    assert result.exit_code == 0, result.output
    return out


def _digest(out: Path) -> dict[str, str]:
    return {
        str(path.relative_to(out)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(out.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def real_tokens(data: Path, tmp_path_factory) -> Path:
    """Real threads (LLaMA-Factory, OpenAI fine-tuning, ToolBench; the small copies of
    tests/data/realdata) tokenized with the sample tokenizer: real lengths and labels, a
    small vocabulary."""
    realdata = data / "realdata"
    inputs = [
        realdata / "llamafactory",
        realdata / "openai_finetune_examples",
        realdata / "toolbench",
    ]
    return _tokenized(tmp_path_factory.mktemp("pack"), *inputs)


def test_every_thread_that_fits_is_packed_once_unchanged(real_tokens, tmp_path):
    source = {row["id"]: row for row in shard_rows(real_tokens)}
    seq_len = 2048
    fitting = {i for i, row in source.items() if row["num_tokens"] <= seq_len}
    assert len(fitting) < len(source)  # some are over and dropped
    result = _invoke("pack", real_tokens, "--seq-len", seq_len, "-o", tmp_path / "packed")
    assert result.exit_code == 0, result.output
    packed = shard_rows(tmp_path / "packed")
    seen = []
    for row in packed:
        assert row["num_tokens"] == len(row["input_ids"]) <= seq_len
        start = 0
        for thread_id, length in zip(row["ids"], row["seq_lens"], strict=True):
            original = source[thread_id]
            assert row["input_ids"][start : start + length] == original["input_ids"]
            assert row["labels"][start : start + length] == original["labels"]
            assert row["position_ids"][start : start + length] == list(range(length))
            start += length
        assert start == len(row["input_ids"])
        seen += row["ids"]
    assert sorted(seen) == sorted(fitting)
    dropped = [orjson.loads(line) for line in (tmp_path / "packed/quarantine/dropped.jsonl").open()]
    assert {d["id"] for d in dropped} == set(source) - fitting
    manifest = orjson.loads((tmp_path / "packed" / "manifest.json").read_bytes())
    counts = manifest["counts"]
    assert counts["fill"] >= 0.97 and counts["balanced"] is True
    assert counts["threads_packed"] + counts["threads_dropped"]["overlong"] == len(source)
    assert "fill" in result.output and "✓" in result.output


def test_packing_gives_the_same_bytes_twice(real_tokens, tmp_path):
    for name in ("a", "b"):  # the folder's name is in the card: the same in both
        result = _invoke("pack", real_tokens, "--seq-len", 4096, "-o", tmp_path / name / "p")
        assert result.exit_code == 0, result.output
    assert _digest(tmp_path / "a" / "p") == _digest(tmp_path / "b" / "p")


def test_packing_does_not_depend_on_where_the_source_shard_files_break(tmp_path):
    """Windows run over a split's rows in order, across its shard files: the same threads
    in one shard or in shards of 7 rows (not a multiple of the window) pack alike."""
    inputs = [REPO / "data_samples" / "sharegpt", REPO / "data_samples" / "openai"]
    packed = {}
    for rows_per_shard in ("50000", "7"):
        source = tmp_path / f"tokens-{rows_per_shard}"
        tokenized = _invoke(
            "tokenize",
            *inputs,
            "--tokenizer",
            SAMPLE_TOKENIZER,
            "--shard-rows",
            rows_per_shard,
            "-o",
            source,
        )
        assert tokenized.exit_code == 0, tokenized.output
        out = tmp_path / f"packed-{rows_per_shard}" / "p"
        result = _invoke("pack", source, "--seq-len", 512, "--window", 5, "-o", out)
        assert result.exit_code == 0, result.output
        packed[rows_per_shard] = {
            n: sha for n, sha in _digest(out).items() if n.startswith("data/")
        }
    assert len(list((tmp_path / "tokens-7" / "data").glob("*.parquet"))) > 1
    assert packed["7"] == packed["50000"] and packed["7"]


def test_a_packed_output_verifies_and_loads_with_datasets(real_tokens, tmp_path, offline_hf):
    import datasets

    out = tmp_path / "packed"
    assert _invoke("pack", real_tokens, "--seq-len", 4096, "-o", out).exit_code == 0
    verified = _invoke("verify", out)
    assert verified.exit_code == 0, verified.output
    loaded = datasets.load_dataset(str(out), split="train")
    assert loaded.column_names[:4] == ["input_ids", "labels", "position_ids", "seq_lens"]
    assert "## Packing" in (out / "README.md").read_text(encoding="utf-8")
    shard = next((out / "data").glob("*.parquet"))
    table = pq.read_table(shard)
    rows = table.to_pylist()
    rows[0]["position_ids"] = list(range(len(rows[0]["position_ids"])))  # boundaries lost
    pq.write_table(table.from_pylist(rows, schema=table.schema), shard)
    broken = _invoke("verify", out, "--no-render")
    assert broken.exit_code == 1
    assert "position_ids do not restart" in broken.output or "sha256" in broken.output


def test_overlong_threads_are_truncated_as_the_tokenize_stage_truncates(tmp_path):
    inputs = [REPO / "data_samples" / "openai", REPO / "data_samples" / "hermes"]
    tokens = _tokenized(tmp_path, *inputs)
    seq_len = 60
    result = _invoke(
        "pack", tokens, "--seq-len", seq_len, "--overlong", "truncate", "-o", tmp_path / "p"
    )
    assert result.exit_code == 0, result.output
    reference = tmp_path / "reference"
    made = _invoke(
        "tokenize",
        *inputs,
        "--tokenizer",
        SAMPLE_TOKENIZER,
        "--max-tokens",
        seq_len,
        "--overlong",
        "truncate",
        "-o",
        reference,
    )
    assert made.exit_code == 0, made.output
    expected = {row["id"]: row for row in shard_rows(reference)}
    packed = {}
    for row in shard_rows(tmp_path / "p"):
        start = 0
        for thread_id, length in zip(row["ids"], row["seq_lens"], strict=True):
            packed[thread_id] = (
                row["input_ids"][start : start + length],
                row["labels"][start : start + length],
            )
            start += length
    assert set(packed) == set(expected)
    for thread_id, (ids, labels) in packed.items():
        assert ids == expected[thread_id]["input_ids"]
        assert labels == expected[thread_id]["labels"]


def test_threads_over_seq_len_are_said_to_be_over_seq_len(tmp_path):
    """The drop summary names the limit `mms pack` has (--seq-len), not tokenize's."""
    tokens = _tokenized(tmp_path, REPO / "data_samples" / "openai")
    seq_len = 60
    assert any(row["num_tokens"] > seq_len for row in shard_rows(tokens))
    result = _invoke(
        "pack", tokens, "--seq-len", seq_len, "--overlong", "drop", "-o", tmp_path / "p"
    )
    assert result.exit_code == 0, result.output
    assert "dropped  overlong" in result.output
    assert "longer than --seq-len (overlong policy drop)" in result.output
    assert "max_tokens" not in result.output


def test_the_packed_output_ships_the_source_generation_config(tmp_path):
    """tokenizer/ comes over whole: the packed rows stop on the ids their tokens stop on,
    and the packed manifest lists generation_config.json."""
    tokens = _tokenized(tmp_path, REPO / "data_samples" / "openai")
    packed = tmp_path / "p"
    assert _invoke("pack", tokens, "--seq-len", 4096, "-o", packed).exit_code == 0
    name = "tokenizer/generation_config.json"
    assert (packed / name).read_bytes() == (tokens / name).read_bytes()
    stops = set(orjson.loads((packed / name).read_bytes())["eos_token_id"])
    ends = {
        labels[i]
        for row in shard_rows(packed)
        for labels in [row["labels"]]
        for i in range(len(labels))
        if labels[i] != -100 and (i + 1 == len(labels) or labels[i + 1] == -100)
    }
    assert ends and ends <= stops
    listed = orjson.loads((packed / "manifest.json").read_bytes())["files"]
    assert name in {entry["path"] for entry in listed}


def test_overlong_error_names_the_thread_and_writes_nothing(tmp_path):
    tokens = _tokenized(tmp_path, REPO / "data_samples" / "openai")
    result = _invoke("pack", tokens, "--seq-len", 20, "--overlong", "error", "-o", tmp_path / "p")
    assert result.exit_code == 1
    assert "more than --seq-len 20" in result.output
    assert not (tmp_path / "p" / "data").exists()


def test_pack_refuses_what_it_cannot_pack(tmp_path):
    threads = tmp_path / "threads"
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: t\noutput: {threads}\ninputs: [{{path: {REPO / 'data_samples' / 'mms'}}}]\n"
        "stages: {lint: {fail_on: never}}\n",
        encoding="utf-8",
    )
    assert _invoke("run", config).exit_code == 0
    refused = _invoke("pack", threads, "--seq-len", 100, "-o", tmp_path / "p")
    assert refused.exit_code == 2 and "holds no tokens" in refused.output
    tokens = _tokenized(tmp_path, REPO / "data_samples" / "mms")
    same = _invoke("pack", tokens, "--seq-len", 100, "-o", tokens)
    assert same.exit_code == 2 and "another folder" in same.output
    assert _invoke("pack", tokens, "--seq-len", 4096, "-o", tmp_path / "p1").exit_code == 0
    again = _invoke("pack", tmp_path / "p1", "--seq-len", 4096, "-o", tmp_path / "p2")
    assert again.exit_code == 2 and "packed already" in again.output


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 64), max_size=300),
    seq_len=st.integers(64, 200),
    window=st.integers(1, 50),
    max_open=st.integers(0, 20),
)
def test_the_packer_places_every_row_once_within_the_length(lengths, seq_len, window, max_open):
    sequences = list(pack_rows(lengths, seq_len, window=window, max_open=max_open))
    assert sorted(row for sequence in sequences for row in sequence) == list(range(len(lengths)))
    assert all(sum(lengths[row] for row in sequence) <= seq_len for sequence in sequences)
    assert all(sequence == sorted(sequence) and sequence for sequence in sequences)
    assert sequences == list(pack_rows(lengths, seq_len, window=window, max_open=max_open))


def test_the_packer_refuses_a_row_over_the_length():
    with pytest.raises(OverlongRowError, match="row 1 has 9 tokens, over 8"):
        list(pack_rows([3, 9], 8))


def _run_config(path: Path, out: Path, *, pack: bool) -> Path:
    samples = [REPO / "data_samples" / name for name in ("openai", "hermes", "sharegpt")]
    inputs = ", ".join(f"{{path: {p}}}" for p in samples)
    stages = f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 300, overlong: drop}}\n"
    stages += "  pack: {seq_len: 300}\n" if pack else ""
    path.write_text(
        f"name: packing\noutput: {out}\ninputs: [{inputs}]\nstages:\n"
        f"  lint: {{fail_on: never}}\n{stages}",
        encoding="utf-8",
    )
    return path


def test_a_run_with_a_pack_stage_writes_what_mms_pack_makes_of_its_threads(tmp_path):
    packed_run = tmp_path / "a" / "out"
    config = _run_config(tmp_path / "packed.yaml", packed_run, pack=True)
    result = _invoke("run", config)
    assert result.exit_code == 0, result.output
    assert "Packed " in result.output and "fill" in result.output
    plain_run = tmp_path / "b" / "threads"
    assert (
        _invoke("run", _run_config(tmp_path / "plain.yaml", plain_run, pack=False)).exit_code == 0
    )
    assert _invoke("pack", plain_run, "--seq-len", 300, "-o", tmp_path / "c" / "out").exit_code == 0
    ran = {name: sha for name, sha in _digest(packed_run).items() if name.startswith("data/")}
    packed = {n: sha for n, sha in _digest(tmp_path / "c" / "out").items() if n.startswith("data/")}
    assert ran == packed and ran
    manifest = orjson.loads((packed_run / "manifest.json").read_bytes())
    assert manifest["packing"]["seq_len"] == 300 and manifest["counts"]["balanced"] is True
    assert manifest["packing"]["threads"] == sum(manifest["counts"]["threads_written"].values())
    verified = _invoke("verify", packed_run)
    assert verified.exit_code == 0, verified.output


def test_a_pack_stage_needs_a_tokenize_stage(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: t\noutput: {tmp_path / 'o'}\ninputs: [{{path: {REPO / 'data_samples' / 'mms'}}}]\n"
        "stages: {pack: {seq_len: 100}}\n",
        encoding="utf-8",
    )
    refused = _invoke("run", config)
    assert refused.exit_code == 2 and "pack needs a tokenize stage" in refused.output
