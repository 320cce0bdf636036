"""The GLM spec shape: a `history` of user / assistant / user_interaction entries
(single-key mappings or {role, content}) with chat `meta`, `settings` and `system`."""

from __future__ import annotations

from typing import Any

from pipeline.formats.builder import ThreadBuilder, canonical_json
from pipeline.formats.glm.functions import declare_functions
from pipeline.formats.glm.settings import CallSettings, call_settings, merged_settings
from pipeline.formats.glm.system import add_system, known_symbols, yaml_text
from pipeline.formats.glm.turns import (
    Piece,
    emit_assistant_turn,
    listed_pieces,
    text_pieces,
    without_repeats,
)

ENTRY_ROLES = ("user", "assistant", "user_interaction")
ENTRY_META = {
    "user": ("meta", "sentiment"),
    "assistant": ("meta", "feedback"),
    "user_interaction": ("meta",),
}
"""Entry fields that go to the message's meta."""


def history_thread(builder: ThreadBuilder, data: dict[str, Any]) -> None:
    """Fill `builder` from a validated history record; no assistant entry -> prompt-only."""
    settings = merged_settings(builder, data.get("settings"))
    calls = call_settings(settings)
    tools, enabled = declare_functions(builder, settings.get("function_calls"), calls)
    add_system(builder, data.get("system"), known_symbols(calls, tools, enabled))
    answered = False
    for index, entry in enumerate(data["history"]):
        answered |= _history_entry(builder, calls, entry, f"history[{index}]")
    if not answered:
        builder.prompt_only("the history has no assistant entry: the thread ends with the prompt")
    builder.meta["glm_shape"] = "history"
    if data.get("meta"):
        builder.meta["chat"] = data["meta"]
    if settings:
        builder.meta["chat_settings"] = settings
    builder.keep_unread(data, ("history", "meta", "settings", "system", "id"))


def _entry(entry: dict[str, Any], where: str) -> tuple[str, dict[str, Any], str]:
    """(role, fields, where the fields are) of a history entry in either shape."""
    if "role" in entry:
        return entry["role"], {k: v for k, v in entry.items() if k != "role"}, where
    ((role, body),) = entry.items()
    if body is None:
        body = {}
    elif isinstance(body, str):
        body = {"content": body}
    return role, body, f"{where}.{role}"


def _history_entry(
    builder: ThreadBuilder, calls: CallSettings, entry: dict[str, Any], where: str
) -> bool:
    """Add one history entry; whether it was an assistant turn."""
    role, body, field_where = _entry(entry, where)
    meta = {key: body[key] for key in ENTRY_META[role] if body.get(key) is not None}
    content = body.get("content") or ""
    calls_where = f"{field_where}.function_calls"
    listed = listed_pieces(builder, calls, body.get("function_calls"), calls_where)
    rest = {
        key: value
        for key, value in body.items()
        if key not in ("content", "function_calls", *ENTRY_META[role])
    }
    if role == "user_interaction" and not content and rest:
        content, rest = yaml_text(rest), {}
    builder.keep_unread(rest, where=field_where)
    if role == "assistant":
        pieces = text_pieces(builder, calls, content, f"{field_where}.content")
        pieces += without_repeats(builder, pieces, listed, calls_where)
        if not pieces:
            builder.note(f"{where} is an empty assistant entry; left out")
        emit_assistant_turn(builder, pieces, meta)
        return bool(pieces)
    if role == "user":
        builder.user(content, meta=meta)
    else:
        builder.context(content, "user_interaction", meta=meta)
    _user_calls(builder, listed, field_where)
    return False


def _user_calls(builder: ThreadBuilder, pieces: list[Piece], where: str) -> None:
    """Calls a user made (the spec allows them): MMS tool calls are the assistant's, so
    the call and its return value become context messages named after the function."""
    if not pieces:
        return
    builder.note(f"{where}.function_calls are calls the user made; kept as context messages")
    for piece in pieces:
        if piece.kind == "call":
            builder.context(
                canonical_json({"called_by": "user", "arguments": piece.arguments}), piece.name
            )
        else:
            builder.context(piece.text, piece.name)
