"""A GLM record's settings (PyALM nests them as `settings.settings`) and what they say
about function calls: the delimiters the calls are written between, with PyALM's
defaults when the record names none."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.formats.builder import ThreadBuilder

GLM_DELIMITERS = ("➡️", "⬅️")
ALM_DELIMITERS = ("+++", "---")
DEFAULT_DELIMITERS = (GLM_DELIMITERS, ALM_DELIMITERS, ("$$$CODE_START", "$$$CODE_END"))
"""PyALM's default function-call delimiters over its versions: GLM (2023, the era of this
history format and of the FUNC_DELIMITER_* symbols), ALM's `function_sequence`, and
ALMSettings after 2024. A record that names its own (`function_sequence`,
`atomic_sequences.functions`) is read with those only."""


@dataclass(slots=True)
class CallSettings:
    """How this record writes and names function calls."""

    delimiters: tuple[tuple[str, str], ...]
    named_delimiters: bool
    signatures: dict[str, list[str]] = field(default_factory=dict)
    """Parameter names in order, for the functions whose args/kwargs are declared."""


def merged_settings(builder: ThreadBuilder, value: Any, where: str = "settings") -> dict[str, Any]:
    """Settings with `settings.settings` (PyALM's nesting) merged in; the nested wins."""
    if not isinstance(value, dict):
        return {}
    merged = {key: item for key, item in value.items() if key != "settings"}
    nested = merged_settings(builder, value.get("settings"), f"{where}.settings")
    for key in sorted(nested.keys() & merged.keys()):
        builder.note(f"{where}.{key} is also set in {where}.settings; used the nested one")
    merged.update(nested)
    return merged


def call_settings(settings: dict[str, Any]) -> CallSettings:
    """The delimiters the (merged) settings name, or PyALM's defaults if they name none."""
    atomic = settings.get("atomic_sequences")
    named = [settings.get("function_sequence")]
    named.append(atomic.get("functions") if isinstance(atomic, dict) else None)
    pairs = tuple(dict.fromkeys((pair[0], pair[1]) for pair in named if pair))
    return CallSettings(pairs, True) if pairs else CallSettings(DEFAULT_DELIMITERS, False)
