"""Read YAML as data only: no tag ever constructs an object or runs code."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml


class DataOnlyLoader(yaml.SafeLoader):
    """SafeLoader that reads any unknown tag (`!fn`, `!ConversationRole`, `!!python/...`)
    as the plain scalar, list or mapping under it, instead of failing or constructing."""


def _untagged(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]


DataOnlyLoader.add_multi_constructor("!", _untagged)
DataOnlyLoader.add_multi_constructor("tag:", _untagged)


def load_yaml_documents(text: str) -> Iterator[Any]:
    """Each document of a (possibly multi-document) YAML text, as plain data."""
    return yaml.load_all(text, Loader=DataOnlyLoader)
