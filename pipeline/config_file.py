"""YAML settings files checked against a JSON Schema with the line of every problem: the
pipeline config and a field mapping file. Read only by the data-only safe loader (no tag
ever constructs an object), duplicate keys refused, every error naming the file, the key
path, what is wrong and the line."""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from pipeline.schemas import json_path
from pipeline.sources.jsonable import NotTextError, TooLargeError
from pipeline.sources.yaml_text import DataOnlyLoader, load_yaml

MAX_VALUES = 100_000
"""Most YAML values a settings file may expand to (aliases included)."""
EXPECTED_KEY = "x-expected"
"""A schema annotation (JSON Schema ignores it) saying in words what a `pattern` wants, for
the error message in place of the regular expression."""

PathPart = str | int


class ConfigFileError(ValueError):
    """A settings file that cannot be used: the file, the key path, the line, and why."""

    def __init__(self, file: str | os.PathLike[str], reason: str, path: str = "", line: int = 0):
        self.file = str(file)
        self.reason = reason
        self.path = path
        self.line = line
        where = f" (line {line})" if line else ""
        super().__init__(f"{self.file}: {path + ': ' if path else ''}{reason}{where}")


@dataclass(frozen=True, slots=True)
class YamlDocument:
    """A settings file and its YAML node tree, to name the line of a key path."""

    file: Path
    root: yaml.Node

    def line(self, parts: Sequence[PathPart], key: bool = False) -> int:
        """The line of the value at `parts` (of its key with `key`), or of the deepest
        existing part of the path."""
        node = self.root
        line = node.start_mark.line + 1
        for part in parts:
            child = _child(node, part)
            if child is None:
                break
            key_node, node = child
            line = (key_node or node).start_mark.line + 1 if key else node.start_mark.line + 1
        return line

    def error(self, parts: Sequence[PathPart], reason: str, key: bool = False) -> ConfigFileError:
        """A ConfigFileError at `parts` with its line."""
        return ConfigFileError(self.file, reason, json_path(parts), self.line(parts, key))


def read_yaml_file(path: str | os.PathLike[str], what: str, keys: str) -> tuple[Any, YamlDocument]:
    """The data of the YAML (or JSON) file `path` and its document; `what` names it and
    `keys` says what it holds, for errors. Raises ConfigFileError."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigFileError(file, f"cannot read {what}: {err}") from None
    return parse_yaml(file, text, what, keys)


def parse_yaml(file: Path, text: str, what: str, keys: str) -> tuple[Any, YamlDocument]:
    """The data (safe, bounded) and the document (for line numbers) of the YAML text: a
    mapping (`what` must be one of `keys`) without duplicate keys."""
    try:
        data = load_yaml(text, max_values=MAX_VALUES)
        root = yaml.compose(text, Loader=DataOnlyLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark else 0
        raise ConfigFileError(file, f"not valid YAML: {err.problem or err}", line=line) from None
    except (yaml.YAMLError, TooLargeError, NotTextError) as err:
        raise ConfigFileError(file, f"not valid YAML: {err}") from None
    if root is None:
        raise ConfigFileError(file, f"{what} is empty")
    if not isinstance(data, dict):
        raise ConfigFileError(file, f"{what} must be a mapping ({keys})", line=1)
    _check_duplicate_keys(file, root, set())
    return data, YamlDocument(file, root)


def check_schema(
    doc: YamlDocument,
    data: Any,
    schema: jsonschema.protocols.Validator,
    where: Sequence[PathPart] = (),
) -> None:
    """Raise the ConfigFileError of the most relevant schema error, if any: an unknown key
    with the known ones (and the nearest), a pattern in words, else jsonschema's message.
    `where`: the key path of `data` in the document (when it is a part of it)."""
    errors = sorted(schema.iter_errors(data), key=lambda e: (json_path(e.absolute_path), e.message))
    if not errors:
        return
    best = jsonschema.exceptions.best_match(errors)
    parts = [*where, *best.absolute_path]
    if best.validator == "additionalProperties" and isinstance(best.instance, dict):
        known = list(best.schema.get("properties", {}))
        unknown = sorted(k for k in best.instance if k not in known)
        if unknown:
            raise doc.error([*parts, unknown[0]], _unknown_key(unknown[0], known), key=True)
    expected = best.schema.get(EXPECTED_KEY) if isinstance(best.schema, dict) else None
    if best.validator == "pattern" and expected:
        raise doc.error(parts, f"{best.instance!r} is not {expected}")
    raise doc.error(parts, best.message)


def _check_duplicate_keys(file: Path, node: yaml.Node, seen: set[int]) -> None:
    """YAML keeps the last of two equal keys silently; a settings file refuses them."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            line = key.start_mark.line + 1
            if isinstance(key, yaml.ScalarNode) and key.value in first:
                reason = f"duplicate key {key.value!r} (first at line {first[key.value]})"
                raise ConfigFileError(file, reason, line=line)
            if isinstance(key, yaml.ScalarNode):
                first[key.value] = line
            _check_duplicate_keys(file, value, seen)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _check_duplicate_keys(file, item, seen)


def _child(node: yaml.Node, part: PathPart) -> tuple[yaml.Node | None, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode) and isinstance(part, str):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == part:
                return key, value
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        return None, node.value[part]
    return None


def _unknown_key(key: str, known: list[str]) -> str:
    near = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return f"unknown key {key!r} (known: {', '.join(known)}){hint}"
