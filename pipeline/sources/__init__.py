"""Stream records from input files: JSON Lines, JSON, YAML, Parquet, CSV and scripts read
whole (PPE `.ai.yaml`, Semantic Kernel `skprompt.txt`), optionally
compressed, from files, directories and globs (local, or on an object store: `s3://` ...,
pipeline/storage), and from Hugging Face datasets (`hf:`).
Every record carries its locator; what cannot be read becomes a Rejection, never an
exception that stops the run."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

from pipeline import storage
from pipeline.quarantine import Rejection
from pipeline.sources.compression import open_binary
from pipeline.sources.documents import iter_json, iter_yaml
from pipeline.sources.guard import guarded
from pipeline.sources.harmony_files import HARMONY_KIND
from pipeline.sources.hf import DEFAULT_SPLIT, iter_hf
from pipeline.sources.jsonl import iter_jsonl
from pipeline.sources.limits import ReadLimits
from pipeline.sources.paths import InputError, InputFiles, expand_inputs, file_kind, is_hf_input
from pipeline.sources.record import Record, named
from pipeline.sources.stdin import is_stdin, relabelled, spooled
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
    "with_name",
]


def iter_file(
    path: str,
    limits: ReadLimits | None = None,
    *,
    split: str = DEFAULT_SPLIT,
    config: str | None = None,
    name: str | None = None,
) -> Iterator[Record | Rejection]:
    """Records of one file, in file order, named `name` (its name relative to its input,
    pipeline/sources/names.py; None: its path). A record nested deeper than
    `limits.max_depth` is a `too_deep` rejection; a file that cannot be opened, whose
    compressed stream breaks or decompresses past its bound, or that its reader fails on,
    ends in one `unreadable_file` rejection, as does a path that is not a regular file
    (a device or a pipe is never opened). An `hf:` input streams `split` (and `config`)
    of that dataset instead; `-` reads standard input (pipeline/sources/stdin.py)."""
    limits = limits or ReadLimits()
    if is_stdin(path):
        with spooled() as spool:
            for item in iter_file(str(spool), limits):
                yield relabelled(item, str(spool))
        return
    if not is_hf_input(path) and file_kind(path) is None:
        raise InputError(f"{path}: unsupported file type")
    items = guarded(path, _records(path, limits, split, config), limits.max_depth)
    yield from items if name is None else with_name(items, name)


def with_name(items: Iterator[Record | Rejection], name: str) -> Iterator[Record | Rejection]:
    """The records of one file named `name`; its rejections keep pointing at the path."""
    for item in items:
        yield named(item, name) if isinstance(item, Record) else item


def _records(
    path: str, limits: ReadLimits, split: str, config: str | None
) -> Iterator[Record | Rejection]:
    if is_hf_input(path):
        yield from iter_hf(path, limits, split=split, config=config)
        return
    if not storage.is_url(path) and not stat.S_ISREG(os.stat(path).st_mode):
        # a device or pipe would never end
        yield Rejection(path, path, "unreadable_file", f"{path} is not a regular file")
        return
    kind = file_kind(path)
    if kind == "parquet":
        yield from iter_parquet(path, limits)
        return
    with open_binary(path, limits.max_decompression_ratio) as stream:
        if kind == "jsonl":
            yield from iter_jsonl(path, stream, limits)
        elif kind == "json":
            yield from iter_json(path, stream, limits)
        elif kind == "yaml":
            yield from iter_yaml(path, stream, limits)
        elif kind in ("ppe", "skprompt", HARMONY_KIND):
            yield from iter_text_document(path, stream, limits, kind)
        else:
            yield from iter_csv(path, stream, limits)
