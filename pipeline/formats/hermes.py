"""NousResearch Hermes function calling: tools declared as `<tools>[...]</tools>` in the
system prompt, calls written as `<tool_call>{"name": ..., "arguments": ...}</tool_call>`
in assistant text, results as `<tool_response>...</tool_response>` in tool (or user)
turns. Read from ShareGPT-shaped records (`conversations` of {from, value}, as in
NousResearch/hermes-function-calling-v1, or {role, content} messages) and from raw
transcripts (a `text` or `example` string, or a bare string, of ChatML
`<|im_start|>role ... <|im_end|>` turns or SYSTEM:/USER:/ASSISTANT: lines, possibly in a
``` fence). The datasets often write the JSON as Python literals (single quotes); those
are parsed as literals, never run.

Example: a conversation with a tool call and its result, and the thread it becomes
(each message's role, format or name, and first line).

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> tools = "[{'type': 'function', 'function': {'name': 'get_time', 'parameters': {}}}]"
>>> record = {"conversations": [
...     {"from": "system", "value": f"<tools>{tools}</tools>"},
...     {"from": "human", "value": "What time is it?"},
...     {"from": "gpt", "value": "<tool_call>{'name': 'get_time', 'arguments': {}}</tool_call>"},
...     {"from": "tool", "value": "<tool_response>{'time': '09:30'}</tool_response>"},
...     {"from": "gpt", "value": "It is 09:30."},
... ]}
>>> [thread] = to_threads(Record("calls.json", "calls.json#0", record), ConvertOptions())
>>> for m in thread.messages:
...     print(m.role, m.format or m.name or "-", m.content.splitlines()[0])
developer - # Available tools
user - What time is it?
assistant get_time:json {}
context get_time {'time': '09:30'}
assistant markdown It is 09:30.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import orjson

from pipeline.capabilities import ToolDefinitionError, parse_tool_definitions
from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import (
    ThreadBuilder,
    a_json_kind,
    canonical_json,
    json_kind,
    source_thread_id,
)
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "hermes"
ROLE_NAMES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}
"""Speaker names of ShareGPT turns, ChatML headers and SYSTEM:/USER: markers."""
TURN_LISTS = ("conversations", "messages")
TRANSCRIPT_FIELDS = ("text", "example")
HERMES_TAG = re.compile(r"</?(?:tools|tool_call|tool_response)>")
CHATML_START = "<|im_start|>"
CHATML_END = "<|im_end|>"
PLAIN_MARKER = re.compile(r"^(SYSTEM|USER|ASSISTANT|TOOL):[ \t]*", re.MULTILINE)
FENCED = re.compile(r"\A\s*```[^\n]*\n(.*?)\n?```\s*\Z", re.DOTALL)
TOOLS_BLOCK = re.compile(r"<tools>((?:(?!<tools>).)*?)</tools>", re.DOTALL)
TEMPLATE_BLOCK = re.compile(
    r"<(?:tool_call|tool_response)>((?:(?!</?tool_).)*?)</tool_\w+>", re.DOTALL
)
THINK = re.compile(r"\A\s*<think>(.*?)</think>", re.DOTALL)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
REMOVED = "\x00"
"""Stands for a removed block while the system prompt's tool instructions are cut."""


def _tag_pattern(tag: str) -> re.Pattern[str]:
    """`<tag>body</tag>`; an unclosed tag runs to the next one or to the end."""
    return re.compile(rf"<{tag}>(.*?)(</{tag}>|(?=<{tag}>)|\Z)", re.DOTALL)


TOOL_CALL = _tag_pattern("tool_call")
TOOL_RESPONSE = _tag_pattern("tool_response")


# ----------------------------------------------------------------------------- sniff


def _is_transcript(text: Any) -> bool:
    return isinstance(text, str) and (CHATML_START in text or PLAIN_MARKER.search(text) is not None)


def _turn_list(value: dict[str, Any]) -> list[Any] | None:
    for key in TURN_LISTS:
        turns = value.get(key)
        if isinstance(turns, list) and turns and all(isinstance(t, dict) for t in turns):
            return turns
    return None


