"""MMS threads written as Harmony transcripts (`thread_to_harmony`), in the layout of the
openai/harmony renderer, so that reading the text back (this package) gives the thread
again.

platform -> `system`; developer -> `developer` with `# Instructions`; the thread's tools
(settings' `name:json` formats, `meta.tool_schemas`, `meta.tool_descriptions`) ->
the first developer message's `# Tools` section, `namespace functions { ... }`, except the
namespaces a platform message declares itself (built-in tools); the converter's own
declaration message (`meta.declaration`) is left out, Harmony declares tools its own way.
reasoning -> `analysis`; a call `x:json` -> `to=functions.x` on `commentary` with
`<|constrain|>json`, closed by `<|call|>` (an `x:jsonl` message: one call per line); a
context message named `x` -> `functions.x to=assistant`; an answer -> `final`, closed by
`<|return|>` when it ends a thread that is not prompt-only, which ends with
`<|start|>assistant`. Header deviations kept from a Harmony source (message meta
`harmony`) are written back. Weights and `end_turn` have no Harmony form.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pipeline.dedup.keys import DECLARATION_META
from pipeline.formats.harmony.mapping import Kind, canonical_header, header_for, writable
from pipeline.formats.harmony.threads import (
    GENERATION_PROMPT,
    INSTRUCTIONS,
    PLAIN_DEVELOPER,
    default_namespaces,
)
from pipeline.formats.harmony.tools import (
    Namespace,
    declared_namespaces,
    namespace_of,
    write_tools_section,
)
from pipeline.formats.harmony.transcript import (
    CALL,
    CONSTRAIN,
    END,
    RETURN,
    START,
    STRUCTURAL,
    Header,
    format_header,
    format_message,
    parse_header,
)
from pipeline.formats.harmony.ts_schema import Declared
from pipeline.mms import DEFAULT_FORMAT, Message, Thread
from pipeline.quarantine import RecordRejected

LEADING_ROLES = ("platform", "developer")
DECLARABLE = re.compile(r"[A-Za-z_$][\w$\-]*")
"""A name `type name = ...` and `namespace name {` can hold."""
TOOL_SAMPLERS = ("json", "jsonl")


class HarmonyRenderError(ValueError):
    """A thread that has no Harmony form (the message at fault is named)."""


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _tools(thread: Thread) -> list[Declared]:
    """The thread's declared tools, in declaration order: the `name:json` formats of its
    settings that halt on completion, then any other tool with a schema in meta."""
    names = [
        f.name.removesuffix(":json")
        for f in (thread.settings.formats if thread.settings else ())
        if f.name.endswith(":json") and f.halt_on_completion
    ]
    schemas = _mapping(thread.meta.get("tool_schemas"))
    names += [name for name in schemas if name not in names]
    descriptions = _mapping(thread.meta.get("tool_descriptions"))
    return [
        Declared(
            name,
            descriptions.get(name) if isinstance(descriptions.get(name), str) else None,
            schemas.get(name) if isinstance(schemas.get(name), dict) else None,
        )
        for name in names
    ]


def _namespaces(thread: Thread) -> list[Namespace]:
    """The developer's tool namespaces: those kept from a Harmony source first (with
    their descriptions), then the others the tools' names imply; without the namespaces
    a platform message declares."""
    builtin = set().union(
        *(declared_namespaces(m.content) for m in thread.messages if m.role == "platform")
    )
    tools = [tool for tool in _tools(thread) if namespace_of(tool.name) not in builtin]
    kept = _mapping(thread.meta.get("harmony")).get("namespaces")
    listed = [
        Namespace(entry["name"], entry.get("description"))
        for entry in (kept if isinstance(kept, list) else [])
        if isinstance(entry, dict) and isinstance(entry.get("name"), str)
    ]
    implied = default_namespaces([tool.name for tool in tools])
    names = [space.name for space in listed]
    spaces = listed + [space for space in implied if space.name not in names]
    return [
        Namespace(
            space.name,
            space.description if isinstance(space.description, str) else None,
            tuple(
                Declared(
                    tool.name.partition(".")[2] or tool.name, tool.description, tool.parameters
                )
                for tool in tools
                if namespace_of(tool.name) == space.name
            ),
        )
        for space in spaces
    ]


def _declaration(thread: Thread) -> int | None:
    """The index of the converter's declaration message (`meta.declaration`), if any."""
    declared = _mapping(thread.meta.get(DECLARATION_META)).get("message")
    messages = thread.messages
    if isinstance(declared, int) and 0 <= declared < len(messages):
        return declared if messages[declared].role == "developer" else None
    return None


def _declarable(spaces: list[Namespace]) -> list[Namespace]:
    """The namespaces, when every name in them can be written in Harmony TypeScript."""
    for space in spaces:
        for name in (space.name, *(tool.name for tool in space.tools)):
            if not DECLARABLE.fullmatch(name):
                raise HarmonyRenderError(
                    f"tool {name!r} cannot be declared in a Harmony namespace "
                    "(a name of letters, digits, `_`, `$` and `-`)"
                )
    return spaces


