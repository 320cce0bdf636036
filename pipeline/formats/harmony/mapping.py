"""What each Harmony message is in MMS, both ways. A header decides the kind: `system` is
the platform's message, `developer` and `user` themselves; the assistant's message to a
recipient (`to=functions.x`) is a tool call, on the `analysis` channel its reasoning,
otherwise its answer (in format F when the content type is `<|constrain|>F`); a tool's
message is its result. Each kind has one canonical header, the one the openai/harmony
renderer writes; what a source's header does differently (a `commentary` preamble, no
`to=assistant` on a result, a bare `code` content type) is kept as a thread's message
meta `harmony` and written back, as long as it keeps the kind."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.formats.harmony.tools import address, tool_of
from pipeline.formats.harmony.transcript import (
    CONSTRAIN,
    MESSAGE,
    STRUCTURAL,
    Header,
    format_header,
    parse_header,
)
from pipeline.mms import DEFAULT_FORMAT
from pipeline.quarantine import RecordRejected

HEADER_FIELDS = ("author", "recipient", "channel", "content_type")
"""The header fields a message meta `harmony` entry may set."""
ROLE_KINDS = {"system": "platform", "developer": "developer", "user": "user"}
EVERYONE = "all"
"""The recipient that addresses no one in particular (openai/harmony omits it)."""


@dataclass(frozen=True, slots=True)
class Kind:
    """A message's kind: platform, developer, user, reasoning, answer (`name`: its
    format), call or result (`name`: the tool)."""

    kind: str
    name: str | None = None


def kind_of(header: Header) -> Kind:
    """What a message with this header is."""
    if header.role in ROLE_KINDS:
        return Kind(ROLE_KINDS[header.role])
    if header.role == "tool":
        return Kind("result", tool_of(header.author or ""))
    if header.recipient not in (None, EVERYONE):
        return Kind("call", tool_of(header.recipient))
    if header.channel == "analysis":
        return Kind("reasoning")
    content_type = header.content_type or ""
    if content_type.startswith(CONSTRAIN) and len(content_type) > len(CONSTRAIN):
        return Kind("answer", content_type[len(CONSTRAIN) :])
    return Kind("answer", DEFAULT_FORMAT)


def canonical_header(kind: Kind) -> Header:
    """The header openai/harmony writes for a message of this kind."""
    if kind.kind in ROLE_KINDS.values():
        return Header(next(role for role, k in ROLE_KINDS.items() if k == kind.kind))
    if kind.kind == "reasoning":
        return Header("assistant", channel="analysis")
    if kind.kind == "call":
        return Header("assistant", None, address(kind.name or ""), "commentary", f"{CONSTRAIN}json")
    if kind.kind == "result":
        return Header("tool", address(kind.name or ""), "assistant", "commentary")
    constrained = None if kind.name == DEFAULT_FORMAT else f"{CONSTRAIN}{kind.name}"
    return Header("assistant", channel="final", content_type=constrained)


def deviations(header: Header, kind: Kind) -> dict[str, str | None]:
    """The fields of `header` that differ from its kind's canonical header."""
    canonical = canonical_header(kind)
    return {
        name: getattr(header, name)
        for name in HEADER_FIELDS
        if getattr(header, name) != getattr(canonical, name)
    }


def writable(header: Header) -> bool:
    """Whether the header, written out, reads back as itself (and ends nothing early)."""
    text = format_header(header)
    if any(token in text for token in (*STRUCTURAL, MESSAGE)):
        return False
    try:
        return parse_header(text, "header") == header
    except RecordRejected:
        return False


def header_for(kind: Kind, kept: Any) -> Header:
    """The header to write: the canonical one with the kept deviations (a message meta
    `harmony` entry), unless they no longer fit the message (it was edited since)."""
    canonical = canonical_header(kind)
    if not isinstance(kept, Mapping):
        return canonical
    changes = {
        name: value
        for name, value in kept.items()
        if name in HEADER_FIELDS and (value is None or isinstance(value, str))
    }
    # HEADER_FIELDS leaves out `role`, the one field that may not be None
    header = dataclasses.replace(canonical, **changes)  # type: ignore[arg-type]
    return header if kind_of(header) == kind and writable(header) else canonical
