"""Forgive trailing commas in JSON (`{"a": 1,}`), a mistake hand-written files make often
(the prompt JSON seed's own example has one); everything else stays an error."""

from __future__ import annotations

CLOSERS = frozenset("}]")
NOT_A_VALUE_END = frozenset(",[{:")
"""A comma after one of these does not follow a value: it is not a trailing comma."""
WHITESPACE = frozenset(" \t\r\n")


def without_trailing_commas(text: str) -> tuple[str, list[int]] | None:
    """`text` with each comma that directly precedes `}` or `]` (outside strings) made a
    space, so positions of any remaining error stay exact, and the line of each; None
    when there is none. Linear in the text."""
    kept: list[str] = []
    lines: list[int] = []
    line = 1
    in_string = escaped = False
    start = 0
    previous = ""
    for index, char in enumerate(text):
        if char == "\n":
            line += 1
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif (
            char == ","
            and previous not in NOT_A_VALUE_END
            and _next_significant(text, index + 1) in CLOSERS
        ):
            kept.append(text[start:index])
            kept.append(" ")
            start = index + 1
            lines.append(line)
        if char not in WHITESPACE:
            previous = char
    if not lines:
        return None
    kept.append(text[start:])
    return "".join(kept), lines


def _next_significant(text: str, index: int) -> str:
    while index < len(text) and text[index] in WHITESPACE:
        index += 1
    return text[index] if index < len(text) else ""
