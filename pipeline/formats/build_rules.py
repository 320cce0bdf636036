"""The mapping rules every format shares (DESIGN §3, §5), applied by `ThreadBuilder.build()`
(pipeline/formats/builder.py) to the messages an adapter added, in the making (`Item`):
tool results named after their call, parallel calls sequenced (or written as JSONL),
`end_turn` decided, and the developer declaration and settings that enable the tools,
the reasoning and the response format. What the rules find lossy goes to `note`
(`meta.notes`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.capabilities import ToolSpec, enabled_formats, tool_format
from pipeline.dedup.keys import declaration_key
from pipeline.formats.record_values import canonical_json
from pipeline.formats.tool_prompt import (
    reasoning_declaration,
    response_format_declaration,
    tool_declaration,
)
from pipeline.mms import Format, Media, Message, SystemSettings
from pipeline.quarantine import RecordRejected

REASONING_FORMAT = "reasoning"
ENDS_A_TURN = frozenset({"user", "developer", "platform"})

Note = Callable[[str], None]
"""Where a rule records something lossy or surprising (`ThreadBuilder.note`)."""


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """The format a prompt expects its answer in, with its schema or allowed answers."""

    name: str
    schema: Any = None
    allowed_values: tuple[str, ...] = ()


@dataclass(slots=True)
class Item:
    """One message in the making. kind: text | reasoning | call | result."""

    kind: str
    role: str
    content: str
    format: str | None = None
    name: str | None = None
    call_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    answers: int | None = None
    """For a result: the index (in the item list) of the call it answers."""
    weight: float | None = None
    """For an assistant item: the source's training weight (None: the default)."""
    media: tuple[Media, ...] = ()
    """The message's media, each at a U+FFFC marker of `content`."""


def match_results(items: list[Item], note: Note) -> None:
    """Name every result after the call it answers; a result for a call id no earlier
    call has is an error."""
    by_id: dict[str, int] = {}
    pending: list[int] = []
    for index, item in enumerate(items):
        if item.kind == "call":
            if item.call_id is not None:
                by_id[item.call_id] = index
            pending.append(index)
            continue
        if item.kind != "result":
            continue
        if item.call_id is not None:
            if item.call_id not in by_id:
                raise RecordRejected(
                    "unknown_tool_call",
                    f"tool result for unknown call id {item.call_id}"
                    + (f" (tool {item.name!r})" if item.name else ""),
                )
            answered: int | None = by_id[item.call_id]
        else:
            answered = next(
                (i for i in pending if item.name is None or items[i].name == item.name), None
            )
        if answered is None:
            if item.name is None:
                note("a tool result follows no tool call; kept as an unnamed context message")
            continue
        call_name = items[answered].name
        if item.name is not None and item.name != call_name:
            note(
                f"tool result named {item.name!r} answers a call of {call_name!r}; named it {call_name!r}"
            )
        item.name = call_name
        item.answers = answered
        if answered in pending:
            pending.remove(answered)


def note_undeclared_calls(items: list[Item], tools: Sequence[ToolSpec], note: Note) -> None:
    """Note each tool called that the source never declares (left for MMS201, never
    declared on the source's behalf)."""
    declared = {tool.name for tool in tools}
    called = dict.fromkeys(item.name for item in items if item.kind == "call")
    for name in called:
        if name not in declared:
            note(
                f"tool {name!r} is called but the source never declares it; its calls are "
                "not enabled by any developer message"
            )


def order_parallel_calls(items: list[Item], jsonl: bool, note: Note) -> list[Item]:
    """Runs of calls followed by their results: sequence them (call1, result1, call2,
    result2) or, with `parallel_calls: jsonl`, merge each tool's calls into one
    `name:jsonl` message."""
    ordered: list[Item] = []
    index = 0
    while index < len(items):
        end = index
        while end < len(items) and items[end].kind == "call":
            end += 1
        if end - index < 2:
            ordered.append(items[index])
            index += 1
            continue
        results_end = end
        while results_end < len(items) and items[results_end].kind == "result":
            results_end += 1
        calls, results = items[index:end], items[end:results_end]
        if jsonl:
            ordered.extend(_jsonl_calls(calls))
            ordered.extend(results)
        else:
            ordered.extend(_sequenced(range(index, end), items, results, note))
        index = results_end
    return ordered


