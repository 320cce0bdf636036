"""Dataset registries are not data: ms-swift's `dataset_info.json` (a list of entries with
`ms_dataset_id` / `hf_dataset_id` / `dataset_path`, `subsets`, `columns`, `tags`) and
LLaMA-Factory's (an object of datasets by name, each with `file_name` / `hf_hub_url`,
`formatting`, `columns`). Read as input, every record is recognised and quarantined as
`dataset_registry` with what to do instead: LLaMA-Factory's registry is read by
`mms convert --dataset-info FILE`; an ms-swift entry names the dataset to convert
(`hf:ID`, or its local file) and the `--mapping` its `columns` call for. Never a thread.

Example: a registry entry is quarantined, never a thread.

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> entry = {"ms_dataset_id": "AI-ModelScope/alpaca-gpt4-data-en"}
>>> try:
...     to_threads(Record("dataset_info.json", "dataset_info.json#0", entry), ConvertOptions())
... except RecordRejected as err:
...     print(err.code)
dataset_registry
"""

from __future__ import annotations

from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import canonical_json
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "dataset-registry"
SWIFT_SOURCES = ("ms_dataset_id", "hf_dataset_id", "dataset_path")
SWIFT_KEYS = frozenset(
    {
        *SWIFT_SOURCES,
        "dataset_name",
        "subsets",
        "split",
        "columns",
        "tags",
        "help",
        "huge_dataset",
        "remove_useless_columns",
    }
)
"""The keys of an ms-swift registry entry (swift/dataset DatasetMeta, as JSON)."""
LLAMA_FACTORY_SOURCES = (
    "file_name",
    "hf_hub_url",
    "ms_hub_url",
    "om_hub_url",
    "script_url",
    "cloud_file_name",
)


def swift_registry_entry(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and any(isinstance(value.get(key), str) and value[key] for key in SWIFT_SOURCES)
        and set(value) <= SWIFT_KEYS
    )


def _llama_factory_registry(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(entry, dict) for entry in value.values())
        and all(any(key in entry for key in LLAMA_FACTORY_SOURCES) for entry in value.values())
    )


def sniff(value: object) -> Sniff:
    """Sure for an ms-swift registry entry or a LLaMA-Factory registry object."""
    if swift_registry_entry(value):
        return Sniff(1.0, "an ms-swift dataset registry entry (dataset_info.json), not data")
    if _llama_factory_registry(value):
        return Sniff(1.0, "a LLaMA-Factory dataset registry (dataset_info.json), not data")
    return Sniff(0.0, "not a dataset registry entry")


def _swift_advice(entry: dict[str, Any]) -> str:
    ways = []
    if isinstance(entry.get("dataset_path"), str) and entry["dataset_path"]:
        ways.append(f"convert its file {entry['dataset_path']}")
    if isinstance(entry.get("hf_dataset_id"), str) and entry["hf_dataset_id"]:
        ways.append(f"convert hf:{entry['hf_dataset_id']}")
    if not ways:
        ways.append(
            f"download the ModelScope dataset {entry.get('ms_dataset_id')} and convert its files"
        )
    advice = " or ".join(ways)
    columns = entry.get("columns")
    if isinstance(columns, dict) and columns:
        advice += (
            f"; its columns {canonical_json(columns)[:200]} rename keys: pass them as a --mapping"
        )
    return advice


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """Never a thread: a registry record is quarantined with what to do instead."""
    value = record.value
    if swift_registry_entry(value):
        assert isinstance(value, dict)
        name = next(value[key] for key in SWIFT_SOURCES if isinstance(value.get(key), str))
        raise RecordRejected(
            "dataset_registry",
            f"{record.source} is an ms-swift dataset registry (dataset_info.json); this entry "
            f"describes the dataset {name}, it is not data: {_swift_advice(value)}",
        )
    if _llama_factory_registry(value):
        assert isinstance(value, dict)
        raise RecordRejected(
            "dataset_registry",
            f"{record.source} is a LLaMA-Factory dataset registry (dataset_info.json, "
            f"{len(value)} dataset(s)), not data: convert its datasets with "
            f"`mms convert --dataset-info {record.source} [NAME...]`",
        )
    raise RecordRejected(
        "missing_field",
        "not a dataset registry: no ms-swift entry (ms_dataset_id, hf_dataset_id or "
        "dataset_path) nor a LLaMA-Factory object of datasets (file_name, hf_hub_url ...)",
    )


FORMAT = InputFormat(
    name=NAME,
    summary="dataset registries (ms-swift's and LLaMA-Factory's dataset_info.json): not data; "
    "each record is quarantined as dataset_registry, naming what to convert instead",
    sniff=sniff,
    to_threads=to_threads,
)