def sniff(value: object) -> Sniff:
    """Sure for chat turns or a ChatML / SYSTEM:-USER: transcript holding Hermes
    <tools>, <tool_call> or <tool_response> tags; not Hermes without the tags."""
    if _is_transcript(value):
        return _tagged(str(value), "a transcript")
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object or a transcript string")
    turns = _turn_list(value)
    if turns is not None:
        texts = [t.get("value", t.get("content")) for t in turns]
        return _tagged("\n".join(t for t in texts if isinstance(t, str)), "chat turns")
    for key in TRANSCRIPT_FIELDS:
        if _is_transcript(value.get(key)):
            return _tagged(value[key], f"a {key} transcript")
    return Sniff(0.0, "no chat turns or ChatML / SYSTEM:-USER: transcript")


def _tagged(text: str, what: str) -> Sniff:
    if HERMES_TAG.search(text):
        return Sniff(1.0, f"{what} with Hermes <tools>/<tool_call>/<tool_response> tags")
    return Sniff(0.0, f"{what} without Hermes tool tags")


# ----------------------------------------------------------------------------- turns


def _role(name: Any, where: str) -> str:
    role = ROLE_NAMES.get(name.lower()) if isinstance(name, str) else None
    if role is None:
        raise RecordRejected(
            "unknown_role",
            f"{where} is {name!r} (expected system, human/user, gpt/assistant or tool)",
        )
    return role


def _list_turns(builder: ThreadBuilder, turns: list[Any], key: str) -> list[tuple[str, str, str]]:
    out = []
    for index, turn in enumerate(turns):
        where = f"{key}[{index}]"
        if not isinstance(turn, dict):
            raise RecordRejected("missing_field", f"{where} is {a_json_kind(turn)}, not an object")
        speaker, text_key = ("from", "value") if "from" in turn else ("role", "content")
        text = turn.get(text_key)
        if not isinstance(text, str):
            raise RecordRejected(
                "missing_field", f"{where}.{text_key} is {a_json_kind(text)}, not a string"
            )
        out.append((_role(turn.get(speaker), f"{where}.{speaker}"), text, where))
        builder.keep_unread(turn, (speaker, text_key), where)
    return out


def _transcript_turns(text: str, where: str) -> list[tuple[str, str, str]]:
    """(role, text, where) for each turn of a ChatML or SYSTEM:/USER:/ASSISTANT: text."""
    fenced = FENCED.match(text)
    if fenced:
        text = fenced.group(1)
    if CHATML_START in text:
        return _chatml_turns(text, where)
    pieces = PLAIN_MARKER.split(text)
    if pieces[0].strip():
        raise RecordRejected(
            "missing_field",
            f"{where} has text before its first SYSTEM:/USER:/ASSISTANT: marker: "
            f"{pieces[0].strip()[:60]!r}",
        )
    return [
        (_role(marker, f"{where} marker {marker}:"), body.strip(), f"{where} turn {n}")
        for n, (marker, body) in enumerate(zip(pieces[1::2], pieces[2::2], strict=True))
    ]


def _chatml_turns(text: str, where: str) -> list[tuple[str, str, str]]:
    chunks = text.split(CHATML_START)
    if chunks[0].strip():
        raise RecordRejected(
            "missing_field",
            f"{where} has text before its first <|im_start|>: {chunks[0].strip()[:60]!r}",
        )
    turns = []
    for n, chunk in enumerate(chunks[1:]):
        header, _, rest = chunk.partition("\n")
        body, closed, after = rest.partition(CHATML_END)
        if after.strip():
            raise RecordRejected(
                "missing_field",
                f"{where} turn {n} has text after <|im_end|>: {after.strip()[:60]!r}",
            )
        if not closed and n < len(chunks) - 2:
            raise RecordRejected("missing_field", f"{where} turn {n} has no <|im_end|>")
        turns.append(
            (_role(header.strip(), f"{where} turn {n} role"), body.strip(), f"{where} turn {n}")
        )
    return turns


def _record_turns(builder: ThreadBuilder, value: Any) -> list[tuple[str, str, str]]:
    """The record's turns; its other fields (but `id`) are kept in meta."""
    if isinstance(value, str):
        return _transcript_turns(value, "the record")
    if not isinstance(value, dict):
        raise RecordRejected(
            "not_an_object", f"expected chat turns or a transcript string, got {json_kind(value)}"
        )
    key = next((k for k in TURN_LISTS if isinstance(value.get(k), list)), None)
    if key is not None:
        turns = _list_turns(builder, value[key], key)
    else:
        key = next((k for k in TRANSCRIPT_FIELDS if isinstance(value.get(k), str)), None)
        if key is None:
            raise RecordRejected(
                "missing_field",
                "the record has no conversations/messages list and no text/example transcript",
            )
        turns = _transcript_turns(value[key], key)
    builder.keep_unread(value, (key, "id"))
    return turns


