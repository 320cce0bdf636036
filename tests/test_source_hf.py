"""Hugging Face datasets as input (`hf:`): local dataset directories streamed through
`datasets.load_dataset(..., streaming=True)`, offline. Rows become records with exact
lineage, splits and configs are chosen by option, and what cannot be read is a usage error
(the dataset) or a quarantined record (a row), never a crash."""

from __future__ import annotations

import datetime as dt
import re
import shutil
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import pipeline
from pipeline.cli import main
from pipeline.formats import FORMATS
from pipeline.hub_ids import repo_id_problem
from pipeline.quarantine import Rejection
from pipeline.sources import InputError, Record, expand_inputs, iter_file

pytestmark = pytest.mark.usefixtures("offline_hf")  # no test reaches the network


def mms_row(n: int) -> dict[str, Any]:
    return {
        "id": f"t{n}",
        "messages": [
            {"role": "user", "content": f"question {n}"},
            {"role": "assistant", "content": f"answer {n}", "end_turn": True},
        ],
    }


def write_parquet_dataset(root: Path, splits: dict[str, list[list[dict[str, Any]]]]) -> Path:
    """A dataset laid out as on the Hub: data/{split}-0000i-of-0000n.parquet per shard."""
    (root / "data").mkdir(parents=True)
    for split, shards in splits.items():
        for index, rows in enumerate(shards):
            name = f"{split}-{index:05d}-of-{len(shards):05d}.parquet"
            pq.write_table(pa.Table.from_pylist(rows), root / "data" / name)
    return root


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))


@pytest.fixture
def mms_dataset(tmp_path: Path) -> Path:
    """train: 5 MMS rows in two shards; test: 2 rows."""
    rows = [mms_row(n) for n in range(7)]
    return write_parquet_dataset(
        tmp_path / "mms_ds", {"train": [rows[:3], rows[3:5]], "test": [rows[5:]]}
    )


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_rows_become_threads_with_exact_lineage(mms_dataset):
    spec = f"hf:{mms_dataset}"
    stats = pipeline.Account()
    threads = list(pipeline.read(spec, pipeline.ReadSpec(format="mms"), stats=stats))
    assert [t.id for t in threads] == ["t0", "t1", "t2", "t3", "t4"]
    assert [t.messages[0].content for t in threads] == [f"question {n}" for n in range(5)]
    source = f"{spec}[train]"
    assert [t.meta["source"] for t in threads] == [source] * 5
    assert [t.meta["locator"] for t in threads] == [f"{source}#{n}" for n in range(5)]
    assert stats.files == [spec] and stats.formats == {spec: "mms"}
    assert (stats.records_read, stats.records_converted, stats.threads) == (5, 5, 5)
    assert stats.read_balanced


def test_split_option_streams_that_split(mms_dataset):
    threads = list(
        pipeline.read(f"hf:{mms_dataset}", pipeline.ReadSpec(format="mms", split="test"))
    )
    assert [t.id for t in threads] == ["t5", "t6"]
    assert threads[1].meta["locator"] == f"hf:{mms_dataset}[test]#1"


def test_missing_split_is_an_input_error_naming_the_splits(mms_dataset):
    with pytest.raises(InputError) as caught:
        list(pipeline.read(f"hf:{mms_dataset}", pipeline.ReadSpec(split="validation")))
    message = str(caught.value)
    assert f"hf:{mms_dataset}" in message and "'validation'" in message
    assert "Available splits: ['train', 'test']" in message


def test_a_split_slice_is_refused_with_a_hint(mms_dataset):
    with pytest.raises(InputError, match=r"train\[:2\].*cannot be streamed, give a whole split"):
        list(iter_file(f"hf:{mms_dataset}", split="train[:2]"))


def test_cli_converts_a_local_dataset_with_auto_detection(mms_dataset, tmp_path):
    out = tmp_path / "out" / "threads.jsonl"
    result = run("convert", f"hf:{mms_dataset}", "--split", "train", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "Read 5 records" in result.output
    assert "Check: 5 read = 5 converted + 0 quarantined" in result.output
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [line["id"] for line in lines] == ["t0", "t1", "t2", "t3", "t4"]
    assert lines[4]["meta"]["locator"] == f"hf:{mms_dataset}[train]#4"


def test_conversion_is_deterministic(mms_dataset, tmp_path):
    outputs = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.jsonl"
        assert run("convert", f"hf:{mms_dataset}", "-o", str(out)).exit_code == 0
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] and outputs[0]


def test_cli_reports_a_missing_split_as_a_usage_error(mms_dataset, tmp_path):
    out = tmp_path / "threads.jsonl"
    result = run("convert", f"hf:{mms_dataset}", "--split", "validation", "-o", str(out))
    assert result.exit_code == 2
    assert "split 'validation'" in result.output and "Available splits" in result.output
    assert not out.exists()


