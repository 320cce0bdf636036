"""The PPE pre-parser: script text -> Script (front-matter + typed steps). It reads the
body line by line first (separators, `->` chains, repeated role keys, list items) and
parses each item's YAML on its own with the safe loader. Nothing is run or opened."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import orjson
import yaml

from pipeline.formats.builder import a_json_kind, canonical_json
from pipeline.formats.ppe.blocks import (
    LIST_ENTRY,
    Item,
    Line,
    depth,
    key_of,
    list_entry_block,
    opens_block,
    split_items,
)
from pipeline.formats.ppe.steps import (
    Chain,
    Conditional,
    Directive,
    Function,
    Message,
    Script,
    Separator,
    Step,
)
from pipeline.quarantine import RecordRejected
from pipeline.sources.jsonable import NotTextError, TooLargeError, long_integers_as_text
from pipeline.sources.yaml_text import UnsafeYamlError, load_yaml

MAX_VALUES = 1_000_000
"""How many YAML values one script may hold in all its items (aliases expanded)."""
FENCE = re.compile(r"---[ \t]*(?:#.*)?")
SEPARATOR = re.compile(r"(?:-\s+)?(---|\*\*\*)\s*(?:#.*)?")
CHAIN = re.compile(r"(?:-\s+)?->")
DIRECTIVE_NAME = re.compile(r"\$[!|]?[^\s(:]*")
FUNCTION_TAGS = ("!fn", "!fn#")
BRANCH_KEYS = ("then", "else", "do")
"""Keys that belong to the directive written before them (`$if` ... `then:`)."""
ADDRESSED = re.compile(r"(?P<role>[^\[\]]+)\[(?P<to>.*)\]")
TEMPLATE_FUNCTION_TAG = re.compile(r"^([ \t]*(?:-[ \t]+)*)!fn#(?=\s|$)")
"""`!fn#` opening an item: YAML allows no `#` in a tag, so it is read as `!fn%23` (the
same tag, URI-escaped)."""


class _Budget:
    """Loads each item's YAML, bounding the values all items of a script may expand to."""

    def __init__(self, limit: int = MAX_VALUES):
        self.remaining = limit
        self.notes: list[str] = []
        """What reading the items had to change (integers beyond 64 bits made text)."""

    def load(self, text: str, first_line: int) -> Any:
        """The YAML value of `text` (which starts at `first_line` of the script)."""
        try:
            value = load_yaml(text, max_values=max(self.remaining, 1))
        except UnsafeYamlError:
            raise RecordRejected("unsafe_yaml", _error_at(text, first_line)) from None
        except yaml.YAMLError:
            raise RecordRejected("invalid_yaml", _error_at(text, first_line)) from None
        except (TooLargeError, NotTextError, RecursionError) as err:
            raise RecordRejected(
                "invalid_yaml", f"line {first_line}: YAML rejected: {err}"
            ) from None
        self.remaining -= _size(value)
        value, notes = long_integers_as_text(value)
        self.notes.extend(f"line {first_line}: {note}" for note in notes)
        return value


def _error_at(text: str, first_line: int) -> str:
    """The loader's error message with line numbers of the whole script (the text is
    parsed again behind blank lines, only on this failure path)."""
    try:
        load_yaml("\n" * (first_line - 1) + text, max_values=MAX_VALUES)
    except UnsafeYamlError as err:
        return str(err)
    except yaml.YAMLError as err:
        return "invalid YAML: " + " ".join(
            str(err).replace(' in "<unicode string>",', " at").split()
        )
    except (TooLargeError, NotTextError, RecursionError) as err:
        return f"line {first_line}: YAML rejected: {err}"
    return f"line {first_line}: YAML rejected"


