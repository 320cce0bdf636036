"""Test helpers: read inputs through the public API and collect threads, rejections and
counts; write records to a JSONL file first."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

import pipeline
from pipeline.capabilities import thread_capabilities


def read_all(
    *inputs: str | os.PathLike[str], **kwargs: Any
) -> tuple[list[pipeline.Thread], list[pipeline.Rejection], pipeline.Account]:
    """`pipeline.read` over `inputs`, read as `kwargs` (ReadSpec fields) say: the threads,
    the rejections and the counts."""
    rejected: list[pipeline.Rejection] = []
    stats = pipeline.Account()
    paths = [os.fspath(i) for i in inputs]
    threads = list(
        pipeline.read(paths, pipeline.ReadSpec(**kwargs), on_reject=rejected.append, stats=stats)
    )
    return threads, rejected, stats


def write_records(tmp_path: Path, *records: Any, name: str = "records.jsonl") -> Path:
    """Write `records` as JSON Lines under `tmp_path`."""
    path = tmp_path / name
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def read_records(tmp_path: Path, *records: Any, **kwargs: Any):
    """`read_all` over `records` written as one JSONL file."""
    return read_all(write_records(tmp_path, *records), **kwargs)


def unenabled_formats(thread: pipeline.Thread) -> list[str]:
    """Assistant formats (other than markdown) that no earlier platform/developer message
    enables as a code span (settings aside), in order of use."""
    return [use.format for use in thread_capabilities(thread).uses if use.enabled_by is None]
