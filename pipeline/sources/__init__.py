"""Stream records from input files: JSON Lines, JSON, YAML, Parquet, CSV and scripts read
whole (PPE `.ai.yaml`, Semantic Kernel `skprompt.txt`), optionally
compressed, from files, directories and globs, and from Hugging Face datasets (`hf:`).
Every record carries its locator; what cannot be read becomes a Rejection, never an
exception that stops the run."""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.quarantine import Rejection
from pipeline.sources.compression import DECOMPRESSION_ERRORS, open_binary
from pipeline.sources.documents import iter_json, iter_yaml
from pipeline.sources.hf import DEFAULT_SPLIT, iter_hf
from pipeline.sources.jsonl import iter_jsonl
from pipeline.sources.limits import ReadLimits
from pipeline.sources.paths import InputError, InputFiles, expand_inputs, file_kind, is_hf_input
from pipeline.sources.record import Record
from pipeline.sources.tables import iter_csv, iter_parquet
from pipeline.sources.text_documents import TextDocument, iter_text_document

__all__ = [
    "DEFAULT_SPLIT",
    "InputError",
    "InputFiles",
    "ReadLimits",
    "Record",
    "TextDocument",
    "expand_inputs",
    "file_kind",
    "is_hf_input",
    "iter_file",
]


def iter_file(
    path: str,
    limits: ReadLimits | None = None,
    *,
    split: str = DEFAULT_SPLIT,
    config: str | None = None,
) -> Iterator[Record | Rejection]:
    """Records of one file, in file order. A file that cannot be opened, or whose
    compressed stream breaks mid-way, ends in one `unreadable_file` rejection.
    An `hf:` input streams `split` (and `config`) of that dataset instead."""
    limits = limits or ReadLimits()
    if is_hf_input(path):
        yield from iter_hf(path, limits, split=split, config=config)
        return
    kind = file_kind(path)
    if kind is None:
        raise InputError(f"{path}: unsupported file type")
    if kind == "parquet":
        yield from iter_parquet(path, limits)
        return
    last = path
    try:
        with open_binary(path) as stream:
            if kind == "jsonl":
                records = iter_jsonl(path, stream, limits.max_record_bytes)
            elif kind == "json":
                records = iter_json(path, stream, limits)
            elif kind == "yaml":
                records = iter_yaml(path, stream, limits)
            elif kind in ("ppe", "skprompt"):
                records = iter_text_document(path, stream, limits, kind)
            else:
                records = iter_csv(path, stream, limits)
            for item in records:
                last = item.locator
                yield item
    except DECOMPRESSION_ERRORS as err:
        where = "" if last == path else f" after {last}"
        yield Rejection(
            path,
            path,
            "unreadable_file",
            f"cannot read {path}{where}: {type(err).__name__}: {err}; the rest of the file is lost",
        )
