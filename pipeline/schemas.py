"""The JSON Schemas of `schemas/` (the MMS thread, each seed input format), loaded once
and used to report precise errors: the path in the record and what is wrong there."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

MAX_SCHEMA_DETAILS = 10
"""How many errors a problem lists in its details."""
MAX_MESSAGE_CHARS = 240
"""jsonschema quotes whole instances in messages; longer ones are cut."""
BUNDLED = Path(__file__).resolve().parent / "schema_files"
"""Where a wheel install keeps the schemas (hatch force-include)."""
CHECKOUT = Path(__file__).resolve().parent.parent / "schemas"
"""Where they live in a source checkout (editable install)."""


def schema_path(name: str) -> Path:
    """The file of schema `name` (e.g. `glm` -> glm.schema.json)."""
    filename = f"{name}.schema.json"
    for folder in (BUNDLED, CHECKOUT):
        if (folder / filename).is_file():
            return folder / filename
    raise FileNotFoundError(f"schema {filename} is in neither {BUNDLED} nor {CHECKOUT}")


@cache
def validator(name: str) -> jsonschema.protocols.Validator:
    """A compiled validator for schema `name`. The schemas are this package's own files,
    checked against their metaschema by tests/test_schema_files.py, not by every process
    (the pipeline config's takes 35 ms)."""
    schema = json.loads(schema_path(name).read_text(encoding="utf-8"))
    return jsonschema.validators.validator_for(schema)(schema)


@cache
def definition_validator(name: str, definition: str) -> jsonschema.protocols.Validator:
    """A compiled validator for `$defs/<definition>` of schema `name` (the pipeline
    config's `mapping`, which a mapping file holds alone)."""
    schema = json.loads(schema_path(name).read_text(encoding="utf-8"))
    part = {"$ref": f"#/$defs/{definition}", "$defs": schema["$defs"]}
    if "$schema" in schema:
        part["$schema"] = schema["$schema"]
    return jsonschema.validators.validator_for(part)(part)


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """Why a record fails its format's JSON Schema: the most relevant error and the rest."""

    path: str
    keyword: str
    message: str
    instance: Any
    details: tuple[dict[str, str], ...]


def json_path(parts: Any) -> str:
    """`history[2].role` for the path parts ("history", 2, "role"); "" for the root."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _short(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS] + "…"


def schema_problem(value: Any, schema: str) -> SchemaProblem | None:
    """The best error of `value` against `schemas/<schema>.schema.json` (jsonschema's
    relevance ranking), with the first errors in `details`; None when the value is valid."""
    errors = sorted(
        validator(schema).iter_errors(value), key=lambda e: (json_path(e.absolute_path), e.message)
    )
    if not errors:
        return None
    best = jsonschema.exceptions.best_match(errors)
    details = tuple(
        {"path": json_path(e.absolute_path), "kind": str(e.validator), "message": _short(e.message)}
        for e in errors[:MAX_SCHEMA_DETAILS]
    )
    return SchemaProblem(
        json_path(best.absolute_path),
        str(best.validator),
        _short(best.message),
        best.instance,
        details,
    )
