"""Input format adapters, one module each, and the registry `--from` names come from."""

from __future__ import annotations

from pipeline.formats import mms
from pipeline.formats.base import InputFormat

FORMATS: dict[str, InputFormat] = {f.name: f for f in (mms.FORMAT,)}
"""Every input format by its `--from` name."""

AUTO = "auto"

__all__ = ["AUTO", "FORMATS", "InputFormat", "get_format"]


def get_format(name: str) -> InputFormat:
    """The format called `name`; raises KeyError naming the known formats."""
    try:
        return FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r} (known: {', '.join(FORMATS)})") from None