def _tools_home(thread: Thread, declaration: int | None) -> tuple[int | None, int]:
    """Where the `# Tools` section goes: the developer message just before the
    declaration (or before the first message past the leading platform and developer
    ones), else a developer message of its own written at that place."""
    messages = thread.messages
    anchor = declaration
    if anchor is None:
        anchor = next(
            (i for i, m in enumerate(messages) if m.role not in LEADING_ROLES), len(messages)
        )
    before = anchor - 1
    if before >= 0 and messages[before].role == "developer":
        return before, anchor
    return None, anchor


def _kind(message: Message, where: str) -> tuple[Kind, str]:
    """The message's kind, and for a call the sampler of its format; HarmonyRenderError
    for a message with media (a Harmony transcript is text)."""
    if message.media:
        raise HarmonyRenderError(
            f"{where} holds {len(message.media)} media (images, audio, video): a Harmony "
            "transcript holds text only"
        )
    if message.role in ("platform", "developer", "user"):
        return Kind(message.role), ""
    if message.role == "context":
        if not message.name:
            raise HarmonyRenderError(
                f"{where} is a context message without a name: Harmony has no unnamed tool "
                "(a tool's message is signed with its name)"
            )
        return Kind("result", message.name), ""
    fmt = message.format or DEFAULT_FORMAT
    if fmt == "reasoning":
        return Kind("reasoning"), ""
    tool, colon, sampler = fmt.rpartition(":")
    if colon and tool:
        return Kind("call", tool), sampler
    return Kind("answer", fmt), ""


def _checked(header_kind: Kind, kept: Any, where: str) -> Header:
    """The header to write, or HarmonyRenderError when a name in it cannot be written."""
    header = header_for(header_kind, kept)
    if not writable(header):
        raise HarmonyRenderError(
            f"{where}: {header_kind.name!r} cannot be written in a Harmony header "
            "(it holds blank space or a special token)"
        )
    return header


def _content(text: str, where: str) -> str:
    """The content as it is; HarmonyRenderError when it holds a token that ends a message."""
    for token in STRUCTURAL:
        if token in text:
            raise HarmonyRenderError(
                f"{where}: its content holds {token}, which would end the message early"
            )
    return text


def _developer_text(message: Message, kept: dict[str, Any], section: str) -> str:
    """A developer message: `# Instructions` and the text (unless the source had plain
    text), then the `# Tools` section when it carries it."""
    text = message.content
    if kept.get(PLAIN_DEVELOPER) is not False:
        text = INSTRUCTIONS + text
    if section:
        return f"{text}\n\n{section}" if text else section
    return text


def _messages(thread: Thread) -> Iterator[str]:
    """Each message of the thread as Harmony text, in order."""
    spaces = _declarable(_namespaces(thread))
    section = write_tools_section(spaces) if spaces else ""
    skipped = _declaration(thread)
    host, anchor = _tools_home(thread, skipped)
    kept_meta = _mapping(thread.meta.get("message_meta"))
    final = len(thread.messages) - 1
    prompt_only = thread.meta.get("prompt_only") is True
    for index, message in enumerate(thread.messages):
        if index == anchor and host is None and section:
            yield format_message(canonical_header(Kind("developer")), section, END)
        if index == skipped:
            continue
        where = f"message {index} ({message.role})"
        kept = _mapping(_mapping(kept_meta.get(str(index))).get("harmony"))
        kind, sampler = _kind(message, where)
        header = _checked(kind, kept, where)
        if kind.kind == "developer":
            text = _developer_text(message, kept, section if index == host else "")
            yield format_message(header, _content(text, where), END)
        elif kind.kind == "call":
            calls = message.content.split("\n") if sampler == "jsonl" else [message.content]
            if sampler not in TOOL_SAMPLERS:
                header = _checked(kind, {"content_type": CONSTRAIN + sampler}, where)
            for call in calls:
                yield format_message(header, _content(call, where), CALL)
        else:
            last_answer = kind.kind == "answer" and index == final and not prompt_only
            yield format_message(
                header, _content(message.content, where), RETURN if last_answer else END
            )
    if anchor == len(thread.messages) and host is None and section:
        yield format_message(canonical_header(Kind("developer")), section, END)


def _generation_prompt(thread: Thread) -> str:
    """The closing `<|start|>assistant` (or the prompt header kept from the source)."""
    kept = _mapping(thread.meta.get("harmony")).get("generation_prompt")
    if isinstance(kept, str):
        try:
            header = parse_header(kept, "generation prompt")
        except RecordRejected:
            return START + GENERATION_PROMPT
        if header.role == "assistant" and writable(header) and format_header(header) == kept:
            return START + kept
    return START + GENERATION_PROMPT


def thread_to_harmony(thread: Thread) -> str:
    """The thread as one Harmony transcript; raises HarmonyRenderError for a thread Harmony
    cannot hold (an unnamed context message, content holding `<|end|>` and the like)."""
    text = "".join(_messages(thread))
    if thread.meta.get("prompt_only") is True:
        text += _generation_prompt(thread)
    return text