def _sequenced(
    call_indexes: range, items: list[Item], results: list[Item], note: Note
) -> list[Item]:
    """Each call of a run followed by its results; results that answer none after them."""
    out: list[Item] = []
    for call_index in call_indexes:
        out.append(items[call_index])
        out.extend(r for r in results if r.answers == call_index)
    out.extend(r for r in results if r.answers not in call_indexes)
    if any(r.answers in call_indexes for r in results):
        note(f"sequenced {len(call_indexes)} parallel tool calls with their results")
    return out


def _jsonl_calls(calls: list[Item]) -> list[Item]:
    """A run's consecutive calls of one tool (and one weight) merged into one JSONL call."""
    merged: list[Item] = []
    for call in calls:
        last = merged[-1] if merged else None
        if last is not None and last.name == call.name and last.weight == call.weight:
            last.content += "\n" + call.content
            if call.call_id is not None:
                last.meta.setdefault("tool_call_ids", []).append(call.call_id)
            continue
        assert call.name is not None  # a call names its tool (tool_call)
        meta = {k: v for k, v in call.meta.items() if k != "tool_call_id"}
        if call.call_id is not None:
            meta["tool_call_ids"] = [call.call_id]
        merged.append(
            Item(
                "call",
                "assistant",
                call.content,
                tool_format(call.name, "jsonl"),
                name=call.name,
                meta=meta,
                weight=call.weight,
            )
        )
    return merged


def message_of(item: Item, following: Item | None, note: Note) -> Message:
    """The MMS message of an item: an assistant text ends its turn when the thread ends
    or a user, developer or platform message follows; a call or reasoning never does."""
    if item.role == "assistant":
        if item.kind == "text":
            end_turn = following is None or following.role in ENDS_A_TURN
        else:
            end_turn = False
        return Message.assistant(
            item.content,
            format=item.format or "markdown",
            end_turn=end_turn,
            weight=item.weight,
            media=item.media,
        )
    if item.role == "context":
        if item.name == "":
            note("a tool result has an empty name; read as no name")
        return Message.context(item.content, item.name or None, media=item.media)
    return Message(item.role, item.content, media=item.media)  # type: ignore[arg-type]


def uses_reasoning(items: list[Item]) -> bool:
    """Whether the thread holds the assistant's reasoning (a format to enable)."""
    return any(item.kind == "reasoning" for item in items)


def declaration(
    items: list[Item],
    tools: Sequence[ToolSpec],
    response: ResponseFormat | None,
    seed: str,
    jsonl: bool,
) -> tuple[str, str | None]:
    """The developer message the converter writes (tools, reasoning, the response format),
    worded by `seed` (the thread's group, else its id), and the key of what it declares
    (for dedup)."""
    parts, declared = [], []
    if tools:
        parts.append(tool_declaration(list(tools), seed, jsonl=jsonl))
        ordered = sorted(tools, key=lambda t: t.name)
        declared.append(["tools", jsonl, [[t.name, t.description, t.parameters] for t in ordered]])
    if uses_reasoning(items):
        parts.append(reasoning_declaration(seed))
        declared.append(["reasoning"])
    if response is not None and not _enabled_by_developer(items, response.name):
        parts.append(
            response_format_declaration(
                response.name,
                seed,
                schema=response.schema,
                allowed_values=response.allowed_values,
            )
        )
        declared.append(["response", response.name, response.schema, list(response.allowed_values)])
    return "\n\n".join(parts), declaration_key(canonical_json(declared)) if declared else None


def _enabled_by_developer(items: list[Item], format_name: str) -> bool:
    """Whether a developer or platform message before the first assistant message
    already enables `format_name` as an inline code span."""
    for item in items:
        if item.role == "assistant":
            return False
        if item.role in ("developer", "platform") and format_name in enabled_formats(item.content):
            return True
    return False


def system_settings(
    items: list[Item], tools: Sequence[ToolSpec], jsonl: bool
) -> SystemSettings | None:
    """The thread's settings: each tool's call format (and its JSONL form), reasoning."""
    formats: list[Format] = []
    for tool in tools:
        formats.append(Format(tool.call_format, halt_on_completion=True, sampler="json"))
        if jsonl:
            formats.append(
                Format(tool_format(tool.name, "jsonl"), halt_on_completion=True, sampler="jsonl")
            )
    if uses_reasoning(items):
        formats.append(Format(REASONING_FORMAT))
    return SystemSettings(tuple(formats)) if formats else None
