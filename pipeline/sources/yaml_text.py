"""Read YAML as data only: no tag ever constructs an object or runs code.

Known application tags get explicit constructors (PyALM's `!ConversationRole 'USER'` is
the string, PPE's `!fn`/`!fn#` blocks stay text under a `{"!fn": code}` key); tags that
would build Python objects (`!!python/...`) are refused; any other local tag is read as
the plain value under it. Aliases are bounded, so a "billion laughs" document is refused
instead of expanded; nesting can be bounded too, so a document nested too deep is refused
as soon as the loader reaches the bound, before it builds (or even scans) the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from pipeline.sources.jsonable import to_jsonable

PYTHON_TAG_PREFIXES = ("tag:yaml.org,2002:python/", "!python/", "!!python/")
TEXT_BLOCK_TAGS = ("!fn", "!fn#")
"""PPE function blocks: kept as their source text, never run. (YAML allows no `#` in a
tag: `!fn#` arrives written `!fn%23`, which the scanner decodes to `!fn#`.)"""
SCALAR_TAGS = ("!ConversationRole",)
"""PyALM enums dumped by name (`!ConversationRole 'USER'`): the name is the value."""


class UnsafeYamlError(yaml.YAMLError):
    """The YAML asks for a Python object (`!!python/object/apply:os.system` ...)."""


class TooDeepYamlError(yaml.YAMLError):
    """The YAML nests sequences and mappings deeper than the loader's `max_depth`."""


class DataOnlyLoader(yaml.SafeLoader):
    """SafeLoader with explicit constructors for the known tags and a refusal for
    Python object tags; other unknown tags read as the plain value under them. With
    `max_depth`, a sequence or mapping nested deeper is refused (TooDeepYamlError) the
    moment its start is read: the work done stays bounded by the depth allowed, whatever
    the depth of the file (PyYAML's scanner costs more per token the deeper a flow
    collection nests)."""

    max_depth: int | None = None
    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.max_depth is None or not self.check_event(yaml.CollectionStartEvent):
            return super().compose_node(parent, index)
        if self._depth >= self.max_depth:
            # types-PyYAML leaves Parser.peek_event unannotated
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise TooDeepYamlError(
                f"the YAML nests sequences and mappings more than {self.max_depth} levels "
                f"deep (line {mark.line + 1}, column {mark.column + 1})"
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _plain(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]


def _where(node: yaml.Node) -> str:
    mark = node.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _tagged(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> Any:
    tag = node.tag
    if tag.startswith(PYTHON_TAG_PREFIXES):
        shown = tag.replace("tag:yaml.org,2002:", "!!")
        raise UnsafeYamlError(
            f"refused the YAML tag {shown} at {_where(node)}: tags that construct Python "
            "objects are never read"
        )
    if tag in TEXT_BLOCK_TAGS:
        return {tag: _plain(loader, node)}
    return _plain(loader, node)


def _scalar(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        raise yaml.constructor.ConstructorError(
            None, None, f"{node.tag} must tag a plain value", node.start_mark
        )
    return loader.construct_scalar(node)


for _tag in SCALAR_TAGS:
    DataOnlyLoader.add_constructor(_tag, _scalar)
DataOnlyLoader.add_multi_constructor("!", _tagged)
DataOnlyLoader.add_multi_constructor("tag:", _tagged)


def load_yaml_documents(text: str, max_depth: int | None = None) -> Iterator[Any]:
    """Each document of a (possibly multi-document) YAML text, as constructed by the
    data-only loader (aliases still shared: pass each through `to_jsonable`). A document
    nesting sequences and mappings more than `max_depth` levels raises TooDeepYamlError
    once that depth is reached, before anything deeper is read."""
    loader = DataOnlyLoader(text)
    loader.max_depth = max_depth
    try:
        # types-PyYAML leaves BaseConstructor.check_data unannotated
        while loader.check_data():  # type: ignore[no-untyped-call]
            yield loader.get_data()
    finally:
        loader.dispose()


def load_yaml(text: str, max_values: int = 1_000_000) -> Any:
    """One YAML document as plain JSON-compatible data. Raises yaml.YAMLError (with line
    and column), UnsafeYamlError for Python tags, TooLargeError past `max_values` nodes."""
    return to_jsonable(yaml.load(text, Loader=DataOnlyLoader), max_values)
