"""MMS4xx: the content matches its format: JSON where a json sampler or `*:json` format
says so, tool arguments valid against the declared schema, and no text that will not
train as intended (special-token literals, unrendered template placeholders)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import orjson
from jsonschema import exceptions as schema_errors
from jsonschema import validators

from pipeline.capabilities import without_code
from pipeline.digest_cache import DigestCache
from pipeline.lint.rule import Finding, Rule
from pipeline.lint.rules.examples import assistant, developer, thread, tool_format, user
from pipeline.lint.thread_view import ThreadView

SPECIAL_TOKEN = re.compile(
    r"<\|[A-Za-z0-9_.:/-]{1,40}\|>"  # <|im_end|>, <|eot_id|>, <|role|> ...
    r"|<\uff5c[^\uff5c<>\n]{1,40}\uff5c>"  # DeepSeek's full-width bars
    r"|\[/?INST\]|<</?SYS>>|</s>|<(?:start|end)_of_turn>|<(?:bos|eos)>"
)
PLACEHOLDER = re.compile(
    r"\{\{\s*[#/$^>&!@]?\s*[A-Za-z_][\w.-]*[^{}\n]{0,60}\}\}"  # {{name}}, {{$var}}, {{#each x}}
    r"|\{%-?\s*[a-z]+\b[^%\n]{0,60}%\}"  # {% if x %}
    r"|\[\[[A-Za-z_@][\w@.:-]{0,60}\]\]"  # [[AI]], [[@script]]
)


def invalid_json(view: ThreadView, config: object) -> Iterator[Finding]:
    for index, message in enumerate(view.thread.messages):
        if message.role == "assistant" and view.sampler(message.format or "") == "json":
            try:
                orjson.loads(message.content)
            except orjson.JSONDecodeError as err:
                yield Finding(index, f"content of `{message.format}` is not valid JSON: {err}")


def invalid_jsonl(view: ThreadView, config: object) -> Iterator[Finding]:
    for index, message in enumerate(view.thread.messages):
        if message.role == "assistant" and view.sampler(message.format or "") == "jsonl":
            for number, line in enumerate(message.content.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    orjson.loads(line)
                except orjson.JSONDecodeError as err:
                    yield Finding(
                        index, f"line {number} of `{message.format}` is not valid JSON: {err}"
                    )
                    break


def arguments_against_schema(view: ThreadView, config: object) -> Iterator[Finding]:
    schemas = view.tool_schemas
    if not schemas:
        return
    for index, message in enumerate(view.thread.messages):
        if message.role != "assistant" or not message.format:
            continue
        tool, _, syntax = message.format.rpartition(":")
        schema = schemas.get(tool)
        if schema is None or syntax not in ("json", "jsonl"):
            continue
        if syntax == "json":
            calls = [(f"`{message.format}`", message.content)]
        else:
            calls = [
                (f"`{message.format}` (line {number})", line)
                for number, line in enumerate(message.content.splitlines(), 1)
                if line.strip()
            ]
        for label, text in calls:
            finding = _check_call(index, label, text, schema)
            if finding is not None:
                yield finding
                break


def _check_call(index: int, label: str, text: str, schema: Any) -> Finding | None:
    try:
        arguments = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None  # MMS401/MMS402 report it
    try:
        validator = _validator(schema)
    except schema_errors.SchemaError as err:
        return Finding(
            index,
            f"cannot check {label}: its declared schema is not a valid JSON Schema ({err.message})",
            "warning",
        )
    error = schema_errors.best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = error.json_path if error.path else "the arguments"
    return Finding(index, f"arguments of {label} do not match its schema: {where}: {error.message}")


_VALIDATORS = DigestCache[Any](max_entries=4096)


def _validator(schema: Any) -> Any:
    """The schema's validator, built (and the schema checked) once per distinct schema:
    datasets repeat the same tools in thousands of threads. Raises SchemaError."""
    text = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    built = _VALIDATORS.get(text, lambda: _build_validator(schema))
    if isinstance(built, schema_errors.SchemaError):
        raise built
    return built


def _build_validator(schema: Any) -> Any:
    if not isinstance(schema, (dict, bool)):
        return schema_errors.SchemaError(f"expected an object, got {type(schema).__name__}")
    if isinstance(schema, dict) and not isinstance(schema.get("$schema", ""), str):
        return schema_errors.SchemaError("$schema is not a string")
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        # types-jsonschema's Validator protocol takes only dicts; jsonschema takes booleans too
        cls.check_schema(schema)  # type: ignore[arg-type]
    except schema_errors.SchemaError as err:
        return err  # remembered too: an invalid schema is checked once, not per call
    return cls(schema)


def _matches(pattern: re.Pattern[str], text: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The distinct matches of `pattern` (and `extra` literals) in the prose of `text`."""
    if not pattern.search(text) and not any(literal in text for literal in extra):
        return []  # the common case: nothing, without stripping code
    prose = without_code(text)
    found = dict.fromkeys(pattern.findall(prose))
    found.update(dict.fromkeys(literal for literal in extra if literal in prose))
    return list(found)


@lru_cache(maxsize=16)
def _extra_literals(literals: tuple[str, ...]) -> tuple[str, ...]:
    """The configured literals the built-in pattern does not match already (a run adds
    its tokenizer's special tokens: Llama 3's 256 `<|reserved_special_token_N|>` cost no
    search of their own)."""
    return tuple(literal for literal in literals if not SPECIAL_TOKEN.fullmatch(literal))


