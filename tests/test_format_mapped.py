"""The `mapped` format: records with renamed keys read through a field mapping (a config's
inputs[].mapping, `mms convert --mapping FILE`, a LLaMA-Factory registry through
`--dataset-info`) become the same threads as the shape they rename."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.cli import main
from tests.conftest import DATA, REPO
from tests.test_run import run_cli

SAMPLES = REPO / "data_samples" / "mapped"
REAL = DATA / "realdata" / "llamafactory"  # copies of the files, see their PROVENANCE.txt
RENAMED_ROLES = {
    "human": "customer",
    "gpt": "agent",
    "function_call": "call",
    "observation": "result",
}
OUR_MAPPING = """messages: dialog
role: speaker
content: text
roles: {customer: user, agent: assistant, call: tool_call, result: tool}
system: sys_prompt
tools: functions
id: uid
"""
AXOLOTL_MAPPING = """field_messages: dialog
message_property_mappings: {role: speaker, content: text}
roles:
  user: [customer]
  assistant: [agent]
  tool_call: [call]
  tool: [result]
field_system: sys_prompt
field_tools: functions
id: uid
"""


def sharegpt_samples() -> list[dict[str, Any]]:
    """The ShareGPT tool samples that convert (the malformed ones are the sharegpt
    adapter's own tests)."""
    from pipeline.formats import ConvertOptions, get_format
    from pipeline.quarantine import RecordRejected
    from pipeline.sources import Record

    records = []
    for line in (
        (REPO / "data_samples" / "sharegpt" / "llamafactory_tools.jsonl").read_text().splitlines()
    ):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        turns = record.get("conversations") if isinstance(record, dict) else None
        if not isinstance(turns, list):
            continue
        try:
            get_format("sharegpt").to_threads(Record("s", "s:1", record), ConvertOptions())
        except RecordRejected:
            continue
        records.append(record)
    assert len(records) >= 3
    return records


def renamed(record: dict[str, Any], index: int) -> dict[str, Any]:
    """A ShareGPT record with every key and speaker renamed, and an id under `uid`."""
    turns = [
        {"speaker": RENAMED_ROLES.get(t["from"], t["from"]), "text": t["value"]}
        for t in record["conversations"]
    ]
    out: dict[str, Any] = {"uid": f"r{index}", "dialog": turns}
    if "system" in record:
        out["sys_prompt"] = record["system"]
    if "tools" in record:
        out["functions"] = record["tools"]
    return out


def convert_lines(*args: str) -> tuple[list[dict[str, Any]], str]:
    result = CliRunner().invoke(main, ["convert", *args])
    assert result.exit_code == 0, result.output
    out = Path(args[args.index("-o") + 1])
    return [orjson.loads(line) for line in out.read_bytes().splitlines()], result.output


def as_original(threads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The threads without what tells the two routes apart: the source's name and format."""
    return [{"id": t["id"], "messages": t["messages"], "settings": t["settings"]} for t in threads]


def write_pair(folder: Path, records: list[dict[str, Any]]) -> tuple[Path, Path]:
    """The records as ShareGPT (with `id`) and renamed (with `uid`), side by side."""
    original = [{**record, "id": f"r{i}"} for i, record in enumerate(records)]
    (folder / "original.json").write_text(json.dumps(original))
    (folder / "renamed.json").write_text(json.dumps([renamed(r, i) for i, r in enumerate(records)]))
    return folder / "original.json", folder / "renamed.json"


@pytest.mark.parametrize("mapping", [OUR_MAPPING, AXOLOTL_MAPPING], ids=["ours", "axolotl"])
def test_a_renamed_copy_reads_into_the_same_threads_as_the_original(tmp_path, mapping):
    records = sharegpt_samples()
    original, copy = write_pair(tmp_path, records)
    (tmp_path / "mapping.yaml").write_text(mapping)
    expected, _ = convert_lines(str(original), "-o", str(tmp_path / "a.jsonl"))
    found, output = convert_lines(
        str(copy), "--mapping", str(tmp_path / "mapping.yaml"), "-o", str(tmp_path / "b.jsonl")
    )
    assert "0 quarantined" in output or "Quarantined 0" in output
    assert as_original(found) == as_original(expected) and len(found) == len(records)
    assert {t["meta"]["source_format"] for t in found} == {"mapped"}


def test_a_renamed_copy_of_a_real_sharegpt_file_gives_the_same_threads(tmp_path):
    records = json.loads((REAL / "glaive_toolcall_en_demo.json").read_text())
    original, copy = write_pair(tmp_path, records)
    (tmp_path / "mapping.yaml").write_text(OUR_MAPPING)
    expected, _ = convert_lines(str(original), "-o", str(tmp_path / "a.jsonl"))
    found, _ = convert_lines(
        str(copy), "--mapping", str(tmp_path / "mapping.yaml"), "-o", str(tmp_path / "b.jsonl")
    )
    assert len(found) == len(records) == 4  # the copy's first 4 of 300 records
    assert as_original(found) == as_original(expected)


def test_the_real_llama_factory_registry_converts_with_nothing_quarantined(tmp_path):
    """Every dataset of realdata's dataset_info.json with a local file; the ones it names
    but cannot be read here (a missing file, ModelScope, the Hub unless named) are said."""
    out = tmp_path / "registry.jsonl"
    registry = str(REAL / "dataset_info.json")
    # the demos' media files are not in the repository: not read (DESIGN §3)
    result = CliRunner().invoke(
        main, ["convert", "--dataset-info", registry, "-o", str(out), "--no-check-media"]
    )
    assert result.exit_code == 0, result.output
    assert "Quarantined 0 records" in result.output
    assert "skipped dpo_zh_demo: dpo_zh_demo.json is not in" in result.output
    assert "Hub datasets of" in result.output and "not read: name them" in result.output
    threads = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    sources = {Path(t["meta"]["source"]).name for t in threads}
    assert {"alpaca_en_demo.json", "glaive_toolcall_en_demo.json", "c4_demo.jsonl"} <= sources
    c4 = [t for t in threads if t["meta"]["source"].endswith("c4_demo.jsonl")]
    assert c4 and all(t["meta"]["prompt_only"] for t in c4)
    detected, _ = convert_lines(
        str(REAL / "glaive_toolcall_en_demo.json"), "-o", str(tmp_path / "auto.jsonl")
    )
    by_id = {
        t["id"]: t for t in threads if t["meta"]["source"].endswith("glaive_toolcall_en_demo.json")
    }
    assert [by_id[t["id"]]["messages"] for t in detected] == [t["messages"] for t in detected]


def test_named_datasets_and_clear_errors(tmp_path):
    registry = str(SAMPLES / "dataset_info.json")
    found, _ = convert_lines(
        "--dataset-info", registry, "instructions", "-o", str(tmp_path / "i.jsonl")
    )
    assert {Path(t["meta"]["source"]).name for t in found} == {"instructions.jsonl"}
    prompt_only = [t for t in found if t["meta"].get("prompt_only")]
    assert len(prompt_only) == 1 and prompt_only[0]["messages"][-1]["role"] == "user"
    unknown = CliRunner().invoke(
        main,
        ["convert", "--dataset-info", registry, "instruction", "-o", str(tmp_path / "x.jsonl")],
    )
    assert (
        unknown.exit_code == 2
        and "no dataset named 'instruction'; did you mean instructions?" in unknown.output
    )
    bare = CliRunner().invoke(
        main, ["convert", "--from", "mapped", "x.json", "-o", str(tmp_path / "y.jsonl")]
    )
    assert bare.exit_code == 2 and "needs --mapping FILE or --dataset-info FILE" in bare.output
    (tmp_path / "bad.yaml").write_text("messages: dialog\nrole: speaker\nrolse: {a: user}\n")
    bad = CliRunner().invoke(
        main,
        [
            "convert",
            str(SAMPLES),
            "--mapping",
            str(tmp_path / "bad.yaml"),
            "-o",
            str(tmp_path / "z.jsonl"),
        ],
    )
    assert bad.exit_code == 2
    assert "rolse: unknown key 'rolse'" in bad.output and "did you mean" in bad.output
    assert "(line 3)" in bad.output
    (tmp_path / "meaning.yaml").write_text("roles:\n  bot: robot\n")
    meaning = CliRunner().invoke(
        main,
        [
            "convert",
            str(SAMPLES),
            "--mapping",
            str(tmp_path / "meaning.yaml"),
            "-o",
            str(tmp_path / "w.jsonl"),
        ],
    )
    assert meaning.exit_code == 2 and "roles.bot" in meaning.output and "(line 2)" in meaning.output


def test_weights_and_prompt_only_rows_of_the_alpaca_shape(tmp_path):
    rows = [
        {"q": "Add 2 and 2.", "a": "4", "t": [{"who": "me", "say": "hi"}]},
        {"q": "Write a limerick."},
    ]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "m.yaml").write_text("shape: alpaca\nprompt: q\nresponse: a\n")
    found, _ = convert_lines(
        str(tmp_path / "rows.jsonl"),
        "--mapping",
        str(tmp_path / "m.yaml"),
        "-o",
        str(tmp_path / "o.jsonl"),
    )
    assert [m["role"] for m in found[0]["messages"]] == ["user", "assistant"]
    assert found[0]["meta"]["extra_fields"] == {"t": [{"who": "me", "say": "hi"}]}
    assert found[1]["meta"]["prompt_only"] and len(found[1]["messages"]) == 1
    chat = [
        {
            "messages": [
                {"r": "u", "c": "hi"},
                {"r": "a", "c": "hello", "train": False},
                {"r": "u", "c": "bye"},
                {"r": "a", "c": "see you", "train": True},
            ]
        }
    ]
    (tmp_path / "chat.json").write_text(json.dumps(chat))
    (tmp_path / "w.yaml").write_text(
        "messages: messages\nrole: r\ncontent: c\nroles: {u: user, a: assistant}\nweight: train\n"
    )
    found, _ = convert_lines(
        str(tmp_path / "chat.json"),
        "--mapping",
        str(tmp_path / "w.yaml"),
        "-o",
        str(tmp_path / "c.jsonl"),
    )
    assistants = [m for m in found[0]["messages"] if m["role"] == "assistant"]
    assert [m.get("weight") for m in assistants] == [0.0, None]


def test_a_run_config_reads_an_input_through_its_mapping(tmp_path):
    """The renamed copy through inputs[].mapping gives the shards the original gives."""
    records = sharegpt_samples()
    original, copy = write_pair(tmp_path, records)
    indented = "".join(f"      {line}\n" for line in OUR_MAPPING.splitlines())
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: mapped\ninputs:\n  - path: {copy.name}\n    mapping:\n{indented}"
        "stages:\n  lint: {fail_on: never}\noutput: out\n"
    )
    result = run_cli(str(config))
    assert result.exit_code == 0, result.output
    manifest = orjson.loads((tmp_path / "out" / "manifest.json").read_bytes())
    assert manifest["counts"]["records_quarantined"] == {}
    assert manifest["config"]["inputs"][0]["mapping"]["messages"] == "dialog"
    assert manifest["config"]["inputs"][0]["format"] == "mapped"
    plain = tmp_path / "plain.yaml"
    plain.write_text(
        f"name: mapped\ninputs:\n  - path: {original.name}\n"
        "stages:\n  lint: {fail_on: never}\noutput: plain\n"
    )
    assert run_cli(str(plain)).exit_code == 0
    assert len(list((tmp_path / "out" / "data").glob("*.parquet"))) >= 1
    for split in ("train", "validation", "test"):
        found = sorted((tmp_path / "out" / "data").glob(f"{split}-*.parquet"))
        expected = sorted((tmp_path / "plain" / "data").glob(f"{split}-*.parquet"))
        assert len(found) == len(expected)
        for mine, theirs in zip(found, expected, strict=True):
            a, b = pq.read_table(mine), pq.read_table(theirs)
            assert a["id"].to_pylist() == b["id"].to_pylist()
            assert a["messages"].to_pylist() == b["messages"].to_pylist()
    config.write_text(
        config.read_text().replace("    mapping:\n", "    format: sharegpt\n    mapping:\n")
    )
    refused = run_cli(str(config))
    assert refused.exit_code == 2 and "a mapping is read by the mapped format" in refused.output


NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    keys=st.lists(NAMES, min_size=3, max_size=3, unique=True),
    speakers=st.lists(NAMES.map(lambda s: s.upper()), min_size=2, max_size=2, unique=True),
    turns=st.lists(st.text(min_size=1, max_size=20).filter(str.strip), min_size=1, max_size=6),
)
def test_any_renaming_reads_back_into_the_threads_of_the_original(tmp_path, keys, speakers, turns):
    """Generated key and speaker names: the mapped read equals the ShareGPT read."""
    from pipeline.formats import ConvertOptions, get_format
    from pipeline.formats.field_mapping import FieldMapping
    from pipeline.sources import Record

    messages_key, role_key, content_key = keys
    user, assistant = speakers
    sequence = [("human", "gpt")[i % 2] for i in range(len(turns))]
    original = {
        "conversations": [{"from": s, "value": t} for s, t in zip(sequence, turns, strict=True)]
    }
    names = {"human": user, "gpt": assistant}
    copy = {
        messages_key: [
            {role_key: names[s], content_key: t} for s, t in zip(sequence, turns, strict=True)
        ]
    }
    mapping = FieldMapping(
        messages=messages_key,
        role=role_key,
        content=content_key,
        roles=((user, "user"), (assistant, "assistant")),
    )
    expected = get_format("sharegpt").to_threads(
        Record("f.json", "f.json#0", original), ConvertOptions()
    )
    found = get_format("mapped").to_threads(
        Record("f.json", "f.json#0", copy), ConvertOptions(mapping=mapping)
    )
    assert [t.messages for t in found] == [t.messages for t in expected]
    assert [t.id for t in found] == [t.id for t in expected]


