"""A Harmony `# Tools` section <-> tool namespaces: `## name` groups, each a `namespace
name { ... } // namespace name` block of declarations (with the namespace's description
as `//` lines above it) or, for a tool without declarations such as `python`, plain text.

Function tools live in the `functions` namespace and keep their own names (`get_weather`,
called as `functions.get_weather`); a tool of another namespace is named with it
(`browser.search`), which is also how it is called."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.capabilities import ToolSpec
from pipeline.formats.harmony.ts_schema import (
    Declared,
    TypeScriptError,
    read_declarations,
    write_declaration,
)
from pipeline.quarantine import RecordRejected

FUNCTIONS = "functions"
SECTION = "# Tools"
_OPENING = re.compile(r"namespace (\S+) \{")
_CLOSING = re.compile(r"\}(?: // namespace (\S+))?")
_DECLARED_NAMESPACE = re.compile(r"^namespace (\S+) \{$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Namespace:
    """One `## name` group: its description (comment lines above the block, or the plain
    text of a group without one) and the tools it declares."""

    name: str
    description: str | None
    tools: tuple[Declared, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolsSection:
    """A message's text split around its `# Tools` section."""

    before: str
    namespaces: tuple[Namespace, ...]
    after: str


def address(tool: str) -> str:
    """How a tool is addressed (`to=`) and signs its results: `functions.x` for a function
    tool, its own name for a tool of another namespace."""
    return tool if "." in tool else f"{FUNCTIONS}.{tool}"


def tool_of(addressed: str) -> str:
    """The tool an address names: `functions.x` -> `x`; others as they are."""
    local = addressed.removeprefix(f"{FUNCTIONS}.")
    return local if local and local != addressed else addressed


def namespace_of(tool: str) -> str:
    return tool.partition(".")[0] if "." in tool else FUNCTIONS


def tool_specs(namespaces: Iterable[Namespace]) -> list[ToolSpec]:
    """The declared tools, named as they are called."""
    return [
        ToolSpec(
            tool.name if space.name == FUNCTIONS else f"{space.name}.{tool.name}",
            tool.description,
            tool.parameters,
        )
        for space in namespaces
        for tool in space.tools
    ]


def declared_namespaces(text: str) -> set[str]:
    """The namespaces a message's text declares (`namespace name {` lines)."""
    return set(_DECLARED_NAMESPACE.findall(text))


def _invalid(where: str, reason: str) -> RecordRejected:
    return RecordRejected("invalid_tools", f"{where}: {reason}")


def _uncommented(line: str) -> str:
    text = line[2:] if line.startswith("//") else line
    return text[1:] if text.startswith(" ") else text


def find_tools_section(text: str, where: str) -> ToolsSection | None:
    """The text split around its `# Tools` section (a `# Tools` line, at the start or
    after a blank line, then `## name` groups up to the next `# ` heading or the end);
    None when it has none. A group that does not read raises `invalid_tools`."""
    lines = text.split("\n")
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if line == SECTION and (i == 0 or not lines[i - 1].strip())
        ),
        None,
    )
    if start is None:
        return None
    groups: list[tuple[str, int, list[str]]] = []
    inside = False
    end = len(lines)
    for index in range(start + 1, len(lines)):
        line = lines[index]
        if inside:
            inside = _CLOSING.fullmatch(line) is None
        elif line.startswith("## "):
            groups.append((line[3:].strip(), index + 1, []))
            continue
        elif line.startswith("# "):
            end = index
            break
        elif _OPENING.fullmatch(line):
            inside = True
        if groups:
            groups[-1][2].append(line)
        elif line.strip():
            return None  # a heading of the instructions: no `## name` group follows it
    if not groups:
        return None
    if inside:
        raise _invalid(where, f"namespace {groups[-1][0]} is never closed (`}} // namespace ...`)")
    before = "\n".join(lines[: start - 1]) if start else ""
    after = "\n".join(lines[end:])
    namespaces = tuple(_namespace(name, first, body, where) for name, first, body in groups)
    return ToolsSection(before, namespaces, after)


def _namespace(name: str, first: int, lines: list[str], where: str) -> Namespace:
    """One group; `first` is the index of its first line in the message's text."""
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    while lines and not lines[0].strip():
        lines, first = lines[1:], first + 1
    opening = next((i for i, line in enumerate(lines) if _OPENING.fullmatch(line)), None)
    if opening is None:
        return Namespace(name, "\n".join(lines) or None)
    declared = _OPENING.fullmatch(lines[opening]).group(1)  # type: ignore[union-attr]
    closing = _CLOSING.fullmatch(lines[-1])
    if declared != name or closing is None or closing.group(1) not in (None, name):
        raise _invalid(where, f"`## {name}` holds `namespace {declared}`, closed by {lines[-1]!r}")
    description = "\n".join(_uncommented(line) for line in lines[:opening]) or None
    try:
        body = "\n".join(lines[opening + 1 : -1])
        tools = read_declarations(body, first_line=first + opening + 2)
    except TypeScriptError as err:
        raise _invalid(where, f"namespace {name}, {err}") from None
    return Namespace(name, description, tuple(tools))


def write_tools_section(namespaces: Iterable[Namespace]) -> str:
    """The `# Tools` section as the openai/harmony renderer writes it."""
    groups = [SECTION]
    for space in namespaces:
        items = [f"## {space.name}\n"]
        description = space.description.split("\n") if space.description else []
        if not space.tools:
            groups.append("\n".join(items + description))
            continue
        items += [f"// {line}" for line in description]
        items.append(f"namespace {space.name} {{\n")
        items += [
            write_declaration(tool.name, tool.description, tool.parameters) + "\n"
            for tool in space.tools
        ]
        items.append(f"}} // namespace {space.name}")
        groups.append("\n".join(items))
    return "\n\n".join(groups)