# ----------------------------------------------------------------------------- JSON


def _literal(text: str) -> tuple[Any, bool]:
    """One JSON value, else one Python literal (parsed, never run); the flag says which."""
    try:
        return orjson.loads(text), False
    except orjson.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text), True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ValueError(f"neither JSON nor a Python literal: {text.strip()[:80]!r}") from None


def _values(text: str) -> tuple[list[Any], bool]:
    """A `<tools>` body: one list or object, or several objects one after another."""
    try:
        value, python = _literal(text)
    except ValueError:
        decoder = json.JSONDecoder()
        values, position = [], 0
        stripped = text.strip()
        while position < len(stripped):
            try:
                value, position = decoder.raw_decode(stripped, position)
            except json.JSONDecodeError:
                raise ValueError(f"not JSON: {stripped[:80]!r}") from None
            values.append(value)
            while position < len(stripped) and stripped[position] in " \t\r\n,":
                position += 1
        return values, False
    return (value if isinstance(value, list) else [value]), python


# ----------------------------------------------------------------------------- system


def _cut_function_call_schema(text: str) -> str:
    """The pydantic `FunctionCall` schema the Hermes prompt shows, replaced by REMOVED."""
    decoder = json.JSONDecoder()
    position = text.find("{")
    while position != -1 and '"FunctionCall"' in text:
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict) and value.get("title") == "FunctionCall":
            text = text[:position] + REMOVED + text[end:]
            position = text.find("{", position + 1)
        else:
            position = text.find("{", end)
    return text


def _cut_line(line: str) -> tuple[str, int]:
    """A line without the sentences about the Hermes tags and the intros of removed
    blocks (a sentence ending in `:` right before one); returns it and how many
    sentences were cut."""
    segments = line.split(REMOVED)
    kept: list[str] = []
    cut = 0
    for index, segment in enumerate(segments):
        sentences = [s for s in SENTENCE_END.split(segment.strip()) if s]
        before_block = index < len(segments) - 1
        for position, sentence in enumerate(sentences):
            intro = before_block and position == len(sentences) - 1 and sentence.endswith(":")
            if intro or HERMES_TAG.search(sentence):
                cut += 1
            else:
                kept.append(sentence)
    return " ".join(kept), cut


def _cut_blocks(pattern: re.Pattern[str], text: str) -> tuple[str, int]:
    """`text` with every non-empty block of `pattern` replaced by REMOVED (empty ones,
    like `<tools></tools>` in a sentence, are mentions and stay), and how many."""
    count = 0

    def cut(match: re.Match[str]) -> str:
        nonlocal count
        if not match.group(1).strip():
            return match.group(0)
        count += 1
        return REMOVED

    return pattern.sub(cut, text), count


def _cut_tool_prompt(text: str) -> tuple[str, list[str]]:
    """The system prompt without its Hermes tool prompt (`<tools>` blocks, `<tool_call>`
    templates, the FunctionCall schema, sentences about the tags), and what was cut."""
    cut_text, tools = _cut_blocks(TOOLS_BLOCK, text)
    cut_text, templates = _cut_blocks(TEMPLATE_BLOCK, cut_text)
    schemas = cut_text.count(REMOVED)
    cut_text = _cut_function_call_schema(cut_text)
    schemas = cut_text.count(REMOVED) - schemas
    lines, sentences = [], 0
    for line in cut_text.split("\n"):
        if REMOVED not in line and not HERMES_TAG.search(line):
            lines.append(line)
            continue
        kept, count = _cut_line(line)
        sentences += count
        if kept:
            lines.append(kept)
    what = [f"{tools} <tools> block(s), declared as tools instead"] if tools else []
    what += [f"{templates} <tool_call> template(s)"] if templates else []
    what += ["the FunctionCall JSON schema"] if schemas else []
    what += [f"{sentences} sentence(s) about the tool tags"] if sentences else []
    if not what:
        return text, []
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip(), what


def _system(builder: ThreadBuilder, text: str, where: str) -> None:
    """Tools in `<tools>` blocks are declared and the tool prompt is cut (the original
    is kept in meta); the rest becomes a developer message."""
    for block in TOOLS_BLOCK.findall(text):
        _declare(builder, block, where)
    prompt, what = _cut_tool_prompt(text)
    if what:
        builder.keep(f"{where} original system prompt", text)
        builder.note(
            f"cut the Hermes tool prompt from {where}: {'; '.join(what)} "
            "(the original is in meta.extra_fields)"
        )
    if prompt:
        builder.developer(prompt)


