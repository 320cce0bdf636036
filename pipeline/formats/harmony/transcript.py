"""The Harmony message grammar, both ways: a rendered transcript split into its messages
(`<|start|>{header}<|message|>{content}<|end|>`, `<|call|>` or `<|return|>`), each header
read into role, author, recipient, channel and content type as the openai/harmony parser
reads it; and one message written back in the layout of the openai/harmony renderer."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.quarantine import RecordRejected

START = "<|start|>"
MESSAGE = "<|message|>"
END = "<|end|>"
CALL = "<|call|>"
RETURN = "<|return|>"
CHANNEL = "<|channel|>"
CONSTRAIN = "<|constrain|>"
CLOSINGS = (END, CALL, RETURN)
STRUCTURAL = (START, *CLOSINGS)
"""The tokens a message's content cannot hold: they would end it or start another."""
ROLES = ("system", "developer", "user", "assistant")
"""Roles written by name; a tool's messages are written by the tool (`functions.x`)."""
SHOWN = 60
"""Characters of offending text quoted in an error."""

_CLOSING = re.compile("|".join(re.escape(token) for token in (*CLOSINGS, START)))
_CHANNEL_VALUE = re.compile(r"[^\s<]*")
_BLANK = re.compile(r"\s*")
_CONSTRAIN_SPACING = re.compile(r"\s*" + re.escape(CONSTRAIN) + r"\s*")
_TOOL_AUTHOR = re.compile(r"[^\s.]+\.\S+")


@dataclass(frozen=True, slots=True)
class Header:
    """A message header: `role` (system, developer, user, assistant or tool), the tool
    that wrote a tool message (`author`), and the optional recipient (`to=`), channel and
    content type (`<|constrain|>json`, or a bare type such as `code`)."""

    role: str
    author: str | None = None
    recipient: str | None = None
    channel: str | None = None
    content_type: str | None = None


@dataclass(frozen=True, slots=True)
class HarmonyMessage:
    """One message: its header, its content as written, and the token that closed it
    (None when the text ended first)."""

    header: Header
    content: str
    closing: str | None


@dataclass(frozen=True, slots=True)
class Transcript:
    """A transcript's messages, and the header of the generation prompt it ends with
    (`<|start|>assistant` and nothing after it), if any."""

    messages: tuple[HarmonyMessage, ...]
    prompt: Header | None = None
    prompt_text: str | None = None
    """The generation prompt's header as written (stripped), e.g. `assistant`."""


def _quoted(text: str) -> str:
    text = text.strip()
    return repr(text[:SHOWN] + ("..." if len(text) > SHOWN else ""))


def _malformed(message: str) -> RecordRejected:
    return RecordRejected("missing_field", message)


def parse_header(text: str, where: str) -> Header:
    """A header as openai/harmony reads one: the channel after `<|channel|>`, then
    whitespace-separated words: the role (or a tool's name), `to=recipient`, and the
    content type last; a lone word after the role is the recipient, unless it is a
    `<|constrain|>` type (which openai/harmony would misread as one)."""
    channel = None
    at = text.find(CHANNEL)
    if at != -1:
        after = text[at + len(CHANNEL) :]
        channel = _CHANNEL_VALUE.match(after).group()  # type: ignore[union-attr]
        if not channel:
            raise _malformed(f"{where}: {CHANNEL} is not followed by a channel name")
        text = text[:at] + " " + after[len(channel) :]
        if CHANNEL in text:
            raise _malformed(f"{where}: the header names two channels")
    words = _CONSTRAIN_SPACING.sub(" " + CONSTRAIN, text).split()
    if not words:
        raise _malformed(f"{where}: the header names no role")
    role, author, rest = _role(words, where)
    recipient = content_type = None
    if rest:
        last = rest.pop()
        if last.startswith("to="):
            recipient = last[3:]
        elif not rest and not last.startswith(CONSTRAIN):
            recipient = last
        else:
            content_type = last
            if rest:
                word = rest.pop()
                recipient = word[3:] if word.startswith("to=") else word
    if rest:
        raise _malformed(f"{where}: unexpected words in the header: {_quoted(' '.join(rest))}")
    if recipient == "":
        raise _malformed(f"{where}: `to=` names no recipient")
    if recipient is not None and recipient.startswith(CONSTRAIN):
        raise _malformed(f"{where}: the header has two content types")
    return Header(role, author, recipient, channel, content_type)


