"""ThreadBuilder: the one place the format adapters turn conversations into MMS threads.

Adapters append what they read (system prompts, user and assistant text, reasoning, tool
calls, tool results, tool definitions) and read content through it (text, content parts,
media); `build()` applies the mapping rules every format shares (DESIGN §3, §5;
pipeline/formats/build_rules.py): tool results named after their call, parallel calls
sequenced (or written as JSONL), `end_turn` decided, tools and reasoning enabled by a
synthesized developer message and settings; and records lineage and everything lossy in
`meta`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import orjson

from pipeline.capabilities import ToolSpec, tool_format
from pipeline.dedup.keys import DECLARATION_META
from pipeline.formats.base import ConvertOptions
from pipeline.formats.build_rules import (
    REASONING_FORMAT,
    Item,
    ResponseFormat,
    declaration,
    match_results,
    message_of,
    note_undeclared_calls,
    order_parallel_calls,
    system_settings,
)
from pipeline.formats.media import PART_KINDS, anthropic_source, openai_part
from pipeline.formats.record_values import a_json_kind as a_json_kind
from pipeline.formats.record_values import canonical_json as canonical_json
from pipeline.formats.record_values import exact_json as exact_json
from pipeline.formats.record_values import json_kind as json_kind
from pipeline.formats.record_values import tool_specs as tool_specs
from pipeline.formats.record_values import turn_list as turn_list
from pipeline.mms import (
    MEDIA_MARKER,
    Media,
    Message,
    Thread,
    ThreadValidationError,
    stable_thread_id,
)
from pipeline.mms.groups import group_of
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

REPLACEMENT = "\ufffd"
"""What a literal U+FFFC in the text of a message with media is written as (DESIGN §3)."""


def joined(parts: Iterable[Sequence[str | Media]], separator: str) -> list[str | Media]:
    """Content parts in order (each a run of text and media), `separator` between two
    parts where text meets text, nothing around media.

    >>> image = Media("image", path="a.png")
    >>> pieces = joined([["Hi"], ["there"], [image], ["What is ", image]], " | ")
    >>> [p if isinstance(p, str) else p.kind for p in pieces]
    ['Hi', ' | ', 'there', 'image', 'What is ', 'image']
    """
    out: list[str | Media] = []
    for part in parts:
        if not part:
            continue
        if out and isinstance(out[-1], str) and isinstance(part[0], str):
            out.append(separator)
        out.extend(part)
    return out


def _own(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """A message's meta as the item's own dict (a copy: the caller's mapping is not
    shared, nor changed later by `build()`)."""
    return dict(meta) if meta else {}


class ThreadBuilder:
    """Collects one conversation's messages and builds the MMS thread."""

    def __init__(
        self,
        record: Record,
        source_format: str,
        options: ConvertOptions,
        *,
        thread_id: str,
        meta: dict[str, Any] | None = None,
    ):
        self.record = record
        self.options = options
        self.thread_id = thread_id
        source, locator = record.lineage
        self.meta: dict[str, Any] = {
            "source": source,
            "locator": locator,
            "source_format": source_format,
            **(meta or {}),
        }
        self.notes: list[str] = list(record.notes)
        self.extra_fields: dict[str, Any] = {}
        self.unrenderable_constructs: list[dict[str, str]] = []
        self.response_format: ResponseFormat | None = None
        self.tools: list[ToolSpec] = []
        self._items: list[Item] = []
        self._dropped_parts: Counter[str] = Counter()

    # ----------------------------------------------------------------- what adapters add

    def note(self, text: str) -> None:
        """Record something lossy or surprising about this conversion in `meta.notes`."""
        if text not in self.notes:
            self.notes.append(text)

    def keep(self, key: str, value: Any) -> None:
        """Keep an input field MMS has no place for in `meta.extra_fields[key]`."""
        self.extra_fields[key] = value

    def keep_unread(
        self, fields: Mapping[str, Any], read: Collection[str | None] = (), where: str = ""
    ) -> None:
        """Keep the fields the adapter did not read (keys not in `read`, where None stands
        for a key the record lacked; by default none was read) in `meta.extra_fields`, in their order: under their own key, or as `where.key`
        when `fields` is the object at path `where` inside the record."""
        for key, value in fields.items():
            if key not in read:
                self.keep(f"{where}.{key}" if where else key, value)

    def prompt_only(self, reason: str) -> None:
        """The thread ends with the prompt: its assistant turn is absent or to be generated."""
        self.meta["prompt_only"] = True
        self.note(reason)

    def unrenderable(self, construct: str, where: str, reason: str) -> None:
        """A construct of a prompt script that was not rendered or run (a directive, a
        function block, a call of another script), listed in `meta.unrenderable`."""
        entry = {"construct": construct, "where": where, "reason": reason}
        if entry not in self.unrenderable_constructs:
            self.unrenderable_constructs.append(entry)

    def respond_in(
        self, format_name: str, schema: Any = None, allowed_values: Iterable[str] = ()
    ) -> None:
        """The prompt expects its answer in `format_name`; `build()` enables it in the
        developer declaration unless an earlier developer message already does."""
        self.response_format = ResponseFormat(format_name, schema, tuple(allowed_values))

    # Every message method takes the message's own meta (what the source says about it
    # that MMS has no field for: kept in `meta.message_meta`) as ONE mapping, `meta=`,
    # never as keyword arguments: a source's key must never reach a parameter by name
    # (a stray `format`, `weight` or `name` key would set the message's format, weight or
    # tool name, or clash with a parameter and crash the adapter).

    def platform(self, content: str, *, meta: Mapping[str, Any] | None = None) -> None:
        """A platform message (a serving platform's own system prompt, as Harmony's)."""
        self._items.append(Item("text", "platform", content, meta=_own(meta)))

    # A message with media takes them as `media=`, each at a U+FFFC marker of its content
    # (`media_content` builds both from the text and media in order).

    def developer(
        self,
        content: str,
        *,
        media: Iterable[Media] = (),
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self._items.append(Item("text", "developer", content, meta=_own(meta), media=tuple(media)))

    def user(
        self,
        content: str,
        *,
        media: Iterable[Media] = (),
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self._items.append(Item("text", "user", content, meta=_own(meta), media=tuple(media)))

    def assistant(
        self,
        content: str,
        format: str = "markdown",
        *,
        weight: float | None = None,
        media: Iterable[Media] = (),
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """An assistant answer; its `end_turn` is decided by `build()`. `weight` is the
        source's training weight (0: never trained)."""
        self._items.append(
            Item(
                "text",
                "assistant",
                content,
                format=format,
                meta=_own(meta),
                weight=weight,
                media=tuple(media),
            )
        )

    def context(
        self,
        content: str,
        name: str | None = None,
        *,
        media: Iterable[Media] = (),
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self._items.append(
            Item("text", "context", content, name=name, meta=_own(meta), media=tuple(media))
        )

    def reasoning(
        self,
        content: str,
        *,
        weight: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """The assistant's reasoning before its answer (kept or dropped per options)."""
        if self.options.reasoning == "drop":
            self.note("dropped the assistant's reasoning (--reasoning drop)")
            return
        self._items.append(
            Item(
                "reasoning", "assistant", content, REASONING_FORMAT, meta=_own(meta), weight=weight
            )
        )

    def tool_call(
        self,
        name: str,
        arguments: Any,
        call_id: str | None = None,
        *,
        weight: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """A call of tool `name`; `arguments` is a JSON string or a parsed value."""
        own = _own(meta)
        if call_id is not None:
            own = {"tool_call_id": call_id, **own}
        content = self._arguments_text(name, arguments)
        self._items.append(
            Item(
                "call",
                "assistant",
                content,
                tool_format(name),
                name=name,
                call_id=call_id,
                meta=own,
                weight=weight,
            )
        )

    def tool_result(
        self,
        content: str,
        *,
        call_id: str | None = None,
        name: str | None = None,
        media: Iterable[Media] = (),
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """A tool's output (with the images it returned, if any), matched to its call by
        `call_id`, else by `name`, else to the oldest unanswered call."""
        own = _own(meta)
        if call_id is not None:
            own = {"tool_call_id": call_id, **own}
        self._items.append(
            Item(
                "result",
                "context",
                content,
                name=name,
                call_id=call_id,
                meta=own,
                media=tuple(media),
            )
        )

    def declare_tools(self, tools: Iterable[ToolSpec]) -> None:
        """Tools the developer made available; the first definition of a name wins."""
        known = {tool.name: tool for tool in self.tools}
        for tool in tools:
            earlier = known.get(tool.name)
            if earlier is None:
                known[tool.name] = tool
                self.tools.append(tool)
            elif earlier != tool:
                self.note(f"tool {tool.name!r} is defined twice; kept the first definition")

    def text(self, value: Any, where: str) -> str:
        """Message content as text: strings as they are, content-part lists joined (text
        kept, media dropped or replaced per options), other JSON values as JSON."""
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return "\n\n".join(
                piece for part in value if (piece := self._part_text(part, where)) is not None
            )
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        self.note(f"{where} is a JSON {json_kind(value)}, kept as JSON text")
        return canonical_json(value)

    def content(self, value: Any, where: str) -> tuple[str, tuple[Media, ...]]:
        """Message content as text and media: as `text`, but with `--multimodal keep` the
        media parts of a content-part list (OpenAI-style parts, Anthropic image blocks)
        are kept, each at a marker (nothing around it, text parts joined by a blank line)."""
        if not isinstance(value, list) or not self.keeps_media:
            return self.text(value, where), ()
        parts: list[list[str | Media]] = []
        for part in value:
            piece = self._part_piece(part, where)
            if piece is not None:
                parts.append([piece])
        return self.media_content(joined(parts, "\n\n"))

    @property
    def keeps_media(self) -> bool:
        """Whether media are kept in the thread (`--multimodal keep`)."""
        return self.options.multimodal == "keep"

    def media(self, kind: str) -> str | None:
        """A non-text part not kept (image, audio, file ...): its placeholder, or None when
        dropped (counted in `meta.notes`)."""
        self._dropped_parts[kind] += 1
        return f"[{kind}]" if self.options.multimodal == "placeholder" else None

    def kept(self, kind: str, media: Media | None) -> Media | str | None:
        """A media part as its message holds it: the media itself with `--multimodal keep`
        (when it is an image, audio or video naming a path, URL or data), else what
        `media(kind)` makes of it."""
        if media is not None and self.keeps_media:
            return media
        return self.media(kind)

    def media_content(self, segments: Iterable[str | Media]) -> tuple[str, tuple[Media, ...]]:
        """A message's content and media from its text and media in order, concatenated:
        a marker where each media stands. A literal U+FFFC in the text of a message with
        media is written as U+FFFD (noted), so markers and media always match."""
        segments = list(segments)
        media = tuple(segment for segment in segments if isinstance(segment, Media))
        if not media:
            return "".join(segment for segment in segments if isinstance(segment, str)), ()
        texts: list[str] = []
        for segment in segments:
            if isinstance(segment, Media):
                texts.append(MEDIA_MARKER)
            elif MEDIA_MARKER in segment:
                self.note(
                    "a literal U+FFFC in a message with media was written as U+FFFD "
                    "(U+FFFC marks where media stand)"
                )
                texts.append(segment.replace(MEDIA_MARKER, REPLACEMENT))
            else:
                texts.append(segment)
        return "".join(texts), media

    # ----------------------------------------------------------------- building

    def build(self) -> Thread:
        """The MMS thread; raises RecordRejected when the conversation cannot be one."""
        items = [item for item in self._items]
        if not items:
            raise RecordRejected("empty_conversation", "the record holds no messages")
        jsonl = self.options.parallel_calls == "jsonl"
        match_results(items, self.note)
        note_undeclared_calls(items, self.tools, self.note)
        items = order_parallel_calls(items, jsonl, self.note)
        messages: list[Message] = []
        message_meta: dict[str, Any] = {}
        written, declared = declaration(
            items, self.tools, self.response_format, self._wording_seed(), jsonl
        )
        insert_at = next(
            (i for i, item in enumerate(items) if item.role not in ("developer", "platform")),
            len(items),
        )
        for position, item in enumerate(items):
            if position == insert_at and written:
                messages.append(Message.developer(written))
            if item.meta:
                message_meta[str(len(messages))] = item.meta
            following = items[position + 1] if position + 1 < len(items) else None
            messages.append(message_of(item, following, self.note))
        if insert_at == len(items) and written:
            messages.append(Message.developer(written))
        meta = self._meta(message_meta)
        if written and declared is not None:
            meta[DECLARATION_META] = {"message": insert_at, "key": declared}
        settings = system_settings(items, self.tools, jsonl)
        thread = Thread(self.thread_id, messages, settings, meta)
        try:
            thread.validate()
        except ThreadValidationError as err:
            details = tuple(
                {"path": e.path, "kind": e.kind, "message": e.message} for e in err.errors
            )
            raise RecordRejected("invalid_thread", str(err), details) from None
        return thread

    def _wording_seed(self) -> str:
        """What the declaration's wording is picked by: the thread's group when it has one
        (the sides of a pair share their prompt, word for word), else the thread id."""
        return group_of(self.meta) or self.thread_id

    def _meta(self, message_meta: dict[str, Any]) -> dict[str, Any]:
        meta = dict(self.meta)
        if message_meta:
            meta["message_meta"] = message_meta
        if self.extra_fields:
            meta["extra_fields"] = self.extra_fields
        schemas = {t.name: t.parameters for t in self.tools if t.parameters is not None}
        if schemas:
            # the declared JSON Schemas, as the source wrote them: the developer message
            # shows them as TypeScript, the linter (MMS403) validates calls against these
            meta["tool_schemas"] = schemas
        descriptions = {t.name: t.description for t in self.tools if t.description}
        if descriptions:
            # what each tool does, as the source said: a transcript written back from the
            # thread (mms export) declares its tools with these
            meta["tool_descriptions"] = descriptions
        if self.response_format is not None:
            meta["response_format"] = self.response_format.name
        if self.unrenderable_constructs:
            meta["unrenderable"] = list(self.unrenderable_constructs)
        for kind, count in sorted(self._dropped_parts.items()):
            if self.options.multimodal == "placeholder":
                self.note(f"replaced {count} {kind} part(s) with a [{kind}] placeholder")
            elif self.keeps_media:
                self.note(
                    f"dropped {count} {kind} part(s): MMS keeps images, audio and video "
                    "that name a path, URL or data"
                )
            else:
                self.note(f"dropped {count} {kind} part(s) (text-only thread)")
        if self.notes:
            meta["notes"] = list(self.notes)
        return meta

    # ----------------------------------------------------------------- helpers

    def _arguments_text(self, name: str, arguments: Any) -> str:
        if arguments is None or arguments == "":
            return "{}"
        if not isinstance(arguments, str):
            return canonical_json(arguments)
        try:
            value = exact_json(arguments)
        except orjson.JSONDecodeError:
            self.note(f"arguments of a {name!r} call are not valid JSON; kept as written")
            return arguments
        if isinstance(value, str):
            try:
                value = exact_json(value)
                self.note(f"arguments of a {name!r} call were JSON encoded twice; decoded")
            except orjson.JSONDecodeError:
                pass
        return canonical_json(value)

    def _part_text(self, part: Any, where: str) -> str | None:
        if isinstance(part, str):
            return part
        if not isinstance(part, dict):
            self.note(f"{where} has a content part that is not an object; kept as JSON text")
            return canonical_json(part)
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text") or (kind is None and "text" in part):
            text = part.get("text", part.get("value"))
            return text if isinstance(text, str) else self.text(text, where)
        refusal = part.get("refusal")
        if kind == "refusal" and isinstance(refusal, str):
            return refusal
        return self.media(str(kind or "unknown"))

    def _part_piece(self, part: Any, where: str) -> str | Media | None:
        """A content part as text, kept media, a placeholder, or None (dropped)."""
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str) or kind not in PART_KINDS:
            return self._part_text(part, where)
        source = part.get("source")
        media_kind = PART_KINDS[kind]
        found = (
            anthropic_source(source) if isinstance(source, dict) else openai_part(part, media_kind)
        )
        return self.kept(media_kind, found)


def source_thread_id(record: Record, source_id: Any = None) -> str:
    """The thread id: the source's own id (string or integer) if it has one, else a stable
    hash of where the record came from: its file's name relative to its input and its
    place in the file (`Record.lineage`), so it does not depend on where the input lives."""
    if isinstance(source_id, str) and source_id:
        return source_id
    if isinstance(source_id, int) and not isinstance(source_id, bool):
        return str(source_id)
    return stable_thread_id(*record.lineage)
