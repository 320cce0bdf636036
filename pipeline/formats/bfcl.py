"""Berkeley Function Calling Leaderboard (BFCL) entries: `id`, `question` (a list of turns,
each a list of `{role, content}` messages; older releases: one string, or one flat list of
messages) and `function` (the declared functions, in BFCL's JSON Schema dialect).

An entry has no answer: it becomes a prompt-only thread. Its functions are declared and
enabled by the developer message every tool source gets; the first turn is the prompt and
the later turns of a multi-turn entry wait in `meta.follow_ups` (see follow_ups.py). BFCL's
type names (`dict`, `float`, `tuple`, `any`, Java's `HashMap`, `String` ...) are mapped to
JSON Schema as BFCL's own OpenAI handler maps them, except that `any` drops the type
constraint rather than becoming a string; a note counts the changes. Multi-turn entries
hold no `function`: their functions are BFCL's docs of the `involved_classes`, which the
record does not hold, so none is declared (noted). Function names keep BFCL's dots
(`math.factorial`): BFCL's answers call them so. `meta.category` is the test category
read from the id (`live_irrelevance`: the right answer calls no function).

Example: a question with its function, and the prompt-only thread it becomes (the
function declared as a tool in the developer message).

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> entry = {
...     "id": "simple_0",
...     "question": [[{"role": "user", "content": "Weather in Paris?"}]],
...     "function": [{
...         "name": "get_weather",
...         "description": "Current weather.",
...         "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}},
...     }],
... }
>>> [thread] = to_threads(Record("BFCL.json", "BFCL.json:1", entry), ConvertOptions())
>>> [(m.role, m.content.splitlines()[0]) for m in thread.messages]
[('developer', '# Available tools'), ('user', 'Weather in Paris?')]
>>> thread.id, thread.meta["prompt_only"]
('simple_0', True)
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import orjson

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import (
    ThreadBuilder,
    a_json_kind,
    canonical_json,
    json_kind,
    source_thread_id,
    tool_specs,
)
from pipeline.formats.follow_ups import keep_follow_ups
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "bfcl"
ROLES = {"system": "developer", "user": "user", "assistant": "assistant"}
JSON_SCHEMA_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
BFCL_TYPES: dict[str, str | None] = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "list": "array",
    "bool": "boolean",
    "any": None,
    "Any": None,
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "Bigint": "integer",
    "double": "number",
    "char": "string",
    "String": "string",
    "Boolean": "boolean",
    "Array": "array",
    "ArrayList": "array",
    "Queue": "array",
    "Stack": "array",
    "Set": "array",
    "HashMap": "object",
    "Hashtable": "object",
}
"""BFCL's type names -> JSON Schema type; None: any value (no `type`)."""
SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
SUBSCHEMAS = ("items", "prefixItems", "additionalProperties", "not", "anyOf", "oneOf", "allOf")
FUNCTION_KEYS = ("name", "description", "parameters")
CATEGORY = re.compile(r"([A-Za-z_]+?)_\d")
PROMPT_ONLY_REASON = (
    "a BFCL benchmark entry: the function calls (or the answer that needs none) are to be generated"
)


# ----------------------------------------------------------------------------- sniff


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str) and "content" in value


def _is_turn_list(question: Any) -> bool:
    """A non-empty list of turns, each a list of messages, with at least one message."""
    return (
        isinstance(question, list)
        and bool(question)
        and all(isinstance(turn, list) and all(map(_is_message, turn)) for turn in question)
        and any(question)
    )


def _declares_functions(functions: Any) -> bool:
    named = [functions] if isinstance(functions, dict) else functions
    return (
        isinstance(named, list)
        and bool(named)
        and all(isinstance(f, dict) and isinstance(f.get("name"), str) for f in named)
    )