def _role(words: list[str], where: str) -> tuple[str, str | None, list[str]]:
    """The role, the tool author (for a tool's message) and the words after them."""
    first, rest = words[0], words[1:]
    if first in ROLES:
        return first, None, rest
    if first.startswith("to=") or first.startswith(CONSTRAIN):
        raise _malformed(f"{where}: the header names no role before {_quoted(first)}")
    if first != "tool" and (_TOOL_AUTHOR.fullmatch(first) or rest):
        return "tool", first, rest
    raise RecordRejected(
        "unknown_role",
        f"{where}: role {_quoted(first)} is not one of {', '.join(ROLES)} nor a tool's name "
        "(a tool's message names the tool, e.g. `functions.get_weather to=assistant`)",
    )


def parse_transcript(text: str) -> Transcript:
    """The messages of a rendered transcript; blank space between messages is allowed, a
    last message may lack its closing token, and the text may end with a generation
    prompt. Anything else that breaks the grammar raises RecordRejected."""
    messages: list[HarmonyMessage] = []
    position = _next_start(text, 0, "before message 1")
    while position < len(text):
        number = len(messages) + 1
        where = f"message {number}"
        header_end = text.find(MESSAGE, position)
        interrupted = _CLOSING.search(text, position)
        if header_end == -1 or (interrupted is not None and interrupted.start() < header_end):
            stop = interrupted.start() if interrupted is not None else len(text)
            return _with_prompt(messages, text[position:stop], stop == len(text), where)
        header = parse_header(text[position:header_end], where)
        content_start = header_end + len(MESSAGE)
        closing = _CLOSING.search(text, content_start)
        if closing is None:
            messages.append(HarmonyMessage(header, text[content_start:], None))
            break
        if closing.group() == START:
            raise _malformed(
                f"{where} ({header.author or header.role}) is not closed by {END}, {CALL} or "
                f"{RETURN} before the next {START}"
            )
        messages.append(
            HarmonyMessage(header, text[content_start : closing.start()], closing.group())
        )
        position = _next_start(text, closing.end(), f"after {where}")
    return Transcript(tuple(messages))


def _next_start(text: str, position: int, where: str) -> int:
    """Where the next message's header begins (after `<|start|>`), or the text's end;
    only blank space may come before it."""
    stripped = _BLANK.match(text, position).end()  # type: ignore[union-attr]
    if stripped == len(text):
        return stripped
    if not text.startswith(START, stripped):
        raise _malformed(f"{where}: text outside any message: {_quoted(text[stripped:])}")
    return stripped + len(START)


def _with_prompt(
    messages: list[HarmonyMessage], header_text: str, at_end: bool, where: str
) -> Transcript:
    """The transcript ending with a header and no `<|message|>`: a generation prompt when
    it is the assistant's and nothing follows it; otherwise an unterminated header."""
    if not at_end:
        raise _malformed(f"{where}: the header {_quoted(header_text)} has no {MESSAGE}")
    header = parse_header(header_text, f"{where} (generation prompt)")
    if header.role != "assistant":
        raise _malformed(
            f"{where}: the transcript ends inside the header {_quoted(header_text)} "
            f"(a generation prompt is `{START}assistant`)"
        )
    return Transcript(tuple(messages), header, header_text.strip())


def format_header(header: Header) -> str:
    """A header in the openai/harmony renderer's layout: role (or tool), ` to=`,
    `<|channel|>`, then the content type after a space."""
    text = header.author if header.role == "tool" and header.author else header.role
    if header.recipient is not None:
        text += f" to={header.recipient}"
    if header.channel is not None:
        text += CHANNEL + header.channel
    if header.content_type is not None:
        text += " " + header.content_type
    return text


def format_message(header: Header, content: str, closing: str) -> str:
    """One whole message."""
    return f"{START}{format_header(header)}{MESSAGE}{content}{closing}"
