"""The dataset card (README.md) and manifest.json of a run's output: `datasets.load_dataset`
reads real MMS shards with exactly the features the card declares, and the manifest is
byte-identical on a rerun and names each shard by its true sha256."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

import pipeline
from pipeline.cli import main
from pipeline.formats import ConvertOptions
from pipeline.jobs.lint import lint
from pipeline.output.card import (
    CardStats,
    dataset_card,
    license_fields,
    lint_summary,
    size_category,
    source_datasets,
)
from pipeline.output.card_features import hf_features
from pipeline.output.card_training import training_facts
from pipeline.output.files import file_sha256
from pipeline.output.manifest import build_manifest, input_record, write_manifest
from pipeline.output.shards import Shard, ShardWriter
from pipeline.tokenize import RENDERER_NAME, Renderer, load_tokenizer, tokenize_threads
from pipeline.tokenize.hf_files import pad_token, vocabulary
from pipeline.tokenize.tables import TOKENIZED_SCHEMA
from pipeline.wording import plural
from tests.conftest import REPO
from tests.tokenizer_fixtures import tokenizer_file

SAMPLES = REPO / "data_samples" / "openai"


def sample_threads(multimodal: str = "drop") -> list[pipeline.Thread]:
    """The openai samples as threads; their media dropped unless kept (`multimodal`)."""
    options = ConvertOptions(multimodal=multimodal)
    threads = list(pipeline.read(str(SAMPLES), pipeline.ReadSpec(options=options)))
    assert len(threads) >= 4
    return threads


def write_splits(
    out: Path, schema: pa.Schema, tables: dict[str, pa.Table], shard_rows: int = 2
) -> dict[str, list[Shard]]:
    """Each table as the shards of its split under out/data."""
    written = {}
    for split, table in tables.items():
        with ShardWriter(out / "data", schema, split=split, shard_rows=shard_rows) as writer:
            writer.write(table)
        written[split] = writer.shards
    return written


def card_for(out: Path, schema: pa.Schema, shards: dict[str, list[Shard]], **stats: Any) -> str:
    report = lint(str(SAMPLES))
    profile = report.profile
    card_stats = CardStats(
        threads=sum(s.rows for split in shards.values() for s in split),
        rows={split: sum(s.rows for s in split_shards) for split, split_shards in shards.items()},
        bytes={split: sum(s.bytes for s in split_shards) for split, split_shards in shards.items()},
        renderer=None,
        tokens=None,
        trained_tokens=None,
        training=None,
        packing=None,
        formats=dict(profile.formats),
        capabilities=profile.capabilities(),
        lint=lint_summary(report),
    )
    card_stats.update(stats)  # type: ignore[typeddict-item]
    return dataset_card(
        name="OpenAI samples in MMS",
        description="The openai samples of mms-pipeline, as MMS threads.",
        license=license_fields(["apache-2.0"]),
        tags=["mms", "conversational"],
        splits={
            split: [f"data/{s.name}" for s in split_shards]
            for split, split_shards in shards.items()
        },
        features=schema,
        stats=card_stats,
        how_to_load=str(out),
    )


def front_matter(card: str) -> dict[str, Any]:
    assert card.startswith("---\n")
    front, _, _ = card[4:].partition("\n---\n")
    return yaml.safe_load(front)


@pytest.mark.parametrize("multimodal", ["drop", "keep"])
def test_load_dataset_reads_thread_shards_with_the_declared_features(
    tmp_path, offline_hf, multimodal
):
    import datasets

    threads = sample_threads(multimodal)
    media = multimodal == "keep"
    assert any(t.has_media for t in threads) == media
    schema = pipeline.THREAD_MEDIA_ARROW_SCHEMA if media else pipeline.THREAD_ARROW_SCHEMA
    out = tmp_path / "out"
    tables = {
        "train": pipeline.threads_to_arrow(threads[:-1], media=media),
        "test": pipeline.threads_to_arrow(threads[-1:], media=media),
    }
    shards = write_splits(out, schema, tables)
    assert len(shards["train"]) > 1  # the glob in the card must find every shard
    card = card_for(out, schema, shards)
    (out / "README.md").write_text(card, encoding="utf-8")

    front = front_matter(card)
    assert front["configs"] == [
        {
            "config_name": "default",
            "data_files": [
                {"split": "train", "path": "data/train-*.parquet"},
                {"split": "test", "path": "data/test-*.parquet"},
            ],
        }
    ]
    sizes = {split: sum(s.bytes for s in found) for split, found in shards.items()}
    assert front["dataset_info"]["splits"] == [
        {"name": "train", "num_bytes": sizes["train"], "num_examples": len(threads) - 1},
        {"name": "test", "num_bytes": sizes["test"], "num_examples": 1},
    ]
    declared = datasets.Features._from_yaml_list(front["dataset_info"]["features"])
    assert declared == datasets.Features.from_arrow_schema(schema)

    loaded = datasets.load_dataset(str(out))
    assert set(loaded) == {"train", "test"}
    for split, table in tables.items():
        assert loaded[split].features == declared
        assert loaded[split].data.table.cast(schema).equals(table)
    assert pipeline.threads_from_arrow(loaded["train"].data.table) == threads[:-1]


def test_load_dataset_reads_tokenized_shards_with_the_declared_features(tmp_path, offline_hf):
    import datasets

    base = load_tokenizer(tokenizer_file("sentencepiece-phi3").parent)
    renderer = Renderer(base)
    table = pa.concat_tables(tokenize_threads(sample_threads(), renderer))
    stats = pipeline.Account()
    stats.count_written("train", table)
    out = tmp_path / "out"
    shards = write_splits(out, TOKENIZED_SCHEMA, {"train": table}, shard_rows=3)
    record = {"label_policy": "assistant", "pad_token": pad_token(renderer, base)}
    record["vocabulary"] = vocabulary(renderer, base)
    record["special_tokens"] = renderer.special_ids.as_dict()
    card = card_for(
        out,
        TOKENIZED_SCHEMA,
        shards,
        renderer=RENDERER_NAME,
        tokens=stats.tokens,
        trained_tokens=stats.trained_tokens,
        training=training_facts(record, zero_weight_messages=3),
    )
    (out / "README.md").write_text(card, encoding="utf-8")

    features = front_matter(card)["dataset_info"]["features"]
    assert {"name": "input_ids", "sequence": "int32"} in features
    assert f"| tokens | {stats.tokens:,} |" in card
    assert f"| trained tokens | {stats.trained_tokens:,} |" in card
    assert "`mms-v0` renderer" in card
    growth = record["vocabulary"]
    assert f"({growth['base_size']:,} → {growth['size']:,})" in card
    assert "model.resize_token_embeddings(len(tokenizer))" in card
    assert f"needs a `vocab_size` of at least {growth['size']:,}, `len(tokenizer)`" in card
    end_turn, role = renderer.stop_ids
    assert f"`<|end_turn|>` (id {end_turn})" in card and f"`<|role|>` (id {role})" in card
    assert "GenerationConfig.from_pretrained" in card and "`stop_reason`" in card
    assert f"Its pad token is `{record['pad_token']}`" in card
    assert "3 assistant messages their source weighted 0 are rendered, not trained" in card

    loaded = datasets.load_dataset(str(out), split="train")
    assert loaded.features == datasets.Features._from_yaml_list(features)
    assert loaded.features == datasets.Features.from_arrow_schema(TOKENIZED_SCHEMA)
    assert loaded["input_ids"] == table["input_ids"].to_pylist()
    assert loaded["labels"] == table["labels"].to_pylist()


def test_card_body_has_the_stats_lint_summary_and_how_to_load(tmp_path):
    threads = sample_threads()
    out = tmp_path / "out"
    shards = write_splits(
        out, pipeline.THREAD_ARROW_SCHEMA, {"train": pipeline.threads_to_arrow(threads)}
    )
    card = card_for(out, pipeline.THREAD_ARROW_SCHEMA, shards)
    report = lint(str(SAMPLES))

    assert front_matter(card)["license"] == "apache-2.0"
    assert front_matter(card)["tags"] == ["mms", "conversational"]
    assert "\n# OpenAI samples in MMS\n" in card
    assert f"| threads | {len(threads):,} |" in card
    files = plural(len(shards["train"]), "file")
    assert f"| split `train` | {len(threads):,} rows in {files} |" in card
    assert report.by_code  # the samples have findings, so the table has rows
    for code, count in report.by_code.items():
        assert f"| `{code}` | {report.severity_of(code)} | {count:,} |" in card
    for name, count in report.profile.formats.items():
        assert f"| `{name}` | {count:,} |" in card
    assert front_matter(card)["size_categories"] == ["n<1K"]
    assert f'load_dataset("{out}")' in card
    assert 'glob.glob("data/train-*.parquet")' in card
    assert "`renderer`" not in card and "input_ids" not in card  # not tokenized
    assert card_for(out, pipeline.THREAD_ARROW_SCHEMA, shards) == card
    assert card.endswith("```\n")


def test_card_says_when_lint_found_nothing_or_did_not_run(tmp_path):
    out = tmp_path / "out"
    shards = write_splits(
        out, pipeline.THREAD_ARROW_SCHEMA, {"train": pipeline.threads_to_arrow(sample_threads())}
    )
    assert "This job ran no lint stage." in card_for(
        out, pipeline.THREAD_ARROW_SCHEMA, shards, lint=None
    )
    assert "The lint stage found nothing." in card_for(
        out, pipeline.THREAD_ARROW_SCHEMA, shards, lint=[]
    )


@pytest.mark.parametrize(
    ("rows", "category"),
    [(0, "n<1K"), (999, "n<1K"), (1_000, "1K<n<10K"), (250_000, "100K<n<1M"), (10**12, "n>1T")],
)
def test_size_category(rows, category):
    assert size_category(rows) == category


def test_hf_features_maps_lists_of_structs_and_nested_lists():
    schema = pa.schema(
        [
            ("pairs", pa.list_(pa.struct([("a", pa.int64()), ("b", pa.string())]))),
            ("grid", pa.list_(pa.list_(pa.float32()))),
            ("point", pa.struct([("x", pa.float64()), ("tags", pa.list_(pa.string()))])),
        ]
    )
    assert hf_features(schema) == [
        {
            "name": "pairs",
            "list": [{"name": "a", "dtype": "int64"}, {"name": "b", "dtype": "string"}],
        },
        {"name": "grid", "sequence": {"sequence": "float32"}},
        {
            "name": "point",
            "struct": [{"name": "x", "dtype": "float64"}, {"name": "tags", "sequence": "string"}],
        },
    ]
    import datasets

    assert datasets.Features._from_yaml_list(
        hf_features(schema)
    ) == datasets.Features.from_arrow_schema(schema)


def test_card_refuses_what_it_cannot_declare():
    stats = CardStats(
        threads=1,
        rows={"train": 1},
        bytes={"train": 100},
        renderer=None,
        tokens=None,
        trained_tokens=None,
        training=None,
        packing=None,
        formats={},
        capabilities={},
        lint=None,
    )
    arguments = {
        "name": "x",
        "description": "",
        "license": license_fields(["mit"]),
        "tags": [],
        "how_to_load": "x",
        "features": pipeline.THREAD_ARROW_SCHEMA,
        "stats": stats,
        "splits": {"train": ["data/train-00000-of-00001.parquet"]},
    }
    dataset_card(**arguments)
    with pytest.raises(ValueError, match=r"column when\.at: Arrow type timestamp"):
        hf_features(pa.schema([("when", pa.struct([("at", pa.timestamp("s"))]))]))
    with pytest.raises(ValueError, match="differ from the split rows"):
        dataset_card(**{**arguments, "splits": {"test": ["data/test-00000-of-00001.parquet"]}})
    with pytest.raises(ValueError, match="is not a shard of split 'train'"):
        dataset_card(**{**arguments, "splits": {"train": ["data/test-00000-of-00001.parquet"]}})


def manifest_for(out: Path, shards: dict[str, list[Shard]]) -> dict[str, Any]:
    inputs = [input_record(path, "openai") for path in sorted(SAMPLES.glob("*.jsonl"))]
    return build_manifest(
        inputs=inputs,
        config={"inputs": [str(SAMPLES)], "stages": [{"shard": {"rows": 2}}]},
        config_digest="0" * 64,
        counts={
            "records_read": 9,
            "threads_written": 7,
            "quarantined": {"not_json": 1, "empty_thread": 1},
        },
        shards=shards,
        tokenizer=None,
        reports=["reports/lint.json", "reports/lint.md", "reports/lint.html"],
    )


def test_manifest_is_byte_identical_and_names_each_shard_by_its_sha256(tmp_path):
    threads = sample_threads()
    out = tmp_path / "out"
    tables = {
        "train": pipeline.threads_to_arrow(threads[:-1]),
        "test": pipeline.threads_to_arrow(threads[-1:]),
    }
    write_manifest(
        out / "manifest.json",
        manifest_for(out, write_splits(out, pipeline.THREAD_ARROW_SCHEMA, tables)),
    )
    first = (out / "manifest.json").read_bytes()
    write_manifest(
        out / "manifest.json",
        manifest_for(out, write_splits(out, pipeline.THREAD_ARROW_SCHEMA, tables)),
    )
    assert (out / "manifest.json").read_bytes() == first
    assert first.endswith(b"}\n") and b'\n  "format"' in first  # indented 2

    manifest = orjson.loads(first)
    assert list(manifest) == [
        "format",
        "gate",
        "versions",
        "inputs",
        "config",
        "config_sha256",
        "counts",
        "splits",
        "tokenizer",
        "reports",
        "files",
        "card",
    ]
    assert set(manifest["versions"]) == {
        "mms-pipeline",
        "tokenizers",
        "tiktoken",
        "pyarrow",
        "python",
    }
    assert manifest["versions"]["pyarrow"] == pa.__version__
    assert list(manifest["counts"]["quarantined"]) == ["empty_thread", "not_json"]
    for record in manifest["inputs"]:
        data = Path(record["path"]).read_bytes()
        assert record["sha256"] == hashlib.sha256(data).hexdigest()
        assert record["bytes"] == len(data)
    assert manifest["splits"]["train"]["rows"] == len(threads) - 1
    assert len(manifest["splits"]["train"]["shards"]) > 1
    for split in ("train", "test"):
        for shard in manifest["splits"][split]["shards"]:
            path = out / shard["path"]
            assert shard["sha256"] == file_sha256(path)
            assert shard["bytes"] == path.stat().st_size
            assert shard["rows"] == pq.ParquetFile(path).metadata.num_rows


def test_the_license_follows_the_sources() -> None:
    assert license_fields(["apache-2.0", "apache-2.0"]) == {"license": "apache-2.0"}
    assert license_fields([None, None]) == {"license": "unknown"}
    mixed = {"license": "other", "license_name": "mixed"}
    assert license_fields(["apache-2.0", "mit"]) == mixed
    assert license_fields(["apache-2.0", None]) == mixed  # one input says nothing
    assert source_datasets(["hf:org/a", "../data", "hf:./local", "hf:org/a"]) == [
        "org/a",
        "original",
    ]
    assert source_datasets(["hf:org/b"]) == ["org/b"]


def test_a_mix_card_tells_each_sources_license_and_counts(tmp_path) -> None:
    """A run of sources under two licenses: the card says `other` (mixed), names each
    source's license with its records read, quarantined and written, its tokens per split,
    and its front matter is what huggingface_hub reads as DatasetCardData."""
    from huggingface_hub import DatasetCard, DatasetCardData

    out = tmp_path / "mix"
    result = CliRunner().invoke(main, ["run", str(REPO / "configs" / "mix.yaml"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "README.md").read_text(encoding="utf-8")
    front = front_matter(text)
    card = DatasetCard(text)
    assert card.data.license == "other" and card.data.license_name == "mixed"
    assert DatasetCardData(**front).to_dict() == card.data.to_dict()
    assert front["task_categories"] == ["text-generation"] and front["source_datasets"] == [
        "original"
    ]
    assert card.data.language == ["en"]  # both inputs say so (configs/mix.yaml)
    counts = orjson.loads((out / "manifest.json").read_bytes())["counts"]
    for source in counts["inputs"]:
        row = f"| `{source['path']}` | {source['license']} | {source['records_read']:,} | "
        row += f"{source['records_quarantined']:,} | {source['rows_written']:,} | {source['tokens']:,} |"
        assert row in text
    assert sum(s["rows_written"] for s in counts["inputs"]) == sum(
        counts["threads_written"].values()
    )
    assert sum(s["records_read"] for s in counts["inputs"]) == counts["records_read"]
    assert f"| `train` | {counts['tokens']:,} | {counts['trained_tokens']:,} |" in text