def sniff(value: object) -> Sniff:
    """Sure for `question` as a list of turns of messages; likely for a question string or
    flat message list next to named `function` declarations (BFCL v1/v2)."""
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object")
    question = value.get("question")
    if _is_turn_list(question):
        return Sniff(1.0, "question as a list of turns of {role, content} messages (BFCL)")
    if _declares_functions(value.get("function")):
        if isinstance(question, str):
            return Sniff(0.9, "a question string with named function declarations (BFCL v1)")
        if isinstance(question, list) and question and all(map(_is_message, question)):
            return Sniff(0.9, "question messages with named function declarations (BFCL v2)")
    return Sniff(0.0, "no BFCL question turns, nor a question with function declarations")


# ----------------------------------------------------------------------------- functions


def _json_type(kind: Any, changes: Counter[str]) -> Any:
    """The JSON Schema spelling of a `type` value (None: any value); changes are counted."""
    if isinstance(kind, list):
        kinds = [_json_type(k, changes) for k in kind]
        return None if None in kinds else kinds
    if isinstance(kind, str) and kind in JSON_SCHEMA_TYPES:
        return kind
    mapped = BFCL_TYPES.get(kind) if isinstance(kind, str) else None
    shown = kind if isinstance(kind, str) and kind else canonical_json(kind)
    changes[f"{shown} -> {mapped or 'any value'}"] += 1
    return mapped


def _normalised(schema: Any, changes: Counter[str]) -> Any:
    """A copy of a BFCL parameter schema with its types in JSON Schema, walking only the
    keywords that hold schemas (never `default`, `enum` or other values)."""
    if isinstance(schema, list):
        return [_normalised(item, changes) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if "type" in out:
        kind = _json_type(out.pop("type"), changes)
        if kind is not None:
            out = {"type": kind, **out}
    for key in SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: _normalised(sub, changes) for name, sub in out[key].items()}
    for key in SUBSCHEMAS:
        if key in out:
            out[key] = _normalised(out[key], changes)
    return out


def _properties(builder: ThreadBuilder, parameters: dict[str, Any], where: str) -> dict[str, Any]:
    """`parameters` with `properties` parsed when it is a JSON string, as the Hugging Face
    copy of BFCL stores it."""
    properties = parameters.get("properties")
    if not isinstance(properties, str):
        return parameters
    try:
        parsed = orjson.loads(properties)
    except orjson.JSONDecodeError:
        raise RecordRejected(
            "invalid_tools", f"{where}.parameters.properties is a string but not JSON"
        ) from None
    builder.note(f"{where}.parameters.properties is a JSON string; parsed")
    return {**parameters, "properties": parsed}


def _function(builder: ThreadBuilder, entry: Any, where: str, changes: Counter[str]) -> Any:
    """One declaration with its schema in JSON Schema; its other fields kept in meta."""
    if not isinstance(entry, dict):
        return entry
    builder.keep_unread(entry, FUNCTION_KEYS, where)
    parameters = entry.get("parameters")
    if not isinstance(parameters, dict):
        return entry
    schema = _normalised(_properties(builder, parameters, where), changes)
    return {**entry, "parameters": schema}


def _declare(builder: ThreadBuilder, value: dict[str, Any]) -> None:
    """Declare the entry's functions, or note where a multi-turn entry's functions are."""
    functions = value.get("function")
    if functions is None:
        classes = value.get("involved_classes")
        if isinstance(classes, list) and classes:
            names = ", ".join(str(c) for c in classes)
            builder.note(
                f"declares no functions: BFCL gives this entry the functions of {names} from "
                "its multi_turn_func_doc files, which the record does not hold"
            )
        else:
            builder.note("declares no functions (the entry has no `function` list)")
        return
    changes: Counter[str] = Counter()
    if isinstance(functions, list):
        functions = [
            _function(builder, entry, f"function[{i}]", changes)
            for i, entry in enumerate(functions)
        ]
    else:
        functions = _function(builder, functions, "function", changes)
    builder.declare_tools(tool_specs(functions, "function"))
    if changes:
        counted = ", ".join(f"{change} ({n})" for change, n in sorted(changes.items()))
        builder.note(f"mapped BFCL parameter types to JSON Schema: {counted}")


