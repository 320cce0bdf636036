"""Field mappings from files: a mapping file (`mms convert --mapping FILE`, YAML or JSON,
checked against the pipeline config schema's `mapping` with line-precise errors) and a
LLaMA-Factory `dataset_info.json` registry (`mms convert --dataset-info FILE [NAME...]`),
whose entries become inputs each with its own mapping."""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from pipeline.config_file import check_schema, read_yaml_file
from pipeline.formats.dataset_registry import swift_registry_entry
from pipeline.formats.field_mapping import (
    FieldMapping,
    FileMappings,
    MappingError,
    mapping_from_data,
)
from pipeline.schemas import definition_validator, json_path
from pipeline.sources.paths import HF_PREFIX

SCHEMA = "pipeline-config"
MAPPING_KEYS = ("formatting", "ranking", "columns", "tags")
"""The keys of a dataset_info entry that describe its records (the rest say where it is)."""
UNREAD_SOURCES = {
    "ms_hub_url": "a ModelScope dataset",
    "om_hub_url": "a Modelers dataset",
    "script_url": "a dataset loading script (never run)",
    "cloud_file_name": "a cloud storage file",
}
DEFAULT_SPLIT = "train"
HUB_ONLY = "a Hub dataset: name it to read it through hf:"
"""Why a registry read without names leaves a Hub dataset out."""
LLAMA_FACTORY_DEFAULT = "alpaca"
"""The formatting of an entry that names none."""


def load_mapping_file(path: str | os.PathLike[str]) -> FieldMapping:
    """The mapping a YAML or JSON file holds. Raises ConfigFileError (file, key, line)."""
    data, doc = read_yaml_file(path, "the mapping file", "messages, role, content, roles, ...")
    check_schema(doc, data, definition_validator(SCHEMA, "mapping"))
    try:
        return mapping_from_data(data)
    except MappingError as err:
        raise doc.error(["roles"], str(err)) from None


class RegistryError(ValueError):
    """A dataset_info.json that cannot be read, or a name it does not hold."""


@dataclass(frozen=True, slots=True)
class RegistryDataset:
    """One dataset of the registry to read: its name, the input (a local path or
    `hf:ORG/NAME`), its mapping, and for a Hub dataset its split and subset."""

    name: str
    path: str
    mapping: FieldMapping
    split: str = DEFAULT_SPLIT
    hf_config: str | None = None


@dataclass
class Registry:
    """What a dataset_info.json gives to read, and what it names but cannot be read
    here, with why."""

    datasets: list[RegistryDataset] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def inputs(self) -> tuple[str, ...]:
        """The datasets' inputs, in the registry's order."""
        return tuple(dataset.path for dataset in self.datasets)

    def mappings(self) -> FileMappings:
        """Each dataset's mapping, by its input."""
        return FileMappings(tuple((d.path, d.mapping) for d in self.datasets))

    def hub_split(self) -> tuple[str, str | None] | None:
        """The split and subset the Hub datasets to read ask for (one for all of them:
        a job streams one), None when none is read. Raises RegistryError."""
        wanted = {(d.split, d.hf_config) for d in self.datasets if d.path.startswith(HF_PREFIX)}
        if len(wanted) > 1:
            raise RegistryError(
                "the named Hub datasets ask for different splits or subsets: convert them apart"
            )
        return next(iter(wanted)) if wanted else None


def read_dataset_info(path: str | os.PathLike[str], names: Sequence[str] = ()) -> Registry:
    """The datasets of the registry at `path`: those `names` names, else every one with
    a local file (a Hub dataset is read only when named: it streams through `hf:`)."""
    file = Path(path)
    try:
        entries = orjson.loads(file.read_bytes())
    except (OSError, orjson.JSONDecodeError) as err:
        raise RegistryError(f"{file}: cannot read the dataset registry ({err})") from None
    if isinstance(entries, list) and any(map(swift_registry_entry, entries)):
        raise RegistryError(
            f"{file}: this is an ms-swift dataset registry (a list of entries), which "
            "--dataset-info does not read (it reads LLaMA-Factory's); convert the datasets "
            "it names instead: hf:HF_DATASET_ID, or the file at dataset_path (its columns "
            "as a --mapping); `mms convert` on the registry lists each entry"
        )
    if not isinstance(entries, dict):
        raise RegistryError(f"{file}: a dataset_info.json is an object of datasets by name")
    for name in names:
        if name not in entries:
            near = difflib.get_close_matches(name, list(entries), n=3)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise RegistryError(f"{file}: no dataset named {name!r}{hint}")
    registry = Registry()
    for name in names or list(entries):
        entry = entries[name]
        found = _dataset(file, name, entry, named=bool(names))
        if isinstance(found, RegistryDataset):
            registry.datasets.append(found)
        else:
            registry.skipped.append((name, found))
    return registry


def _dataset(file: Path, name: str, entry: Any, *, named: bool) -> RegistryDataset | str:
    """The dataset an entry describes, or why it is not read."""
    if not isinstance(entry, dict):
        return "the entry is not an object"
    described = {key: entry[key] for key in MAPPING_KEYS if key in entry}
    described.setdefault("formatting", LLAMA_FACTORY_DEFAULT)
    errors = list(definition_validator(SCHEMA, "mapping").iter_errors(described))
    if errors:
        error = errors[0]
        return f"{json_path(error.absolute_path) or 'entry'}: {error.message}"
    try:
        mapping = mapping_from_data(described)
    except MappingError as err:
        return str(err)
    if entry.get("file_name"):
        local = file.parent / str(entry["file_name"])
        if not local.exists():
            return f"{entry['file_name']} is not in {file.parent}"
        return RegistryDataset(name, str(local), mapping)
    if entry.get("hf_hub_url"):
        if not named:
            return HUB_ONLY
        return RegistryDataset(
            name,
            HF_PREFIX + str(entry["hf_hub_url"]),
            mapping,
            str(entry.get("split") or DEFAULT_SPLIT),
            entry.get("subset"),
        )
    kinds = [what for key, what in UNREAD_SOURCES.items() if entry.get(key)]
    return f"{kinds[0]}: not read by mms" if kinds else "names no file_name nor hf_hub_url"
