"""The PyALM ConversationTracker dump shape: `tracker` entries whose roles (the YAML
reader turns `!ConversationRole` tags into role names) are user, assistant, system or
function, with `system_message`, `user_info` and `metadata` around them."""

from __future__ import annotations

from typing import Any

from pipeline.capabilities import ToolSpec
from pipeline.formats.builder import ThreadBuilder
from pipeline.formats.glm.functions import function_spec
from pipeline.formats.glm.settings import DEFAULT_DELIMITERS, CallSettings
from pipeline.formats.glm.system import known_symbols, substitute_symbols, yaml_text
from pipeline.formats.glm.turns import (
    emit_assistant_turn,
    listed_pieces,
    result_text,
    text_pieces,
    without_repeats,
)

TRACKER_ROLES = {
    "user": "user",
    "assistant": "assistant",
    "system": "developer",
    "function": "tool",
}
"""PyALM ConversationRoles (any case) -> what the entry becomes."""
TRACKER_META = ("metadata", "processing", "feedback", "sentiment")
TRACKER_READ = frozenset({"role", "content", "code", "return_value", "index", *TRACKER_META})


def tracker_thread(builder: ThreadBuilder, data: dict[str, Any]) -> None:
    """Fill `builder` from a validated tracker dump; no assistant entry -> prompt-only."""
    calls = CallSettings(DEFAULT_DELIMITERS, False)
    tools = _included_functions(calls, data["tracker"])
    if tools:
        builder.declare_tools(tools)
        builder.note("declared the functions named in the entries' processing.included_functions")
    symbols = known_symbols(calls, tools, True)
    if data.get("system_message"):
        builder.developer(
            substitute_symbols(builder, data["system_message"], "system_message", symbols)
        )
    if data.get("user_info"):
        builder.context(yaml_text(data["user_info"]), "user_info")
    answered = False
    for index, entry in enumerate(data["tracker"]):
        answered |= _tracker_entry(builder, calls, entry, index, symbols)
    if not answered:
        builder.prompt_only("the tracker has no assistant entry: the thread ends with the prompt")
    builder.meta["glm_shape"] = "tracker"
    if data.get("metadata"):
        builder.meta["chat"] = data["metadata"]
    filled = {key: value for key, value in data.items() if value not in (None, {}, [])}
    builder.keep_unread(filled, ("tracker", "system_message", "user_info", "metadata", "id"))


def _included_functions(calls: CallSettings, tracker: list[dict[str, Any]]) -> list[ToolSpec]:
    """The functions PyALM put in the prompt of some turn (`processing.included_functions`),
    each once, in order of first mention."""
    specs: dict[str, ToolSpec] = {}
    for entry in tracker:
        for definition in (entry.get("processing") or {}).get("included_functions") or ():
            spec = function_spec(definition, calls)
            specs.setdefault(spec.name, spec)
    return list(specs.values())


def _tracker_entry(
    builder: ThreadBuilder,
    calls: CallSettings,
    entry: dict[str, Any],
    index: int,
    symbols: dict[str, str],
) -> bool:
    """Add one tracker entry; whether it was an assistant turn."""
    where = f"tracker[{index}]"
    role = TRACKER_ROLES[entry["role"].lower()]
    meta = {key: entry[key] for key in TRACKER_META if entry.get(key) is not None}
    read = TRACKER_READ if entry.get("index") == index else TRACKER_READ - {"index"}
    builder.keep_unread(entry, read, where)
    content = entry.get("content") or ""
    if role == "assistant":
        pieces = text_pieces(builder, calls, content, f"{where}.content")
        if entry.get("code"):
            listed = listed_pieces(
                builder,
                calls,
                {"original_call": entry["code"], **_return_of(entry)},
                f"{where}.code",
            )
            pieces += without_repeats(builder, pieces, listed, f"{where}.code")
        emit_assistant_turn(builder, pieces, meta)
        return bool(pieces)
    if role == "developer":
        builder.developer(
            substitute_symbols(builder, content, f"{where}.content", symbols), meta=meta
        )
    elif role == "tool":
        builder.tool_result(result_text(entry.get("return_value", content)), meta=meta)
    else:
        builder.user(content, meta=meta)
    return False


def _return_of(entry: dict[str, Any]) -> dict[str, Any]:
    return {"return": entry["return_value"]} if "return_value" in entry else {}
