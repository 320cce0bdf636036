"""Gemini `generateContent` records, as Vertex AI tuning JSONL and Gemini API batch input
use them: `contents` of {role: user|model|function, parts: [text | functionCall |
functionResponse | inlineData | fileData | executableCode | codeExecutionResult]} with
`thought` parts and `thoughtSignature`s, `systemInstruction` ({parts}) and `tools`
([{functionDeclarations: [...]}]); camelCase or snake_case keys. A batch input line
(`{key, request: {...}}`) is read through its `request`.

Example: Gemini contents and the thread they become (`model` is the assistant).

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> request = {"contents": [
...     {"role": "user", "parts": [{"text": "Hi"}]},
...     {"role": "model", "parts": [{"text": "Hello!"}]},
... ]}
>>> [thread] = to_threads(Record("tuning.jsonl", "tuning.jsonl:1", request), ConvertOptions())
>>> [(m.role, m.content) for m in thread.messages]
[('user', 'Hi'), ('assistant', 'Hello!')]
"""

from __future__ import annotations

from typing import Any

from pipeline.capabilities import ToolSpec
from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import (
    ThreadBuilder,
    a_json_kind,
    canonical_json,
    joined,
    json_kind,
    source_thread_id,
    tool_specs,
    turn_list,
)
from pipeline.formats.media import gemini_payload
from pipeline.mms import Media, Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "gemini"
ROLES = ("user", "model", "function")
CODE_EXECUTION = ToolSpec(
    "code_execution",
    "Gemini's built-in code execution: runs the code and returns its output.",
    {
        "type": "object",
        "properties": {"language": {"type": "string"}, "code": {"type": "string"}},
        "required": ["language", "code"],
    },
)
"""The built-in tool `executableCode` parts call; declared only when the record's tools
enable `codeExecution`."""
PART_KINDS = (
    ("text", "text"),
    ("functionCall", "function_call"),
    ("functionResponse", "function_response"),
    ("inlineData", "inline_data"),
    ("fileData", "file_data"),
    ("executableCode", "executable_code"),
    ("codeExecutionResult", "code_execution_result"),
)
"""Part payload keys (camelCase, snake_case); a part holds one of them."""
PAYLOAD_KEYS = frozenset(key for pair in PART_KINDS for key in pair)
PART_FLAGS = frozenset({"thought", "thoughtSignature", "thought_signature", "videoMetadata"})
CONSUMED = frozenset({"contents", "systemInstruction", "system_instruction", "tools", "id"})
"""Request fields the thread itself holds (the rest go to meta.extra_fields)."""
SCHEMA_TYPES = frozenset({"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"})


def _get(data: dict[str, Any], camel: str, snake: str) -> Any:
    return data.get(camel, data.get(snake))


def _unwrap(value: Any) -> tuple[Any, Any, dict[str, Any]]:
    """The request, the batch line's key (or None) and the line's other fields."""
    if isinstance(value, dict) and "contents" not in value:
        request = value.get("request")
        if isinstance(request, dict) and isinstance(request.get("contents"), list):
            rest = {k: v for k, v in value.items() if k not in ("request", "key")}
            return request, value.get("key"), rest
    return value, None, {}


def sniff(value: object) -> Sniff:
    """Sure for a `contents` list of {role, parts} (directly or in a batch `request`)."""
    body, _, _ = _unwrap(value)
    if not isinstance(body, dict):
        return Sniff(0.0, "not an object")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return Sniff(0.0, "no contents list")
    if not all(isinstance(c, dict) and isinstance(c.get("parts"), list) for c in contents):
        return Sniff(0.0, "a contents entry has no parts list")
    if body is not value:
        return Sniff(1.0, "batch request line wrapping contents of {role, parts}")
    return Sniff(1.0, "contents of {role, parts}")


