"""The registry of input formats: every module in `pipeline.formats` that defines a
`FORMAT` is one, registered under its `--from` name, in module-name order."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, MutableMapping
from contextlib import suppress
from pathlib import Path

from pipeline.formats.base import InputFormat

AUTO = "auto"
SHARED_MODULES = frozenset(
    {
        "base",
        "build_rules",
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
        fmt = _format_of(module_info.name)
        if fmt is not None:
            found[fmt.name] = fmt
    return found


def _format_of(module_name: str) -> InputFormat | None:
    """The format the adapter module `module_name` defines (None: it defines none)."""
    module = importlib.import_module(f"{__package__}.{module_name}")
    fmt = getattr(module, "FORMAT", None)
    return fmt if isinstance(fmt, InputFormat) else None


class _Registry(MutableMapping[str, InputFormat]):
    """Every input format by its `--from` name, in module-name order. Importing every
    adapter takes a tenth of a second or more, so they are imported when the whole list is
    first asked for; a format asked for by name is first looked for in the module of that
    name (`-` as `_`), which is where almost every one lives."""

    def __init__(self) -> None:
        self._all: dict[str, InputFormat] | None = None

    def everything(self) -> dict[str, InputFormat]:
        if self._all is None:
            self._all = _discover()
        return self._all

    def __getitem__(self, name: str) -> InputFormat:
        if self._all is None and isinstance(name, str):
            module_name = name.replace("-", "_")
            if module_name.isidentifier() and module_name not in SHARED_MODULES:
                with suppress(ImportError):
                    fmt = _format_of(module_name)
                    if fmt is not None and fmt.name == name:
                        return fmt
        return self.everything()[name]

    def __contains__(self, name: object) -> bool:
        try:
            self[name]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def __setitem__(self, name: str, fmt: InputFormat) -> None:
        self.everything()[name] = fmt

    def __delitem__(self, name: str) -> None:
        del self.everything()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.everything())

    def __len__(self) -> int:
        return len(self.everything())


FORMATS: MutableMapping[str, InputFormat] = _Registry()
"""Every input format by its `--from` name."""


def get_format(name: str) -> InputFormat:
    """The format called `name`; raises KeyError naming the known formats."""
    try:
        return FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r} (known: {', '.join(FORMATS)})") from None
