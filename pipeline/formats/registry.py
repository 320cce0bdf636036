"""The registry of input formats: every module in `pipeline.formats` that defines a
`FORMAT` is one, registered under its `--from` name, in module-name order."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from pipeline.formats.base import InputFormat

AUTO = "auto"
SHARED_MODULES = frozenset(
    {
        "base",
        "builder",
        "detect",
        "field_mapping",
        "follow_ups",
        "media_tags",
        "record_values",
        "registry",
        "tool_prompt",
        "typescript",
    }
)
"""Modules of this package that serve the adapters rather than being one."""


def _discover() -> dict[str, InputFormat]:
    found: dict[str, InputFormat] = {}
    for module_info in sorted(
        pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name
    ):
        if module_info.name in SHARED_MODULES:
            continue
        module = importlib.import_module(f"{__package__}.{module_info.name}")
        fmt = getattr(module, "FORMAT", None)
        if isinstance(fmt, InputFormat):
            found[fmt.name] = fmt
    return found


FORMATS: dict[str, InputFormat] = _discover()
"""Every input format by its `--from` name."""


def get_format(name: str) -> InputFormat:
    """The format called `name`; raises KeyError naming the known formats."""
    try:
        return FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r} (known: {', '.join(FORMATS)})") from None
