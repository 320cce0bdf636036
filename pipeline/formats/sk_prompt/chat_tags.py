"""Semantic Kernel's chat prompt syntax: `<message role="...">...</message>` tags in a
rendered prompt become messages; a prompt without them is one user message."""

from __future__ import annotations

import html
import re
import textwrap
from typing import NamedTuple

MESSAGE_TAG = re.compile(
    r"<message\b(?P<attributes>[^>]*)>(?P<content>.*?)</message\s*>", re.DOTALL | re.IGNORECASE
)
ATTRIBUTE = re.compile(r"""(?P<name>[\w:-]+)\s*=\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)')""")


class ChatMessage(NamedTuple):
    """One message of a rendered prompt: its role as written, content, and attributes."""

    role: str
    content: str
    attributes: dict[str, str]


class OutsideText(NamedTuple):
    """Text found between message tags (SK ignores it; we report it)."""

    text: str


def has_message_tags(text: str) -> bool:
    """Whether the rendered prompt uses the chat prompt syntax."""
    return MESSAGE_TAG.search(text) is not None


def _content(raw: str) -> str:
    """Message text as SK hands it to the model: entities decoded, the template's
    indentation and surrounding blank lines removed."""
    return html.unescape(textwrap.dedent(raw.strip("\n")).strip())


def split_messages(text: str) -> list[ChatMessage | OutsideText]:
    """The messages of a rendered chat prompt in order, with any non-blank text found
    outside the tags. A tag without a `role` has role ""."""
    parts: list[ChatMessage | OutsideText] = []
    position = 0
    for match in MESSAGE_TAG.finditer(text):
        between = text[position : match.start()].strip()
        if between:
            parts.append(OutsideText(between))
        attributes = {
            found["name"].lower(): html.unescape(
                found["dq"] if found["dq"] is not None else found["sq"]
            )
            for found in ATTRIBUTE.finditer(match["attributes"])
        }
        role = attributes.pop("role", "")
        parts.append(ChatMessage(role, _content(match["content"]), attributes))
        position = match.end()
    rest = text[position:].strip()
    if rest:
        parts.append(OutsideText(rest))
    return parts
