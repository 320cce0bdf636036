"""References kept apart from the prompts they check (BFCL's `possible_answer` files: one
`{"id": ..., "ground_truth": [...]}` per entry), joined to the threads by id so prompt rows
carry them (`--references FILE` of `mms tokenize --objective prompt`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from pipeline.objectives.prompt import REFERENCE_KEYS

ANSWER_KEYS = ("ground_truth", *(key for key in REFERENCE_KEYS if key != "ground_truth"))
"""Where a reference record keeps its answer, in the order looked at."""


class ReferenceError(ValueError):
    """A references file that cannot be read, or holds no `id` + answer records."""


def load_references(paths: Sequence[str | Path]) -> dict[str, Any]:
    """Each record's answer by its id, from JSON Lines or JSON array files (records
    without an id or an answer are skipped; a file with none is an error)."""
    found: dict[str, Any] = {}
    for path in map(Path, paths):
        try:
            data = path.read_bytes()
            stripped = data.lstrip()
            records = (
                orjson.loads(data)
                if stripped.startswith(b"[")
                else [orjson.loads(line) for line in data.splitlines() if line.strip()]
            )
        except (OSError, orjson.JSONDecodeError) as err:
            raise ReferenceError(f"{path}: cannot read references: {err}") from None
        before = len(found)
        for record in records if isinstance(records, list) else []:
            if not isinstance(record, dict) or not isinstance(record.get("id"), (str, int)):
                continue
            answer = next((record[key] for key in ANSWER_KEYS if key in record), None)
            if answer is not None:
                found[str(record["id"])] = answer
        if len(found) == before:
            raise ReferenceError(
                f"{path}: no record with an `id` and one of {', '.join(ANSWER_KEYS)}"
            )
    return found