def _declare(builder: ThreadBuilder, block: str, where: str) -> None:
    if not block.strip():
        return
    try:
        values, python = _values(block)
        builder.declare_tools(parse_tool_definitions(values))
    except (ValueError, ToolDefinitionError) as err:
        raise RecordRejected("invalid_tools", f"{where} <tools> block: {err}") from None
    if python:
        builder.note("read Python-literal (single-quoted) tool definitions")


# ----------------------------------------------------------------------------- turns


def _assistant(builder: ThreadBuilder, text: str, where: str) -> None:
    """Reasoning in a leading <think>, then text and <tool_call>s in order."""
    think = THINK.match(text)
    if think:
        builder.reasoning(think.group(1).strip())
        text = text[think.end() :]
    position = 0
    for number, match in enumerate(TOOL_CALL.finditer(text)):
        before = text[position : match.start()].strip()
        if before:
            builder.assistant(before)
        if not match.group(2):
            builder.note(f"{where}: an unclosed <tool_call> was read to the end of its body")
        _call(builder, match.group(1), f"{where} <tool_call> #{number + 1}")
        position = match.end()
    rest = text[position:].strip()
    if rest:
        builder.assistant(rest)
    elif position == 0 and not think:
        builder.note(f"{where} is an empty assistant turn; left out")


def _call(builder: ThreadBuilder, body: str, where: str) -> None:
    try:
        value, python = _literal(body.strip())
    except ValueError as err:
        raise RecordRejected("invalid_tool_call", f"{where} is not a JSON object: {err}") from None
    name = value.get("name") if isinstance(value, dict) else None
    if not isinstance(name, str) or not name:
        raise RecordRejected(
            "invalid_tool_call", f"{where} has no string name: {body.strip()[:80]!r}"
        )
    if python:
        builder.note("read Python-literal (single-quoted) tool calls")
    extra = {k: v for k, v in value.items() if k not in ("name", "arguments")}
    builder.tool_call(name, value.get("arguments"), meta={"call_fields": extra} if extra else None)


def _results(builder: ThreadBuilder, text: str, role: str) -> None:
    """<tool_response> blocks as tool results, text around them in order (a user's
    words as a user message; a tool turn's untagged text as one result)."""
    if not TOOL_RESPONSE.search(text):
        if role == "user":
            builder.user(text)
        else:
            _result(builder, text.strip())
        return
    position = 0
    for match in TOOL_RESPONSE.finditer(text):
        _text_between(builder, text[position : match.start()], role)
        _result(builder, match.group(1).strip())
        position = match.end()
    _text_between(builder, text[position:], role)


def _text_between(builder: ThreadBuilder, text: str, role: str) -> None:
    text = text.strip()
    if not text:
        return
    if role == "user":
        builder.user(text)
    else:
        builder.note("a tool turn holds text outside its <tool_response> tags; kept as context")
        builder.context(text)


def _result(builder: ThreadBuilder, body: str) -> None:
    """A result body: `{name, content}` JSON gives the tool and the content, any other
    body is the content as written."""
    try:
        value, _ = _literal(body)
    except ValueError:
        builder.tool_result(body)
        return
    if isinstance(value, dict) and "content" in value:
        content = value["content"]
        name = value.get("name")
        builder.tool_result(
            content if isinstance(content, str) else canonical_json(content),
            name=name if isinstance(name, str) and name else None,
        )
        return
    builder.tool_result(body)


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per conversation: system prompt -> developer (tool prompt cut, tools
    declared), <tool_call>s -> tool calls, <tool_response>s -> context."""
    value = record.value
    source_id = value.get("id") if isinstance(value, dict) else None
    builder = ThreadBuilder(record, NAME, options, thread_id=source_thread_id(record, source_id))
    turns = _record_turns(builder, value)
    if not turns:
        raise RecordRejected("empty_conversation", "the record holds no turns")
    for role, text, where in turns:
        if role == "system":
            _system(builder, text, where)
        elif role == "assistant":
            _assistant(builder, text, where)
        else:
            _results(builder, text, role)
    return [builder.build()]


FORMAT = InputFormat(
    name=NAME,
    summary="NousResearch Hermes function calling: <tools>, <tool_call>, <tool_response> tags "
    "in ShareGPT turns or ChatML / SYSTEM:-USER:-ASSISTANT: transcripts",
    sniff=sniff,
    to_threads=to_threads,
)