def test_cli_refuses_split_options_without_an_hf_input(tmp_path):
    data = tmp_path / "a.jsonl"
    write_jsonl(data, [mms_row(0)])
    result = run("convert", str(data), "--split", "test", "-o", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 2
    assert "apply to Hugging Face datasets only" in result.output


def test_convert_help_teaches_hf_inputs():
    help_text = run("convert", "--help").output
    assert "hf:ORG/NAME" in help_text and "--split" in help_text and "--hf-config" in help_text
    assert "mms convert hf:" in help_text


@pytest.mark.skipif("openai" not in FORMATS, reason="the openai format is not registered")
def test_openai_messages_rows_in_jsonl_are_detected_and_converted(tmp_path):
    rows = [
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": f"What is {n} + {n}?"},
                {"role": "assistant", "content": str(2 * n)},
            ]
        }
        for n in range(4)
    ]
    write_jsonl(tmp_path / "chat" / "train.jsonl", rows)
    stats = pipeline.Account()
    threads = list(pipeline.read(f"hf:{tmp_path / 'chat'}", stats=stats))
    assert stats.formats == {f"hf:{tmp_path / 'chat'}": "openai"}
    assert [[m.role for m in t.messages] for t in threads] == [
        ["developer", "user", "assistant"]
    ] * 4
    assert threads[3].messages[2].content == "6" and stats.read_balanced


def test_objects_of_mixed_shapes_come_back_as_written(tmp_path):
    """`datasets` stores list items of differing shapes as JSON text (its Json feature);
    the records hold the parsed objects again, exactly as the file had them."""
    rows = [
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]},
        {
            "messages": [
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "function": {"name": "w", "arguments": "{}"}}],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "sunny", "extra": [1, 2]},
            ]
        },
    ]
    write_jsonl(tmp_path / "mixed" / "train.jsonl", rows)
    items = list(iter_file(f"hf:{tmp_path / 'mixed'}"))
    assert [item.value for item in items] == rows


def test_a_row_without_a_json_form_is_quarantined_and_the_rest_read(tmp_path):
    when = pa.array([0, 253402300800 * 10**6, 86_400 * 10**6], pa.timestamp("us"))
    table = pa.Table.from_pylist([mms_row(n) for n in range(3)]).append_column("when", when)
    (tmp_path / "ts").mkdir()
    pq.write_table(table, tmp_path / "ts" / "train.parquet")
    spec = f"hf:{tmp_path / 'ts'}"
    rejected: list[Rejection] = []
    stats = pipeline.Account()
    threads = list(
        pipeline.read(spec, pipeline.ReadSpec(format="mms"), on_reject=rejected.append, stats=stats)
    )
    assert [t.id for t in threads] == ["t0", "t2"]
    assert threads[1].meta["extra_fields"] == {"when": "1970-01-02T00:00:00"}
    assert [(r.locator, r.code) for r in rejected] == [(f"{spec}[train]#1", "invalid_json")]
    assert "column 'when' (timestamp[us])" in rejected[0].message
    assert "out of range" in rejected[0].message
    assert (stats.records_read, stats.records_converted, stats.quarantined_total) == (3, 2, 1)


def test_a_stream_that_breaks_ends_in_one_unreadable_rejection(tmp_path):
    write_jsonl(tmp_path / "broken" / "a.jsonl", [{"a": 1}])
    write_jsonl(tmp_path / "broken" / "b.jsonl", [{"b": "x"}])
    spec = f"hf:{tmp_path / 'broken'}"
    items = list(iter_file(spec))
    assert len(items) == 1 and isinstance(items[0], Rejection)
    assert items[0].code == "unreadable_file" and items[0].locator == f"{spec}[train]#0"
    assert "the rest of the split is lost" in items[0].message
    stats = pipeline.Account()
    assert list(pipeline.read(spec, pipeline.ReadSpec(format="mms"), stats=stats)) == []
    assert stats.quarantined == {"unreadable_file": 1} and stats.read_balanced


def test_configs_are_chosen_by_option_and_named_in_the_source(tmp_path):
    root = tmp_path / "cfg"
    write_jsonl(root / "a" / "train.jsonl", [mms_row(1)])
    write_jsonl(root / "b" / "train.jsonl", [mms_row(2)])
    (root / "README.md").write_text(
        "---\nconfigs:\n"
        "- config_name: alpha\n  data_files:\n  - split: train\n    path: a/*.jsonl\n"
        "- config_name: beta\n  data_files:\n  - split: train\n    path: b/*.jsonl\n---\n"
    )
    (thread,) = pipeline.read(f"hf:{root}", pipeline.ReadSpec(format="mms", hf_config="beta"))
    assert thread.id == "t2" and thread.meta["locator"] == f"hf:{root}[beta/train]#0"
    with pytest.raises(InputError, match=r"'alpha', 'beta'.*choose a config with --hf-config"):
        list(pipeline.read(f"hf:{root}", pipeline.ReadSpec(format="mms")))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("hf:", "give a dataset after hf:"),
        ("hf:./no/such/dir", "hf:./no/such/dir: no such directory"),
        ("hf:no-such-org/no-such-dataset", "the Hub cannot be reached"),
    ],
)
def test_unusable_datasets_are_input_errors(spec, expected):
    with pytest.raises(InputError, match=expected):
        list(pipeline.read(spec))