def _size(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(_size(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_size(v) for v in value)
    return 1


# ----------------------------------------------------------------------------- front-matter


def _front_matter(lines: list[Line], budget: _Budget) -> tuple[dict[str, Any], list[Line]]:
    """The configuration between the first `---` line and the next, and the body lines."""
    if not lines or FENCE.fullmatch(lines[0].text.rstrip()) is None:
        return {}, lines
    end = next((i for i in range(1, len(lines)) if FENCE.fullmatch(lines[i].text.rstrip())), None)
    if end is None:
        raise RecordRejected(
            "invalid_yaml",
            "line 1: the front-matter opened by `---` is never closed by a `---` line",
        )
    text = "\n".join(line.text for line in lines[1:end])
    value = budget.load(text, 2) if text.strip() else None
    if value is None:
        return {}, lines[end + 1 :]
    if not isinstance(value, dict):
        raise RecordRejected(
            "missing_field", f"line 2: the front-matter is {a_json_kind(value)}, not a mapping"
        )
    return value, lines[end + 1 :]


# ----------------------------------------------------------------------------- items


class _Parser:
    """Turns blocks of lines into steps."""

    def __init__(self, budget: _Budget):
        self.budget = budget

    def block(self, lines: Sequence[Line], indent: int, *, one_object: bool = False) -> list[Step]:
        """The steps of a block of items (the body, a `then:` block, a list entry). In
        `one_object` blocks (a list entry: one YAML object) every key after a directive
        is its parameter; elsewhere only `then`, `else` and `do` are."""
        steps: list[Step] = []
        pending: _Pending | None = None
        for item in split_items(lines, indent):
            head = item.head
            key = None if SEPARATOR.fullmatch(head) or CHAIN.match(head) else key_of(head)
            name = key[0] if key else ""
            if name in BRANCH_KEYS or (one_object and pending and not name.startswith("$")):
                if pending is None:
                    raise RecordRejected(
                        "missing_field",
                        f"line {item.line}: `{name}:` follows no `$if`, `$while` or `$for`",
                    )
                pending.params.append((name, item))
                continue
            if pending is not None:
                steps.append(pending.step(self))
                pending = None
            if name.startswith("$"):
                pending = _Pending(item, _only_value(self.value(item)), name)
            else:
                steps.extend(self.item(item, key))
        if pending is not None:
            steps.append(pending.step(self))
        return steps

    def value(self, item: Item) -> Any:
        """The YAML value of an item."""
        first, newline, rest = item.text.partition("\n")
        first = TEMPLATE_FUNCTION_TAG.sub(r"\1!fn%23", first, count=1)
        return self.budget.load(first + newline + rest, item.line)

    def item(self, item: Item, key: tuple[str, str] | None) -> list[Step]:
        head = item.head
        separator = SEPARATOR.fullmatch(head)
        if separator:
            return [Separator(item.line, separator.group(1))]
        if CHAIN.match(head):
            return [Chain(_chain_text(head), item.line)]
        if LIST_ENTRY.match(head):
            return self.list_entry(item)
        if key is None:
            return value_steps(self.value(item), item.line)
        value = self.value(item)
        if not isinstance(value, dict) or len(value) != 1:
            raise RecordRejected(
                "invalid_yaml", f"line {item.line}: `{key[0]}:` does not read as one key"
            )
        name, content = next(iter(value.items()))
        return [_keyed(str(name), content, item.line)]

    def list_entry(self, item: Item) -> list[Step]:
        """`- role: text`, `- $if: ...` + its keys, `- "text"`, `- !fn |- ...`."""
        lines, indent = list_entry_block(item)
        entry = lines[0].text[indent:] if lines[0].text.strip() else ""
        if key_of(entry) is not None:
            return self.block(lines, indent, one_object=True)
        value = self.value(item)
        return value_steps(value[0] if isinstance(value, list) and value else value, item.line)

    def branch(self, item: Item) -> list[Step]:
        """The steps of a `then:`/`else:`/`do:` value: a block below it, or inline."""
        first = next((line for line in item.body if line.text.strip()), None)
        if opens_block(item.head) and first is not None:
            return self.block(item.body, depth(first.text))
        return value_steps(_only_value(self.value(item)), item.line)


def _only_value(value: Any) -> Any:
    """The value of a one-key item's mapping."""
    return next(iter(value.values())) if isinstance(value, dict) and value else value


class _Pending:
    """A `$directive` item and the branch keys written after it."""

    def __init__(self, item: Item, value: Any, name: str):
        self.item = item
        self.value = value
        self.name = name
        self.params: list[tuple[str, Item]] = []

    def step(self, parser: _Parser) -> Step:
        line = self.item.line
        if self.name == "$if":
            for key, item in self.params:
                if key not in ("then", "else"):
                    raise RecordRejected(
                        "missing_field",
                        f"line {item.line}: `{key}:` is not a key of `$if` (then, else)",
                    )
            branches = {key: parser.branch(item) for key, item in self.params}
            return Conditional(
                _condition(self.value),
                tuple(branches.get("then", ())),
                tuple(branches.get("else", ())),
                line,
            )
        params = {key: _only_value(parser.value(item)) for key, item in self.params}
        return Directive(self.name, self.value, line, params)


def _condition(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _chain_text(head: str) -> str:
    """The chain after `->`, without a trailing comment."""
    text = head.split("->", 1)[1]
    return re.sub(r"\s+#.*$", "", text).strip()


# ----------------------------------------------------------------------------- values


def value_steps(value: Any, line: int) -> list[Step]:
    """Steps of a value read by YAML (an inline `then:` value, a list entry, a bare
    string): strings are separators, chains, directives or user messages."""
    if value is None:
        return []
    if isinstance(value, list):
        return [step for element in value for step in value_steps(element, line)]
    if isinstance(value, dict):
        return _object_steps(value, line)
    if isinstance(value, str):
        return [_string_step(value, line)]
    return [Message("user", canonical_json(value), line)]


def _object_steps(value: dict[str, Any], line: int) -> list[Step]:
    """One YAML object: a `$directive` with the other keys as its parameters, a `!fn`
    block, or role messages in order."""
    directive = next((k for k in value if isinstance(k, str) and k.startswith("$")), None)
    if directive is None:
        return [_keyed(str(key), content, line) for key, content in value.items()]
    params = {k: v for k, v in value.items() if k != directive}
    if directive == "$if":
        return [
            Conditional(
                _condition(value[directive]),
                tuple(value_steps(params.get("then"), line)),
                tuple(value_steps(params.get("else"), line)),
                line,
            )
        ]
    return [Directive(directive, value[directive], line, params)]


def _string_step(text: str, line: int) -> Step:
    stripped = text.strip()
    if stripped in ("---", "***"):
        return Separator(line, stripped)
    if stripped.startswith("->"):
        return Chain(stripped[2:].strip(), line)
    if stripped.startswith("$"):
        name = DIRECTIVE_NAME.match(stripped)
        assert name is not None
        return Directive(name.group(0), stripped if stripped != name.group(0) else None, line)
    if stripped.startswith("?="):
        return Directive("?=", stripped[2:].strip(), line)
    return Message("user", text, line)


def _keyed(key: str, content: Any, line: int) -> Step:
    """A `key: value` entry that is not a directive: a function block or a message."""
    if key in FUNCTION_TAGS:
        return Function(key, content if isinstance(content, str) else str(content), line)
    if key.startswith("$"):
        return _object_steps({key: content}, line)[0]
    addressed = ADDRESSED.fullmatch(key)
    role, to = (addressed["role"].strip(), addressed["to"].strip()) if addressed else (key, None)
    if isinstance(content, bool) or content is None or not isinstance(content, (str, int, float)):
        raise RecordRejected(
            "missing_field", f"line {line}: `{key}:` holds {a_json_kind(content)}, not text"
        )
    return Message(role, content if isinstance(content, str) else str(content), line, to)


# ----------------------------------------------------------------------------- public


def parse_script(text: str) -> Script:
    """The script's front-matter and steps; raises RecordRejected naming the line of
    the first item that cannot be read."""
    budget = _Budget()
    lines = [Line(number, line) for number, line in enumerate(text.splitlines(), 1)]
    front_matter, body = _front_matter(lines, budget)
    steps = tuple(_Parser(budget).block(body, 0))
    return Script(front_matter, steps, tuple(budget.notes))
