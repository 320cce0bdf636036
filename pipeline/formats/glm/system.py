"""System text: the `system` mapping (`content` / `primary_message`, nested
`system.system`, extra info keys) as developer and context messages, with PyALM's
`[[SYMBOL]]`s filled in where the record tells us their run-time value."""

from __future__ import annotations

import re
from typing import Any

import yaml

from pipeline.capabilities import ToolSpec
from pipeline.formats.builder import ThreadBuilder
from pipeline.formats.glm.functions import signature
from pipeline.formats.glm.settings import ALM_DELIMITERS, GLM_DELIMITERS, CallSettings

SYMBOL = re.compile(r"\[\[([A-Za-z0-9_]+)\]\]")
NAMED_SYMBOLS = {"ASSISTANT": "Assistant", "USER": "User", "SYSTEM": "System"}
"""PyALM's built-in role symbols and their values."""
NO_FUNCTIONS = "No functions available"
"""What PyALM puts for [[LIST_OF_FUNCTIONS]] when no function is registered."""
SYSTEM_TEXT_KEYS = ("content", "primary_message")


def add_system(builder: ThreadBuilder, system: Any, symbols: dict[str, str]) -> None:
    """`content` / `primary_message` -> developer messages, then every other key (the
    nested `system.system` flattened) -> a context message named after it."""
    if isinstance(system, str):
        builder.developer(substitute_symbols(builder, system, "system", symbols))
        return
    developer, contexts = _system_parts(system, "system")
    for where, text in developer:
        content = substitute_symbols(builder, text, where, symbols)
        if content:
            builder.developer(content)
    for name, value in contexts:
        builder.context(yaml_text(value), name)


def _system_parts(system: Any, where: str) -> tuple[list[tuple[str, str]], list[tuple[str, Any]]]:
    developer: list[tuple[str, str]] = []
    contexts: list[tuple[str, Any]] = []
    if not isinstance(system, dict):
        return developer, contexts
    for key, value in system.items():
        if key in SYSTEM_TEXT_KEYS and isinstance(value, str):
            developer.append((f"{where}.{key}", value))
        elif key == "system" and isinstance(value, dict):
            inner_developer, inner_contexts = _system_parts(value, f"{where}.system")
            developer += inner_developer
            contexts += inner_contexts
        elif value not in (None, "", {}, []):
            contexts.append((key, value))
    return developer, contexts


def yaml_text(value: Any) -> str:
    """A mapping or list as readable block YAML (keys in their order), a string as is."""
    if isinstance(value, str):
        return value
    return yaml.safe_dump(
        value, allow_unicode=True, sort_keys=False, default_flow_style=False, width=100
    ).rstrip("\n")


def substitute_symbols(
    builder: ThreadBuilder, text: str, where: str, symbols: dict[str, str]
) -> str:
    """System text with the PyALM `[[SYMBOL]]`s we know filled in as PyALM would; the
    others stay as written and are noted. The original is kept in meta."""
    used: list[str] = []
    unknown: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in symbols:
            used.append(name)
            return symbols[name]
        unknown.append(match.group(0))
        return match.group(0)

    result = SYMBOL.sub(replace, text)
    if used:
        builder.keep(f"{where} (before substitution)", text)
        builder.note(
            f"filled in the PyALM symbol(s) {', '.join(dict.fromkeys(used))} of {where} with "
            "their run-time values (the original is in meta.extra_fields)"
        )
    if unknown:
        builder.note(
            f"{where} keeps the PyALM symbol(s) {', '.join(dict.fromkeys(unknown))}: filled in "
            "at run time, unknown here"
        )
    return result.strip()


def known_symbols(calls: CallSettings, tools: list[ToolSpec], enabled: bool) -> dict[str, str]:
    """The PyALM symbols this record lets us fill in."""
    glm = calls.delimiters[0] if calls.named_delimiters else GLM_DELIMITERS
    alm = calls.delimiters[0] if calls.named_delimiters else ALM_DELIMITERS
    listing = (
        "\n".join(signature(tool, calls) for tool in tools) if tools and enabled else NO_FUNCTIONS
    )
    return {
        **NAMED_SYMBOLS,
        "FUNC_DELIMITER_START": glm[0],
        "FUNC_DELIMITER_END": glm[1],
        "FUNCTION_START": alm[0],
        "FUNCTION_END": alm[1],
        "LIST_OF_FUNCTIONS": listing,
    }