def test_a_file_given_as_a_dataset_is_an_input_error(mms_dataset):
    shard = next((mms_dataset / "data").iterdir())
    with pytest.raises(InputError, match="is a file; give it without hf:"):
        list(pipeline.read(f"hf:{shard}"))


def test_dataset_scripts_are_never_run(mms_dataset, tmp_path):
    marker = tmp_path / "ran"
    script = mms_dataset / "mms_ds.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    with pytest.raises(InputError, match="Dataset scripts are no longer supported"):
        list(pipeline.read(f"hf:{mms_dataset}"))
    assert not marker.exists()


def test_hf_inputs_are_never_globbed_and_listed_once(tmp_path):
    found = expand_inputs(["hf:org/name-*", "hf:org/name-*", "hf:./data/**"])
    assert found.files == ["hf:org/name-*", "hf:./data/**"] and found.skipped == []


def without_nulls(value: Any) -> Any:
    """Arrow gives every row of a table the same struct fields, absent ones as null."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


@pytest.mark.parametrize(
    "name",
    [
        "openai_finetune_examples/weather_chat_fine_tuning.jsonl",
        "anthropic_cookbook/json_mode_dataset.jsonl",
        "llamafactory/glaive_toolcall_en_demo.json",
    ],
)
def test_real_files_as_a_dataset_give_the_same_records(data, tmp_path, name):
    real = data / "realdata" / name
    root = tmp_path / "real"
    root.mkdir()
    shutil.copy(real, root / f"train{real.suffix}")
    spec = f"hf:{root}"
    direct = [without_nulls(item.value) for item in iter_file(str(real))]
    items = list(iter_file(spec))
    assert all(isinstance(item, Record) for item in items)
    assert [without_nulls(item.value) for item in items] == direct
    stats = pipeline.Account()
    file_stats = pipeline.Account()
    assert len(list(pipeline.read(spec, stats=stats))) == len(
        list(pipeline.read(str(real), stats=file_stats))
    )
    assert stats.formats[spec] == file_stats.formats[str(real)] != "-"
    assert stats.quarantined == file_stats.quarantined and stats.read_balanced


def test_timestamps_and_dates_become_iso_text(tmp_path):
    table = pa.table(
        {
            "day": pa.array([dt.date(2024, 5, 1)]),
            "at": pa.array([dt.datetime(2024, 5, 1, 12, 30)], pa.timestamp("ms")),
        }
    )
    (tmp_path / "dates").mkdir()
    pq.write_table(table, tmp_path / "dates" / "train.parquet")
    (item,) = iter_file(f"hf:{tmp_path / 'dates'}")
    assert item.value == {"day": "2024-05-01", "at": "2024-05-01T12:30:00"}


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("hf:org/../outside", "`..` is not allowed"),
        ("hf:a/b/c", "a Hub id is ORG/NAME, this has 3 parts"),
        ("hf:-x/y", "`-x` starts or ends with `-` or `.`"),
        ("hf:org/name.", "`name.` starts or ends with `-` or `.`"),
        ("hf:org/na me", "` ` not allowed"),
        ("hf:org/" + "n" * 97, "longer than 96 characters"),
    ],
)
def test_a_hub_id_is_checked_by_the_hubs_rules_before_datasets_sees_it(
    spec, problem, tmp_path, monkeypatch
):
    (tmp_path / "outside").mkdir()  # org/../outside is a folder here: still not read
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("datasets.load_dataset", lambda *a, **k: pytest.fail("datasets called"))
    result = run("convert", spec, "-o", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 2
    (error,) = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert error.startswith(f"Error: {spec}: not a Hub dataset id: ") and problem in error
    assert error.endswith("; name a Hub dataset hf:ORG/NAME, a local directory hf:./DIR")


def test_a_relative_dataset_directory_is_local_and_its_errors_name_no_exception(
    tmp_path, monkeypatch
):
    """`hf:../DIR` names a local directory (as a config records one): missing, it is said
    so; present without data files, `datasets`' reason is given without a class name."""
    here = tmp_path / "a" / "b"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    missing = run("convert", "hf:../../etc", "-o", str(tmp_path / "o.jsonl"))
    assert missing.exit_code == 2
    assert missing.output.splitlines()[-1] == "Error: hf:../../etc: no such directory"
    (tmp_path / "etc").mkdir()
    empty = run("convert", "hf:../../etc", "-o", str(tmp_path / "o.jsonl"))
    assert empty.exit_code == 2
    error = empty.output.splitlines()[-1]
    assert error.startswith("Error: hf:../../etc (split 'train'): ")
    assert "data files" in error and not re.search(r"\w+(Error|Exception)\b", error[7:])
    assert not (tmp_path / "o.jsonl").exists()


def test_hub_ids_the_hub_accepts_pass():
    for repo_id in ("org/name", "squad", "Org-1/na_me.v2", "o/" + "n" * 96, "a.b/c-d_e"):
        assert repo_id_problem(repo_id) is None, repo_id
    assert repo_id_problem("squad", owner=True) == "a Hub id is ORG/NAME, this names no ORG"
    assert repo_id_problem("a--b/c") == "`--` is not allowed"
    assert repo_id_problem("ü/x") is not None and repo_id_problem("/x") is not None
