"""How counts read in messages (`1 file`, `2 files`, `0 weighted copies`), and how text
from the data or the command line is shown on a terminal."""

from __future__ import annotations

import re


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """`count` (with thousands separators) and the noun that goes with it."""
    noun = singular if count == 1 else plural_form or f"{singular}s"
    return f"{count:,} {noun}"


_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f"  # C0 (line breaks, ESC, ...), DEL and C1 (CSI, NEL, ...)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidirectional marks and overrides
    "\u2028\u2029]"  # line and paragraph separators
)


def visible(value: object) -> str:
    """`value` as text safe to print on a terminal: a file name, locator, id or reason from
    the data stays one piece of text on one line. Control characters and the characters
    that break or reorder a line show as escapes (`\\n`, `\\x1b`, `\\u202e`); everything
    else, backslashes too, is kept as it is."""
    return _UNSAFE.sub(_escape, str(value))


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED_ESCAPES.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
