"""Size limits that keep reading bounded in memory whatever the input holds."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """`max_record_bytes` bounds one line or row; `max_document_bytes` bounds a whole
    .json/.yaml file, which is parsed in one piece; `max_yaml_values` bounds how far
    YAML aliases may expand (a "billion laughs" document is rejected, not expanded);
    `max_depth` bounds how deep a record nests lists and objects (JSON writers and
    converters recurse; real records nest a few tens of levels); a compressed file may
    decompress to at most `max_decompression_ratio` times its size (plus 64 MiB), which
    stops decompression bombs; a line over `max_record_bytes` is skipped to its end so
    the lines after it are read, but past `max_skip_bytes` the rest of the file is given
    up (a file without line ends cannot hold the reader)."""

    max_record_bytes: int = 64 * MIB
    max_document_bytes: int = 512 * MIB
    max_yaml_values: int = 1_000_000
    max_depth: int = 128
    max_decompression_ratio: int = 200
    max_skip_bytes: int = 1024 * MIB
