"""Test helpers for the linter: write example threads (dicts or raw JSONL lines) to a
file and lint it through the public API, as `mms lint --from mms` would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from pipeline.jobs.lint import lint
from pipeline.jobs.read import ReadSpec
from pipeline.lint import Diagnostic, LintConfig


def write_lines(tmp_path: Path, records: list[Any], name: str = "threads.jsonl") -> Path:
    path = tmp_path / name
    lines = [r.encode() if isinstance(r, str) else orjson.dumps(r) for r in records]
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def findings(tmp_path: Path, records: list[Any], *codes: str, **config: Any) -> list[Diagnostic]:
    """The diagnostics of rules `codes` on `records` read as MMS JSONL."""
    path = write_lines(tmp_path, records)
    report = lint(str(path), ReadSpec("mms"), config=LintConfig(select=codes or ("ALL",), **config))
    assert report.stats.balanced
    return list(report.diagnostics)


def fired(tmp_path: Path, records: list[Any], code: str, **config: Any) -> list[Diagnostic]:
    """Only the diagnostics of `code` (run alone)."""
    return [d for d in findings(tmp_path, records, code, **config) if d.code == code]