def test_a_named_hub_entry_streams_through_hf_with_its_split(tmp_path):
    """A registry entry with `hf_hub_url` (here a local dataset folder, as `hf:` reads
    one) is read only when named, with the entry's split and its own mapping."""
    from tests.test_source_hf import write_parquet_dataset

    rows = [
        {
            "dialog": [
                {"speaker": "customer", "text": f"q{n}"},
                {"speaker": "agent", "text": f"a{n}"},
            ]
        }
        for n in range(4)
    ]
    dataset = write_parquet_dataset(tmp_path / "chats", {"train": [rows[:1]], "dev": [rows[1:]]})
    registry = tmp_path / "dataset_info.json"
    registry.write_text(
        json.dumps(
            {
                "chats": {
                    "hf_hub_url": str(dataset),
                    "split": "dev",
                    "formatting": "sharegpt",
                    "columns": {"messages": "dialog"},
                    "tags": {
                        "role_tag": "speaker",
                        "content_tag": "text",
                        "user_tag": "customer",
                        "assistant_tag": "agent",
                    },
                }
            }
        )
    )
    unnamed = CliRunner().invoke(
        main, ["convert", "--dataset-info", str(registry), "-o", str(tmp_path / "x.jsonl")]
    )
    assert unnamed.exit_code == 2 and "no dataset to read" in unnamed.output
    found, _ = convert_lines(
        "--dataset-info", str(registry), "chats", "-o", str(tmp_path / "c.jsonl")
    )
    assert [t["messages"][0]["content"] for t in found] == ["q1", "q2", "q3"]
    assert all(t["meta"]["source_format"] == "mapped" for t in found)
