"""Which Parquet files `mms stats` reads, per split, and what an output folder says of them
(the `<|role|>` id of its shipped tokenizer)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.output.manifest import DATA_DIR
from pipeline.output.shards import SHARD_FILE
from pipeline.output.tokenizer import SPECIAL_TOKENS_FILE, TOKENIZER_DIR
from pipeline.tokenize.special import ROLE

ALL = "all"
"""The split name of Parquet files given one by one."""


class StatsError(ValueError):
    """What cannot be summed up (no Parquet files, an unknown meta field): the message says."""


def shard_files(targets: Sequence[str | Path]) -> dict[str, list[str]]:
    """The Parquet files to read, per split: an output folder's `data/` shards by split
    name, Parquet files given one by one under `all`."""
    found: dict[str, list[str]] = {}
    for target in map(Path, targets):
        if target.is_dir():
            data = target / "data" if (target / "data").is_dir() else target
            for path in sorted(data.glob("*.parquet")):
                match = SHARD_FILE.match(path.name)
                found.setdefault(match.group("split") if match else ALL, []).append(str(path))
        elif target.suffix == ".parquet" and target.is_file():
            found.setdefault(ALL, []).append(str(target))
        else:
            raise StatsError(f"{target}: not an output folder nor a Parquet file")
    if not found:
        raise StatsError("no Parquet shards found in " + ", ".join(map(str, targets)))
    return found


def role_token_id(targets: Sequence[str | Path]) -> int | None:
    """The id of `<|role|>` in the tokenizer the shards were made with, from the output
    folder's `tokenizer/mms_special_tokens.json` (a shard's folder is the one above its
    `data/`); None when there is none, or when the targets disagree."""
    found: set[int | None] = set()
    for target in map(Path, targets):
        folder = target if target.is_dir() else target.parent
        if folder.name == DATA_DIR:
            folder = folder.parent
        found.add(_role_id(folder / TOKENIZER_DIR / SPECIAL_TOKENS_FILE))
    return found.pop() if len(found) == 1 else None


def _role_id(path: Path) -> int | None:
    if not path.is_file():
        return None
    tokens = read_json_object(path).get("special_tokens")
    value = tokens.get(ROLE) if isinstance(tokens, dict) else None
    return value if isinstance(value, int) else None


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in the file at `path`; StatsError naming it when it holds none (a
    damaged output: `mms verify` tells what else is wrong)."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise StatsError(
            f"{path} cannot be read as JSON ({err}); `mms verify` checks the output"
        ) from None
    if not isinstance(found, dict):
        raise StatsError(f"{path} holds no JSON object; `mms verify` checks the output")
    return found
