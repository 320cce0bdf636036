"""Split script text into top-level items by its lines, before any YAML: an item starts
at a line at the block's indentation and runs over the more indented lines after it.
PPE scripts are not one YAML document (repeated role keys, `---`/`***` separators, `->`
chains), so each item is parsed on its own."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.quarantine import RecordRejected

KEY = re.compile(
    r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|(?![-?:,\[\]{}#&*!|>%@`'"\s])"""
    r"""(?:[^:\s#]|:(?=\S)|\s+(?=[^#\s]))*)\s*:(?=\s|$)"""
)
"""A mapping key at the start of a line: quoted, or plain (not starting with a YAML
indicator, no `: ` or ` #` inside)."""
LIST_ENTRY = re.compile(r"-(?=\s|$)")


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the script, with its 1-based number in the file."""

    number: int
    text: str


@dataclass(frozen=True, slots=True)
class Item:
    """A top-level item of a block: its lines (comment lines at the block's level
    blanked, so YAML line numbers still count from `lines[0]`) and the block's indent."""

    lines: tuple[Line, ...]
    indent: int

    @property
    def line(self) -> int:
        return self.lines[0].number

    @property
    def head(self) -> str:
        """The first line without the block's indentation."""
        return self.lines[0].text[self.indent :].rstrip()

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)

    @property
    def body(self) -> tuple[Line, ...]:
        return self.lines[1:]


def depth(text: str) -> int:
    """How many spaces indent a line."""
    return len(text) - len(text.lstrip(" "))


def key_of(head: str) -> tuple[str, str] | None:
    """(key as written, what follows its colon) when `head` starts with a mapping key."""
    match = KEY.match(head)
    if match is None:
        return None
    return match.group(0)[:-1].rstrip(), head[match.end() :]


def opens_block(head: str) -> bool:
    """Whether a key line leaves its value to the lines below (`then:`, `system: # c`)."""
    key = key_of(head)
    if key is None:
        return False
    rest = key[1].strip()
    return not rest or rest.startswith("#")


def split_items(lines: Sequence[Line], indent: int) -> list[Item]:
    """The items of a block whose entries start at column `indent`. A `- ` line at that
    column continues a key with no inline value (YAML's compact `key:\\n- a`)."""
    groups: list[list[Line]] = []
    takes_list = False
    for line in lines:
        stripped = line.text.strip()
        level = depth(line.text)
        if not stripped or (stripped.startswith("#") and level <= indent):
            if groups:
                groups[-1].append(Line(line.number, ""))
            continue
        continues = level > indent or (
            takes_list and level == indent and LIST_ENTRY.match(line.text, indent) is not None
        )
        if continues:
            if not groups:
                raise RecordRejected(
                    "invalid_yaml", f"line {line.number}: indented text belongs to no item"
                )
            groups[-1].append(line)
            continue
        if level < indent:
            raise RecordRejected(
                "invalid_yaml",
                f"line {line.number}: indented {level} spaces, less than its block ({indent})",
            )
        groups.append([line])
        takes_list = opens_block(line.text[indent:])
    return [Item(tuple(_trimmed(group)), indent) for group in groups]


def _trimmed(group: list[Line]) -> list[Line]:
    while len(group) > 1 and not group[-1].text.strip():
        group.pop()
    return group


def list_entry_block(item: Item) -> tuple[list[Line], int]:
    """The lines of a `- entry` item as a block of their own: the dash becomes a space,
    and the block's indent is the column the entry's content starts at (or, for a bare
    `-`, the indentation of the next line)."""
    first = item.lines[0]
    dash = item.indent
    after = first.text[dash + 1 :]
    content = dash + 1 + depth(after)
    lines = [Line(first.number, first.text[:dash] + " " + after), *item.body]
    if after.strip():
        return lines, content
    following = next((line for line in item.body if line.text.strip()), None)
    return lines, depth(following.text) if following else content