def special_tokens(view: ThreadView, config: Any) -> Iterator[Finding]:
    extra = _extra_literals(tuple(getattr(config, "special_tokens", ())))
    for index, message in enumerate(view.thread.messages):
        literals = _matches(SPECIAL_TOKEN, message.content, extra)
        if literals:
            shown = ", ".join(f"`{t}`" for t in literals[:3])
            yield Finding(
                index, f"content contains the special-token literal {shown}; it is encoded as text"
            )


def unrendered_placeholders(view: ThreadView, config: object) -> Iterator[Finding]:
    seen: list[str] = []
    for index, message in enumerate(view.thread.messages):
        placeholders = _matches(PLACEHOLDER, message.content)
        if placeholders:
            seen.extend(placeholders)
            shown = ", ".join(f"`{p}`" for p in placeholders[:3])
            yield Finding(index, f"content contains the unrendered placeholder {shown}")
    missing = view.thread.meta.get("missing_variables")
    if isinstance(missing, list):
        # variables the converter could not fill that no placeholder above shows already
        # (a `{{#each history}}` block, a variable inside a removed construct)
        unseen = [str(name) for name in missing if not any(str(name) in p for p in seen)]
        if unseen:
            yield Finding(None, f"the template had no value for: {', '.join(unseen[:5])}")


_ARGS_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
_DECLARE = developer("Use `get_weather:json` for weather questions.")

RULES = [
    Rule(
        code="MMS401",
        name="invalid-json",
        severity="error",
        summary="A `json` / `*:json` / json-sampler message is not valid JSON.",
        rationale=(
            "A json sampler makes invalid JSON impossible at inference; training on it "
            "teaches a syntax the system will never let the model write, and a developer "
            "parsing the message fails."
        ),
        bad=[
            thread(developer("Reply in `json`."), user("Two primes?"), assistant("[2, 3", "json"))
        ],
        good=[
            thread(developer("Reply in `json`."), user("Two primes?"), assistant("[2, 3]", "json"))
        ],
        check=invalid_json,
    ),
    Rule(
        code="MMS402",
        name="invalid-jsonl",
        severity="error",
        summary="A `jsonl` / `*:jsonl` / jsonl-sampler message has a line that is not JSON.",
        rationale="Every non-blank line of JSON Lines must be one JSON value.",
        bad=[
            thread(
                developer("List them in `jsonl`."),
                user("Two primes?"),
                assistant('{"p": 2}\n{"p": 3', "jsonl"),
            )
        ],
        good=[
            thread(
                developer("List them in `jsonl`."),
                user("Two primes?"),
                assistant('{"p": 2}\n{"p": 3}', "jsonl"),
            )
        ],
        check=invalid_jsonl,
    ),
    Rule(
        code="MMS403",
        name="arguments-against-schema",
        severity="error",
        summary="Tool call arguments do not validate against the tool's declared JSON Schema.",
        rationale=(
            "Converters keep the source's tool schemas in `meta.tool_schemas`. A call whose "
            "arguments break the schema (a missing required field, a wrong type) trains "
            "calls the tool rejects. A schema that is not valid JSON Schema is reported as a "
            "warning, since nothing can be checked against it."
        ),
        bad=[
            thread(
                _DECLARE,
                user("Weather?"),
                assistant('{"town":"Oslo"}', "get_weather:json", end_turn=False),
                settings={"formats": [tool_format("get_weather")]},
                meta={"tool_schemas": {"get_weather": _ARGS_SCHEMA}},
            )
        ],
        good=[
            thread(
                _DECLARE,
                user("Weather?"),
                assistant('{"city":"Oslo"}', "get_weather:json", end_turn=False),
                settings={"formats": [tool_format("get_weather")]},
                meta={"tool_schemas": {"get_weather": _ARGS_SCHEMA}},
            )
        ],
        check=arguments_against_schema,
    ),
    Rule(
        code="MMS404",
        name="special-token-literal",
        severity="warning",
        summary="Content contains a special-token literal; it will be encoded as text.",
        rationale=(
            "`<|im_end|>`, `<|eot_id|>`, `[INST]`, `</s>` in content are leftovers of another "
            "model's chat template. The renderer encodes them as ordinary text, so they do "
            "no harm to the structure, but the model learns to write them. Literals inside "
            "code blocks and inline code are not reported; add your own with `special-tokens`. "
            "In `mms run` with a tokenize stage, the special tokens of its tokenizer "
            "(`<s>`, `<unk>` ...) are flagged too."
        ),
        bad=[thread(user("Hi"), assistant("Hello!<|im_end|>"))],
        good=[thread(user("What ends a ChatML turn?"), assistant("The `<|im_end|>` token."))],
        check=special_tokens,
        options=("special-tokens",),
    ),
    Rule(
        code="MMS405",
        name="unrendered-placeholder",
        severity="warning",
        summary="Content contains an unrendered template placeholder (`{{x}}`, `[[AI]]`).",
        rationale=(
            "A prompt template rendered without a value for one of its variables leaves "
            "`{{topic}}` in the thread; the model learns to expect or write template "
            "syntax. Converters list such variables in `meta.missing_variables`. "
            "Placeholders inside code blocks and inline code are not reported."
        ),
        bad=[thread(user("Write a story about {{topic}}."), assistant("Once upon a time..."))],
        good=[thread(user("Write a story about a lighthouse."), assistant("Once upon a time..."))],
        check=unrendered_placeholders,
    ),
]
