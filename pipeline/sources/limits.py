"""Size limits that keep reading bounded in memory whatever the input holds."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """`max_record_bytes` bounds one line or row; `max_document_bytes` bounds a whole
    .json/.yaml file, which is parsed in one piece; `max_yaml_values` bounds how far
    YAML aliases may expand (a "billion laughs" document is rejected, not expanded)."""

    max_record_bytes: int = 64 * MIB
    max_document_bytes: int = 512 * MIB
    max_yaml_values: int = 1_000_000
