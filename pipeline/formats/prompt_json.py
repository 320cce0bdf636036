"""Prompt JSON, the "JSON format for LLM tools" (seed 000): a portable prompt whose
`model_prompt` holds `{{variable}}` placeholders, with `metadata` declaring the variables
(text, single-select, multi-select; the seed's Spanish spellings too), the expected
output, the model parameters, the creator and an avatar.

A prompt has no answer: it becomes a prompt-only thread whose developer message is the
prompt with every placeholder replaced by its variable's default (multi-select defaults
joined with ", "). With `expand_selects` > 0 it becomes one thread per combination of
allowed select values, capped. The expected output is enabled as a response format; the
rest of the metadata goes to `meta.prompt`. Placeholders are substituted as plain text,
never evaluated: a prompt JSON has no expressions, only names.

Example: a prompt and the prompt-only thread it becomes (placeholders filled with
their defaults).

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> prompt = {
...     "model_prompt": "Summarise {{topic}} in one line.",
...     "metadata": {"variables": [{"name": "topic", "type": "text", "default": "tides"}]},
... }
>>> [thread] = to_threads(Record("prompts.json", "prompts.json#0", prompt), ConvertOptions())
>>> [(m.role, m.content) for m in thread.messages], thread.meta["variables"]
([('developer', 'Summarise tides in one line.')], {'topic': 'tides'})
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder, json_kind, source_thread_id
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.schemas import schema_problem
from pipeline.sources import Record

NAME = "prompt-json"
PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
VARIABLE_KINDS = {
    "text": "text",
    "texto": "text",
    "single-select": "single-select",
    "selección-única": "single-select",
    "seleccion-unica": "single-select",
    "multi-select": "multi-select",
    "selección-múltiple": "multi-select",
    "seleccion-multiple": "multi-select",
}
"""Variable types of the seed (English field description, Spanish example) -> kind."""
SELECTS = ("single-select", "multi-select")
OUTPUT_KINDS = {
    "text": "text",
    "texto": "text",
    "code": "code",
    "código": "code",
    "codigo": "code",
    "limited": "limited",
    "limitado": "limited",
}
"""expected_output.type spellings -> kind."""
PROMPT_FIELDS = {
    "prompt_name": "name",
    "description": "description",
    "usage_notes": "usage_notes",
    "model_version": "model_version",
    "creator": "creator",
    "parameters": "parameters",
    "timestamp": "timestamp",
    "expected_output": "expected_output",
    "variables": "variables",
}
"""metadata fields kept in `meta.prompt`, under these keys."""
READ_METADATA = frozenset({*PROMPT_FIELDS, "avatar", "avatar_type"})
READ_TOP = frozenset({"model_prompt", "metadata", "version"})
PROMPT_ONLY_REASON = "a prompt template: the assistant turn is to be generated"


def _validate(value: Any) -> None:
    problem = schema_problem(value, NAME)
    if problem is None:
        return
    code = "missing_field" if problem.keyword in ("required", "type") else "invalid_thread"
    where = problem.path or "the record"
    raise RecordRejected(code, f"{where}: {problem.message}", problem.details)


# ----------------------------------------------------------------------------- sniff


def sniff(value: object) -> Sniff:
    """Sure for an object with a string `model_prompt`."""
    if isinstance(value, dict) and isinstance(value.get("model_prompt"), str):
        return Sniff(1.0, "an object with a string model_prompt (prompt JSON)")
    return Sniff(0.0, "no string model_prompt")


# ----------------------------------------------------------------------------- variables


@dataclass(frozen=True, slots=True)
class _Variable:
    """A declared variable: its kind, its default as text (None without one) and the
    allowed values of a select, as text."""

    name: str
    kind: str
    default: str | None
    allowed: tuple[str, ...]


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ", ".join(_as_text(item) for item in value)
    return orjson.dumps(value).decode()


def _variables(declared: list[dict[str, Any]]) -> tuple[list[_Variable], list[str]]:
    """The declared variables (a later declaration of a name replaces an earlier one) and
    notes on what is odd about them."""
    found: dict[str, _Variable] = {}
    notes: list[str] = []
    for index, data in enumerate(declared):
        name = data["name"]
        default = data.get("default")
        variable = _Variable(
            name,
            VARIABLE_KINDS[data.get("type", "text")],
            None if default is None else _as_text(default),
            tuple(_as_text(v) for v in data.get("allowed_values", ())),
        )
        if name in found:
            notes.append(f"variable {name!r} is declared twice; used metadata.variables[{index}]")
        found[name] = variable
        notes.extend(_select_notes(variable, default))
    return list(found.values()), notes


def _select_notes(variable: _Variable, default: Any) -> list[str]:
    if variable.kind not in SELECTS:
        return []
    if not variable.allowed:
        return [
            f"select variable {variable.name!r} has no allowed_values; only its default is used"
        ]
    defaults = default if isinstance(default, list) else [] if default is None else [default]
    outside = [_as_text(d) for d in defaults if _as_text(d) not in variable.allowed]
    if outside:
        return [
            f"default of {variable.name!r} ({', '.join(outside)}) is not among its allowed_values"
        ]
    return []


def _selects(variables: list[_Variable]) -> list[_Variable]:
    return [v for v in variables if v.kind in SELECTS and v.allowed]


def _expansions(
    base: str, variables: list[_Variable], limit: int
) -> tuple[list[tuple[str, dict[str, str | None]]], list[str]]:
    """(thread id, value of every variable) for each thread, and notes: the defaults only
    (limit 0 or no select variable), else the cartesian product of the select variables'
    allowed values in declaration order (a multi-select takes one value at a time), the
    first `limit` combinations. An expanded id is `base?var=value&var2=value`."""
    defaults = {v.name: v.default for v in variables}
    selects = _selects(variables)
    if limit <= 0 or not selects:
        return [(base, defaults)], []
    total = math.prod(len(v.allowed) for v in selects)
    threads = []
    for combo in itertools.islice(itertools.product(*(v.allowed for v in selects)), limit):
        chosen = [(v.name, value) for v, value in zip(selects, combo, strict=True)]
        thread_id = base + "?" + urlencode(chosen, quote_via=quote)
        threads.append((thread_id, {**defaults, **dict(chosen)}))
    names = ", ".join(repr(v.name) for v in selects)
    notes = [f"expanded the select variable(s) {names} into {total} combination(s)"]
    if total > limit:
        notes.append(
            f"expand_selects={limit} kept {limit} of {total} combinations; {total - limit} were cut"
        )
    return threads, notes


def _render(template: str, values: dict[str, str | None]) -> tuple[str, list[str], list[str]]:
    """The prompt with each `{{ name }}` of a variable with a value replaced (one pass: a
    value is never rendered again); placeholders of undeclared variables and of variables
    without a default stay as written and are returned."""
    undeclared: list[str] = []
    no_default: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            undeclared.append(match.group(0))
            return match.group(0)
        value = values[name]
        if value is None:
            no_default.append(match.group(0))
            return match.group(0)
        return value

    return PLACEHOLDER.sub(replace, template), undeclared, no_default


# ----------------------------------------------------------------------------- metadata


def _format_name(text: str) -> str:
    return "_".join(text.strip().lower().split())


def _expected_output(builder: ThreadBuilder, expected: dict[str, Any]) -> None:
    """Enable the expected output as the response format: code in a language -> that
    language, a format (JSON ...) -> that format, limited -> plaintext with the allowed
    values; plain text needs nothing (markdown is the default)."""
    raw_type = expected["type"]
    kind = OUTPUT_KINDS.get(raw_type.strip().lower())
    language, fmt = expected.get("language"), expected.get("format")
    allowed = [_as_text(v) for v in expected.get("allowed_values", ())]
    if kind is None:
        builder.note(
            f"expected_output.type {raw_type!r} is not text, code or limited; no response format set"
        )
    elif kind == "limited":
        if not allowed:
            builder.note("expected_output is limited but lists no allowed_values")
        builder.respond_in("plaintext", allowed_values=allowed)
    elif kind == "code" and language:
        builder.respond_in(_format_name(language))
    elif fmt:
        builder.respond_in(_format_name(fmt))
    elif kind == "code":
        builder.note("expected_output is code without a language or format; no response format set")


def _avatar(builder: ThreadBuilder, metadata: dict[str, Any]) -> dict[str, Any] | None:
    """The avatar for meta: a URL as it is, an embedded image only as its length and
    sha256 (meta is no place for image bytes)."""
    avatar, kind = metadata.get("avatar"), metadata.get("avatar_type")
    if isinstance(avatar, dict):
        nested = avatar
        avatar, kind = nested.get("avatar"), nested.get("avatar_type", kind)
    if avatar is None:
        return {"type": kind} if kind is not None else None
    if (kind or "").lower() == "url" or avatar.startswith(("http://", "https://")):
        return {"type": kind or "url", "url": avatar}
    digest = hashlib.sha256(avatar.encode()).hexdigest()
    builder.note(f"the embedded avatar image ({len(avatar)} characters) is kept as its sha256 only")
    return {"type": kind, "chars": len(avatar), "sha256": digest}


def _prompt_meta(builder: ThreadBuilder, data: dict[str, Any]) -> dict[str, Any]:
    metadata = data.get("metadata", {})
    prompt = {key: metadata[field] for field, key in PROMPT_FIELDS.items() if field in metadata}
    if "version" in data:
        prompt["version"] = data["version"]
    avatar = _avatar(builder, metadata)
    if avatar is not None:
        prompt["avatar"] = avatar
    return prompt


def _keep_unknown(builder: ThreadBuilder, data: dict[str, Any]) -> None:
    builder.keep_unread(data, READ_TOP)
    builder.keep_unread(data.get("metadata", {}), READ_METADATA, "metadata")


# ----------------------------------------------------------------------------- threads


def _thread(
    record: Record,
    options: ConvertOptions,
    thread_id: str,
    values: dict[str, str | None],
    notes: list[str],
) -> Thread:
    data = record.value
    metadata = data.get("metadata", {})
    builder = ThreadBuilder(
        record, NAME, options, thread_id=thread_id, meta={"variables": dict(values)}
    )
    for note in notes:
        builder.note(note)
    text, undeclared, no_default = _render(data["model_prompt"], values)
    if undeclared:
        builder.note(
            f"placeholder(s) {', '.join(dict.fromkeys(undeclared))} name no declared variable; "
            "left as written"
        )
    if no_default:
        builder.note(
            f"placeholder(s) {', '.join(dict.fromkeys(no_default))} have no default value; "
            "left as written"
        )
    builder.developer(text)
    if "expected_output" in metadata:
        _expected_output(builder, metadata["expected_output"])
    builder.meta["prompt"] = _prompt_meta(builder, data)
    _keep_unknown(builder, data)
    builder.prompt_only(PROMPT_ONLY_REASON)
    return builder.build()


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One prompt-only thread (variable defaults), or one per combination of allowed
    select values when `options.expand_selects` > 0, capped at that many."""
    if not isinstance(record.value, dict):
        raise RecordRejected(
            "not_an_object", f"expected a prompt JSON object, got {json_kind(record.value)}"
        )
    _validate(record.value)
    variables, notes = _variables(record.value.get("metadata", {}).get("variables", []))
    threads, expansion_notes = _expansions(
        source_thread_id(record), variables, options.expand_selects
    )
    return [
        _thread(record, options, thread_id, values, notes + expansion_notes)
        for thread_id, values in threads
    ]


FORMAT = InputFormat(
    name=NAME,
    summary="Prompt JSON (JSON format for LLM tools): model_prompt with {{variables}} and "
    "metadata (variables, expected_output, parameters, creator, avatar); prompt-only threads",
    sniff=sniff,
    to_threads=to_threads,
)