def _lowercase_types(schema: Any) -> Any:
    """A Gemini (OpenAPI-style) schema with `STRING`/`OBJECT` ... types as JSON Schema's
    lowercase names, so it renders like any other schema."""
    if isinstance(schema, list):
        return [_lowercase_types(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _lowercase_types(value) for key, value in schema.items()}
    kind = schema.get("type")
    if isinstance(kind, str) and kind in SCHEMA_TYPES:
        out["type"] = kind.lower()
    return out


def _system(builder: ThreadBuilder, system: Any) -> None:
    if system is None:
        return
    if isinstance(system, dict):
        parts = system.get("parts")
        if not isinstance(parts, list):
            raise RecordRejected("missing_field", "systemInstruction.parts is not a list")
        text = "\n\n".join(
            part["text"]
            for part in parts
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    elif isinstance(system, str):
        text = system
    else:
        raise RecordRejected(
            "missing_field",
            f"systemInstruction is {a_json_kind(system)} (expected {{parts}} or a string)",
        )
    if text.strip():
        builder.developer(text)


def _tools(builder: ThreadBuilder, tools: Any) -> None:
    """Function declarations become tool specs; codeExecution declares the built-in
    code_execution tool; other built-in tools (googleSearch ...) are kept in meta."""
    if tools is None:
        return
    if not isinstance(tools, list):
        raise RecordRejected("invalid_tools", f"tools is {a_json_kind(tools)}, not a list")
    declarations = []
    for index, entry in enumerate(tools):
        if (
            isinstance(entry, dict)
            and _get(entry, "functionDeclarations", "function_declarations") is not None
        ):
            declarations.append(entry)
        elif isinstance(entry, dict) and _get(entry, "codeExecution", "code_execution") is not None:
            builder.declare_tools([CODE_EXECUTION])
        elif isinstance(entry, dict):
            builder.keep(f"tools[{index}]", entry)
            builder.note(f"tools[{index}] is a built-in tool ({', '.join(entry)}); kept in meta")
        else:
            raise RecordRejected("invalid_tools", f"tools[{index}] is not an object")
    specs = tool_specs(declarations)
    builder.declare_tools(
        ToolSpec(spec.name, spec.description, _lowercase_types(spec.parameters)) for spec in specs
    )


def _part_kind(part: dict[str, Any], where: str) -> tuple[str, Any]:
    found = [
        (camel, part[key])
        for camel, snake in PART_KINDS
        for key in dict.fromkeys((camel, snake))
        if key in part
    ]
    if len(found) != 1:
        raise RecordRejected(
            "missing_field",
            f"{where} holds {len(found)} part payloads (expected one of "
            f"{', '.join(camel for camel, _ in PART_KINDS)})",
        )
    return found[0]


def _media_kind(mime: Any) -> str:
    if isinstance(mime, str):
        major = mime.split("/", 1)[0]
        if major in ("image", "audio", "video"):
            return major
        if mime == "application/pdf":
            return "document"
    return "file"


class _Content:
    """Reads one `contents` entry's parts in order: runs of text become one message, each
    call, result and thought its own item."""

    def __init__(self, builder: ThreadBuilder, role: str, where: str):
        self.builder = builder
        self.role = role
        self.where = where
        self.pieces: list[tuple[bool, str] | Media] = []
        """(is text, piece): text pieces join as written, placeholders as paragraphs; kept
        media at their markers, nothing around them."""
        self.meta: dict[str, Any] = {}
        self.dropped_media = False

    def read(self, parts: list[Any]) -> None:
        for index, part in enumerate(parts):
            where = f"{self.where}.parts[{index}]"
            if not isinstance(part, dict):
                raise RecordRejected("missing_field", f"{where} is {a_json_kind(part)}, not a part")
            self.part(part, where)
        self.flush()

    def flush(self) -> None:
        if not self.pieces and not self.dropped_media:
            return
        text, media = self.builder.media_content(self._joined())
        if self.role == "model":
            self.builder.assistant(text, meta=self.meta, media=media)
        else:
            self.builder.user(text, meta=self.meta, media=media)
        self.pieces, self.meta, self.dropped_media = [], {}, False

    def _joined(self) -> list[str | Media]:
        """Text runs as written, placeholders as paragraphs, kept media in between."""
        runs: list[list[str | Media]] = []
        previous_text = False
        for piece in self.pieces:
            if isinstance(piece, Media):
                runs.append([piece])
                previous_text = False
                continue
            is_text, text = piece
            if is_text and previous_text and isinstance(runs[-1][-1], str):
                runs[-1][-1] += text
            elif is_text and runs and isinstance(runs[-1][-1], Media):
                runs[-1].append(text)
            else:
                runs.append([text])
            previous_text = is_text
        return joined(runs, "\n\n")

    def part(self, part: dict[str, Any], where: str) -> None:
        kind, payload = _part_kind(part, where)
        signature = _get(part, "thoughtSignature", "thought_signature")
        meta = {"thought_signature": signature} if isinstance(signature, str) else {}
        self.builder.keep_unread(part, PART_FLAGS | PAYLOAD_KEYS, where)
        if kind == "text":
            self._text(payload, part.get("thought") is True, meta, where)
        elif kind in ("inlineData", "fileData"):
            self._media(payload, part.get("videoMetadata"), where)
        elif self.role == "model" and kind in ("functionCall", "executableCode"):
            self.flush()
            self._call(kind, payload, meta, where)
        elif kind in ("functionResponse", "codeExecutionResult"):
            self.flush()
            self._result(kind, payload, meta, where)
        else:
            raise RecordRejected(
                "invalid_thread", f"{where} is a {kind} part in a {self.role} content"
            )

    def _text(self, text: Any, thought: bool, meta: dict[str, Any], where: str) -> None:
        if not isinstance(text, str):
            raise RecordRejected(
                "missing_field", f"{where}.text is {a_json_kind(text)}, not a string"
            )
        if thought and self.role == "model":
            self.flush()
            self.builder.reasoning(text, meta=meta)
            return
        self.pieces.append((True, text))
        self.meta.update(meta)

    def _media(self, payload: Any, video: Any, where: str) -> None:
        if not isinstance(payload, dict):
            raise RecordRejected("missing_field", f"{where} media is not an object")
        mime = _get(payload, "mimeType", "mime_type")
        kind = _media_kind(mime)
        found = gemini_payload(kind, payload, mime if isinstance(mime, str) and mime else None)
        if video is not None:
            self.builder.keep(f"{where}.videoMetadata", video)
        kept = self.builder.kept(kind, found)
        if isinstance(kept, Media):
            self.pieces.append(kept)
            return
        uri = _get(payload, "fileUri", "file_uri")
        if isinstance(uri, str):
            self.meta.setdefault("file_uris", []).append(uri)
        if kept is None:
            self.dropped_media = True
        else:
            self.pieces.append((False, kept))

    def _call(self, kind: str, payload: Any, meta: dict[str, Any], where: str) -> None:
        if not isinstance(payload, dict):
            raise RecordRejected("missing_field", f"{where}.{kind} is not an object")
        if kind == "executableCode":
            self.builder.tool_call(
                CODE_EXECUTION.name,
                {"language": payload.get("language"), "code": payload.get("code")},
                meta=meta,
            )
            return
        name = payload.get("name")
        if not isinstance(name, str) or not name:
            raise RecordRejected("invalid_tool_call", f"{where}.functionCall.name is missing")
        call_id = payload.get("id")
        self.builder.tool_call(
            name,
            payload.get("args"),
            call_id=call_id if isinstance(call_id, str) else None,
            meta=meta,
        )

    def _result(self, kind: str, payload: Any, meta: dict[str, Any], where: str) -> None:
        if not isinstance(payload, dict):
            raise RecordRejected("missing_field", f"{where}.{kind} is not an object")
        if kind == "codeExecutionResult":
            output = payload.get("output")
            text = output if isinstance(output, str) else ""
            outcome = payload.get("outcome")
            if outcome is not None and outcome != "OUTCOME_OK":
                meta = {**meta, "outcome": outcome}
            self.builder.tool_result(text, name=CODE_EXECUTION.name, meta=meta)
            return
        name = payload.get("name")
        response = payload.get("response")
        text = response if isinstance(response, str) else canonical_json(response)
        call_id = payload.get("id")
        self.builder.tool_result(
            text,
            call_id=call_id if isinstance(call_id, str) else None,
            name=name if isinstance(name, str) and name else None,
            meta=meta,
        )


def _contents(builder: ThreadBuilder, contents: list[Any]) -> None:
    """Append every content."""
    for index, content in enumerate(contents):
        where = f"contents[{index}]"
        if not isinstance(content, dict):
            raise RecordRejected(
                "missing_field", f"{where} is {a_json_kind(content)}, not an object"
            )
        role = content.get("role")
        if role is None:
            builder.note("a content without a role was read as the user's (the API's default)")
            role = "user"
        if role not in ROLES:
            raise RecordRejected(
                "unknown_role", f"{where}.role is {role!r} (expected user, model or function)"
            )
        parts = content.get("parts")
        if not isinstance(parts, list):
            raise RecordRejected(
                "missing_field", f"{where}.parts is {a_json_kind(parts)} (expected a list of parts)"
            )
        _Content(builder, role, where).read(parts)


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per request: systemInstruction -> developer, model parts -> assistant
    messages, tool calls and reasoning; function declarations declared."""
    value = record.value
    if not isinstance(value, dict):
        raise RecordRejected(
            "not_an_object", f"expected a generateContent request object, got {json_kind(value)}"
        )
    body, key, wrapper = _unwrap(value)
    contents = turn_list(body, "contents", "contents")
    source_id = key if key is not None else body.get("id")
    builder = ThreadBuilder(record, NAME, options, thread_id=source_thread_id(record, source_id))
    _system(builder, _get(body, "systemInstruction", "system_instruction"))
    _tools(builder, body.get("tools"))
    _contents(builder, contents)
    builder.keep_unread(body, CONSUMED if key is None else CONSUMED - {"id"})
    builder.keep_unread(wrapper)
    return [builder.build()]


FORMAT = InputFormat(
    name=NAME,
    summary="Gemini / Vertex AI generateContent records: contents of {role, parts} with "
    "functionCall, functionResponse, thoughts and media; systemInstruction; tools",
    sniff=sniff,
    to_threads=to_threads,
)
