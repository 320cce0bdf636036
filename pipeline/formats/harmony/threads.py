"""A parsed Harmony transcript as one MMS thread, through the ThreadBuilder: the system
message as the platform's, the developer's `# Instructions` as its message and its
`# Tools` namespaces (and those of the system message: built-in tools such as `browser`)
as declared tools; reasoning, answers, tool calls and results by kind (mapping.py); a
closing generation prompt makes the thread prompt-only.

Besides what the builder keeps, meta holds what writing the thread back needs:
`tool_descriptions` (each declared tool's description; `tool_schemas` has its
parameters), a message's header deviations under its message meta `harmony`, and, under
`harmony`, the developer's namespaces when they are not just the tools' own (a
namespace's description, a group without declarations) and a generation prompt other
than `<|start|>assistant`."""

from __future__ import annotations

from typing import Any

from pipeline.formats.base import ConvertOptions
from pipeline.formats.builder import ThreadBuilder
from pipeline.formats.harmony.mapping import Kind, deviations, kind_of
from pipeline.formats.harmony.tools import (
    Namespace,
    find_tools_section,
    namespace_of,
    tool_specs,
)
from pipeline.formats.harmony.transcript import (
    CALL,
    END,
    RETURN,
    START,
    HarmonyMessage,
    Transcript,
)
from pipeline.mms import DEFAULT_FORMAT, Thread
from pipeline.sources import Record

NAME = "harmony"
INSTRUCTIONS = "# Instructions\n\n"
"""How the openai/harmony renderer opens a developer message's instructions."""
PLAIN_DEVELOPER = "instructions_header"
"""Message meta `harmony` key: False when a developer message is plain text, without
the `# Instructions` heading."""
GENERATION_PROMPT = "assistant"


def default_namespaces(tools: list[str]) -> list[Namespace]:
    """The namespaces the tools' names imply, in order of first use, undescribed."""
    names = dict.fromkeys(namespace_of(tool) for tool in tools)
    return [Namespace(name, None) for name in names]


class _Reader:
    """Adds one transcript's messages to a ThreadBuilder."""

    def __init__(self, builder: ThreadBuilder):
        self.b = builder
        self.developer_spaces: list[Namespace] = []

    def message(self, message: HarmonyMessage, where: str) -> None:
        kind = kind_of(message.header)
        changed: dict[str, Any] = deviations(message.header, kind)
        content = message.content
        if kind.kind == "developer":
            developer = self._developer(content, changed, where)
            if developer is None:
                return
            content = developer
        meta = {"harmony": changed} if changed else {}
        if kind.kind == "platform":
            self._declare(content, where, developer=False)
            self.b.platform(content, meta=meta)
        elif kind.kind == "developer":
            self.b.developer(content, meta=meta)
        elif kind.kind == "user":
            self.b.user(content, meta=meta)
        elif kind.kind == "reasoning":
            self.b.reasoning(content, meta=meta)
        elif kind.kind == "call":
            self.b.tool_call(kind.name or "", content, meta=meta)
        elif kind.kind == "result":
            self.b.tool_result(content, name=kind.name, meta=meta)
        else:
            self._answer(kind, content, meta)

    def _answer(self, kind: Kind, content: str, meta: dict[str, Any]) -> None:
        fmt = kind.name or DEFAULT_FORMAT
        self.b.assistant(content, format=fmt, meta=meta)
        if fmt != DEFAULT_FORMAT:
            self.b.respond_in(fmt)

    def _developer(self, text: str, changed: dict[str, Any], where: str) -> str | None:
        """The developer's instructions (None when it only declares tools); its tools
        are declared."""
        section = self._declare(text, where, developer=True)
        if section is not None:
            text = section
        if text.startswith(INSTRUCTIONS):
            return text[len(INSTRUCTIONS) :]
        if not text and section is not None:
            return None
        changed[PLAIN_DEVELOPER] = False
        return text

    def _declare(self, text: str, where: str, *, developer: bool) -> str | None:
        """Declare the tools of the text's `# Tools` section; for a developer message,
        the text without the section (None when it has none)."""
        found = find_tools_section(text, f"{where}, # Tools section")
        if found is None:
            return None
        self.b.declare_tools(tool_specs(found.namespaces))
        if not developer:
            return None
        self.developer_spaces += found.namespaces
        return "\n\n".join(part for part in (found.before, found.after) if part)

    def finish(self, transcript: Transcript) -> None:
        """Meta for writing the thread back; prompt-only when a generation prompt ends it."""
        harmony: dict[str, Any] = {}
        spaces = [Namespace(s.name, s.description) for s in self.developer_spaces]
        tools = [tool.name for s in self.developer_spaces for tool in tool_specs([s])]
        if spaces != default_namespaces(tools):
            harmony["namespaces"] = [{"name": s.name, "description": s.description} for s in spaces]
        if transcript.prompt is not None:
            self.b.prompt_only(
                f"the transcript ends with a generation prompt ({START}{GENERATION_PROMPT}): "
                "the assistant's turn is what the model generates"
            )
            if transcript.prompt_text != GENERATION_PROMPT:
                harmony["generation_prompt"] = transcript.prompt_text
        if harmony:
            self.b.meta["harmony"] = harmony


def transcript_thread(
    record: Record,
    options: ConvertOptions,
    transcript: Transcript,
    thread_id: str,
    extras: dict[str, Any],
) -> Thread:
    """The thread of one transcript; the record's other fields go to meta.extra_fields."""
    builder = ThreadBuilder(record, NAME, options, thread_id=thread_id)
    reader = _Reader(builder)
    for number, message in enumerate(transcript.messages, 1):
        reader.message(message, f"message {number}")
    last = transcript.messages[-1] if transcript.messages else None
    if last is not None and last.closing is None:
        builder.note(
            f"message {len(transcript.messages)} has no closing token ({END}, {CALL} or "
            f"{RETURN}): read to the end of the text"
        )
    reader.finish(transcript)
    builder.keep_unread(extras)
    return builder.build()