# ----------------------------------------------------------------------------- turns


def _turns(question: Any) -> list[tuple[str, Any]]:
    """(where, messages) of each turn: a list of turns as it is, a flat message list or a
    string as the one turn."""
    if isinstance(question, str):
        return [("question", [{"role": "user", "content": question}])]
    if not isinstance(question, list):
        raise RecordRejected(
            "missing_field", f"question is {a_json_kind(question)} (expected a list of turns)"
        )
    if not question:
        raise RecordRejected("empty_conversation", "question is an empty list")
    if all(isinstance(turn, list) for turn in question):
        return [(f"question[{i}]", turn) for i, turn in enumerate(question)]
    if all(isinstance(message, dict) for message in question):
        return [("question", question)]
    raise RecordRejected(
        "missing_field", "question mixes turns (lists) with messages (objects) at its top level"
    )


def _messages(builder: ThreadBuilder, turn: list[Any], where: str) -> list[dict[str, str]]:
    """A turn's messages in MMS roles; their other fields are kept in meta."""
    messages = []
    for index, message in enumerate(turn):
        here = f"{where}[{index}]"
        if not isinstance(message, dict):
            raise RecordRejected(
                "missing_field", f"{here} is {a_json_kind(message)} (expected a message object)"
            )
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise RecordRejected(
                "unknown_role", f"{here}.role is {role!r} (expected system, user or assistant)"
            )
        content = message.get("content")
        if not isinstance(content, str):
            raise RecordRejected(
                "missing_field", f"{here}.content is {a_json_kind(content)} (expected a string)"
            )
        builder.keep_unread(message, ("role", "content"), here)
        messages.append({"role": ROLES[role], "content": content})
    return messages


def _prompt(builder: ThreadBuilder, messages: list[dict[str, str]], where: str) -> None:
    """The first turn as the thread's messages; it must end with the user's request."""
    if not messages:
        raise RecordRejected("empty_conversation", f"{where} is an empty turn: there is no prompt")
    if messages[-1]["role"] != "user":
        raise RecordRejected(
            "missing_field",
            f"{where} ends with role {messages[-1]['role']}, not user: the request to answer "
            "is missing",
        )
    add = {"developer": builder.developer, "user": builder.user, "assistant": builder.assistant}
    for message in messages:
        add[message["role"]](message["content"])


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One prompt-only thread: the first turn, after the declared functions."""
    value = record.value
    if not isinstance(value, dict):
        raise RecordRejected("not_an_object", f"expected a BFCL entry, got {json_kind(value)}")
    if "question" not in value:
        raise RecordRejected("missing_field", "the entry has no question")
    turns = _turns(value["question"])
    source_id = value.get("id")
    category = CATEGORY.match(source_id) if isinstance(source_id, str) else None
    builder = ThreadBuilder(
        record,
        NAME,
        options,
        thread_id=source_thread_id(record, source_id),
        meta={"category": category.group(1)} if category else {},
    )
    _declare(builder, value)
    (where, first), *later = turns
    _prompt(builder, _messages(builder, first, where), where)
    builder.prompt_only(PROMPT_ONLY_REASON)
    keep_follow_ups(builder, [_messages(builder, turn, at) for at, turn in later], "question")
    read = {"question", "function"} | ({"id"} if builder.thread_id == str(source_id) else set())
    builder.keep_unread(value, read)
    return [builder.build()]


FORMAT = InputFormat(
    name=NAME,
    summary="Berkeley Function Calling Leaderboard entries (id, question turns, function "
    "declarations): prompt-only threads, later turns in meta.follow_ups",
    sniff=sniff,
    to_threads=to_threads,
)
