"""Input format adapters, one module each, and the registry `--from` names come from."""

from __future__ import annotations

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.registry import AUTO, FORMATS, get_format

__all__ = ["AUTO", "FORMATS", "ConvertOptions", "InputFormat", "Sniff", "get_format"]
