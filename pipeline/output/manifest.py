"""`manifest.json` of a pipeline run (DESIGN §7): the inputs with their sha256, the resolved
config and its digest, the versions that produced the output, the counts, every shard's
sha256 and rows, and the tokenizer. It holds no timestamp, so a rerun in the same
environment writes the same bytes; the exact versions are recorded on purpose, which makes
the bytes differ between environments whose versions differ."""

from __future__ import annotations

import hashlib
import os
import platform
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import orjson

from pipeline import storage
from pipeline.output.files import atomic_output, file_sha256
from pipeline.output.shards import Shard
from pipeline.own_outputs import MANIFEST_FILE as MANIFEST_FILE
from pipeline.own_outputs import MANIFEST_FORMAT as MANIFEST_FORMAT
from pipeline.sources import is_hf_input
from pipeline.sources.stdin import STDIN
from pipeline.version import __version__

DATA_DIR = "data"
"""Where the shards live, relative to the output directory."""
CARD_FILE = "README.md"
"""The dataset card's name in an output folder."""
_VERSIONED = ("tokenizers", "tiktoken", "pyarrow")


@dataclass(frozen=True, slots=True)
class InputRecord:
    """One input as the run read it: path (as the config names it), format, and the
    file's size and sha256 (None for an `hf:` dataset, which `datasets` streams, and for
    standard input: there is no one file to hash)."""

    path: str
    sha256: str | None
    bytes: int | None
    format: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "bytes": self.bytes,
            "sha256": self.sha256,
        }


def input_record(
    path: str | os.PathLike[str], format: str, *, recorded_as: str | None = None
) -> InputRecord:
    """The InputRecord of a file (or `hf:` dataset) read as `format`, its path given as
    `recorded_as` if set."""
    shown = recorded_as if recorded_as is not None else str(path)
    if is_hf_input(str(path)) or str(path) == STDIN:
        return InputRecord(shown, None, None, format)
    if storage.is_url(str(path)):
        return InputRecord(shown, storage.sha256(str(path)), storage.size(str(path)), format)
    return InputRecord(shown, file_sha256(path), Path(path).stat().st_size, format)


def versions() -> dict[str, str]:
    """The exact versions of mms-pipeline, its byte-shaping dependencies and Python."""
    found = {"mms-pipeline": __version__}
    for name in _VERSIONED:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    found["python"] = platform.python_version()
    return found


def build_manifest(
    *,
    inputs: Sequence[InputRecord],
    config: Mapping[str, Any],
    config_digest: str,
    counts: Mapping[str, Any],
    shards: Mapping[str, Sequence[Shard]],
    tokenizer: Mapping[str, Any] | None,
    reports: Sequence[str],
    gate: Mapping[str, Any] | None = None,
    files: Sequence[Mapping[str, Any]] = (),
    card: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest as a dict, keys in reading order.

    `shards` maps each split to its shards (pipeline.output.shards); splits are listed in the
    order given. In `counts`, the top-level keys keep their order (the counting invariant
    reads top to bottom) and nested mappings (counts per reason) are sorted by key, so they
    do not depend on the order work finished in. `reports` are paths relative to the output.
    `gate` says whether the lint gate passed (a failed gate publishes no shards). `files`
    lists every other file the output publishes but the card and the manifest (the
    tokenizer's files, the reports, the quarantine), each with its bytes and sha256;
    `card` the card as written in the folder (`card_entry`: `mms push` rewrites its
    loading name for the repository, so readers check a card by its front matter, and this
    hash only says whether the folder's card is still the one mms wrote)."""
    return {
        "format": MANIFEST_FORMAT,
        "gate": dict(gate) if gate is not None else None,
        "versions": versions(),
        "inputs": [record.to_dict() for record in inputs],
        "config": dict(config),
        "config_sha256": config_digest,
        "counts": {key: _sorted_mappings(value) for key, value in counts.items()},
        "splits": {
            split: {
                "rows": sum(shard.rows for shard in split_shards),
                "shards": [_shard_entry(shard) for shard in split_shards],
            }
            for split, split_shards in shards.items()
        },
        "tokenizer": dict(tokenizer) if tokenizer is not None else None,
        "reports": list(reports),
        "files": [dict(entry) for entry in files],
        "card": dict(card) if card is not None else None,
    }


def file_entries(
    out: Path,
    paths: Sequence[str],
    known: Mapping[str, tuple[int, str]] | None = None,
    hash_files: Callable[[Sequence[Path]], Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """The manifest's `files` entries of `paths` (relative to `out`), sorted by path;
    `known` gives the (bytes, sha256) of files already hashed where they were written;
    `hash_files` hashes the others, all in one call (default: here, one after the other;
    `mms run` hashes them on its engine's workers)."""
    known = known or {}
    unknown = [path for path in sorted(paths) if path not in known]
    if hash_files is None:
        digests = [file_sha256(out / path) for path in unknown]
    else:
        digests = list(hash_files([out / path for path in unknown]))
    hashed = {
        path: ((out / path).stat().st_size, digest)
        for path, digest in zip(unknown, digests, strict=True)
    }
    return [
        {"path": path, "bytes": size, "sha256": digest}
        for path in sorted(paths)
        for size, digest in [known.get(path) or hashed[path]]
    ]


def published_files(folder: Path) -> list[str]:
    """The files of an output `folder` its manifest lists under `files`: all but the shards
    in data/, the card and the manifest, as POSIX paths relative to it, sorted."""
    return sorted(
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.is_file()
        and path.relative_to(folder).parts[0] != DATA_DIR
        and path.relative_to(folder).as_posix() not in (CARD_FILE, MANIFEST_FILE)
    )


def card_entry(folder: Path) -> dict[str, Any] | None:
    """The manifest's `card` entry of the folder's README.md (None when it has none)."""
    card = folder / CARD_FILE
    if not card.is_file():
        return None
    return {"path": CARD_FILE, "bytes": card.stat().st_size, "sha256": file_sha256(card)}


def json_sha256(value: Any) -> str:
    """sha256 of a value's canonical JSON (sorted keys): the digest of a job's settings."""
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def write_manifest(path: str | os.PathLike[str], manifest: Mapping[str, Any]) -> None:
    """Write `manifest` as JSON (indent 2, trailing newline) atomically to `path`."""
    text = orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    with atomic_output(path) as out:
        out.write(text)


def listed_files(manifest: Mapping[str, Any]) -> dict[str, str | None]:
    """Every file a manifest publishes besides itself (shards, `files` and the card),
    relative to its folder, with its sha256."""
    listed: dict[str, str | None] = {}
    for split in (manifest.get("splits") or {}).values():
        for shard in split.get("shards") or []:
            listed[str(shard.get("path"))] = shard.get("sha256")
    for entry in [*(manifest.get("files") or []), manifest.get("card") or {}]:
        if entry:
            listed[str(entry.get("path"))] = entry.get("sha256")
    return listed


def _shard_entry(shard: Shard) -> dict[str, Any]:
    return {
        "path": f"{DATA_DIR}/{shard.name}",
        "rows": shard.rows,
        "bytes": shard.bytes,
        "sha256": shard.sha256,
    }


def _sorted_mappings(value: Any) -> Any:
    """`value` with every mapping in it sorted by key."""
    if isinstance(value, Mapping):
        return {key: _sorted_mappings(value[key]) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return [_sorted_mappings(item) for item in value]
    return value
