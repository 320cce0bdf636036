"""The pieces of a turn (text, function calls, return values), read from calls written
in the text between delimiters or listed in `function_calls`, and the messages of an
assistant turn made from them. Calls that cannot be read stay text and are listed in
`meta.unrenderable`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.formats.builder import ThreadBuilder, canonical_json
from pipeline.formats.glm.calls import NotPlainCall, first_pair, parse_calls, split_segments
from pipeline.formats.glm.settings import CallSettings
from pipeline.quarantine import RecordRejected

RESULT_KEYS = ("return", "return_value", "result", "output")
"""Fields of a function_calls item that hold the call's return value."""
CALL_KEYS = frozenset({"name", "parameters", "arguments", "original_call", *RESULT_KEYS})


@dataclass(slots=True)
class Piece:
    """One message of an assistant turn: text, a call or a call's return value."""

    kind: str
    text: str = ""
    name: str = ""
    arguments: Any = None
    code: str | None = None


def text_pieces(builder: ThreadBuilder, calls: CallSettings, text: str, where: str) -> list[Piece]:
    """Text, calls and return values of an assistant text, in order. A call that cannot
    be read stays in the text as written (with its return value) and is listed."""
    pair = first_pair(text, calls.delimiters)
    if pair is None:
        return [Piece("text", text.strip())] if text.strip() else []
    start, end = pair
    segments, unclosed = split_segments(text, pair)
    if unclosed:
        builder.note(f"{where} opens a call with {start!r} that is never closed; kept as text")
    pieces: list[Piece] = []
    buffer = ""
    last_read = False
    for kind, body in segments:
        if kind == "text":
            buffer += body
            continue
        if kind == "return" and not last_read:
            buffer += end + body + start
            continue
        if kind == "call":
            try:
                found = _code_pieces(builder, calls, body)
            except NotPlainCall as err:
                builder.unrenderable(err.construct, where, f"function call not read: {err.reason}")
                buffer += start + body + end
                last_read = False
                continue
        else:
            found = [Piece("result", body.strip(), name=pieces[-1].name)]
        if buffer.strip():
            pieces.append(Piece("text", buffer.strip()))
        buffer = ""
        pieces.extend(found)
        last_read = True
    if buffer.strip():
        pieces.append(Piece("text", buffer.strip()))
    return pieces


def _code_pieces(builder: ThreadBuilder, calls: CallSettings, code: str) -> list[Piece]:
    """Call pieces of call code; raises NotPlainCall."""
    pieces = []
    for name, args, kwargs in parse_calls(code):
        arguments = _arguments(builder, calls, name, args, kwargs)
        pieces.append(Piece("call", name=name, arguments=arguments, code=code.strip()))
    return pieces


def _arguments(
    builder: ThreadBuilder, calls: CallSettings, name: str, args: list[Any], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Named arguments: positional ones named after the declared parameters; without a
    declaration, `{"args": [...], "kwargs": {...}}`."""
    if not args:
        return kwargs
    params = calls.signatures.get(name)
    if params is not None and len(args) <= len(params):
        named = dict(zip(params, args, strict=False))
        clash = sorted(named.keys() & kwargs.keys())
        if clash:
            raise NotPlainCall(name, f"argument {clash[0]!r} is given twice")
        return {**named, **kwargs}
    builder.note(
        f"positional arguments of a {name!r} call kept as {{args, kwargs}}: "
        "its parameters are not declared"
    )
    return {"args": args, "kwargs": kwargs}


def listed_pieces(
    builder: ThreadBuilder, calls: CallSettings, value: Any, where: str
) -> list[Piece]:
    """Calls and return values of a `function_calls` field: {name, parameters} items
    (the spec) or {original_call, return} items (PyALM's tracker)."""
    items = value if isinstance(value, list) else [] if value is None else [value]
    pieces: list[Piece] = []
    for index, item in enumerate(items):
        item_where = f"{where}[{index}]" if isinstance(value, list) else where
        pieces.extend(_item_pieces(builder, calls, item, item_where))
    return pieces


def _item_pieces(
    builder: ThreadBuilder, calls: CallSettings, item: dict[str, Any], where: str
) -> list[Piece]:
    extra = {k: v for k, v in item.items() if k not in CALL_KEYS}
    if extra:
        builder.keep(where, extra)
    if isinstance(item.get("original_call"), str):
        try:
            pieces = _code_pieces(builder, calls, item["original_call"])
        except NotPlainCall as err:
            builder.unrenderable(err.construct, where, f"function call not read: {err.reason}")
            builder.keep(f"{where}.original_call", item["original_call"])
            return []
    elif isinstance(item.get("name"), str):
        arguments = item.get("parameters", item.get("arguments"))
        pieces = [
            Piece("call", name=item["name"], arguments=_parameters(builder, arguments, where))
        ]
    else:
        raise RecordRejected(
            "invalid_tool_call", f"{where} has neither a name nor an original_call"
        )
    result_key = next((key for key in RESULT_KEYS if key in item), None)
    if result_key is not None:
        pieces.append(Piece("result", result_text(item[result_key]), name=pieces[-1].name))
    return pieces


def _parameters(builder: ThreadBuilder, value: Any, where: str) -> Any:
    if isinstance(value, list):
        builder.note(f"{where}.parameters is a list; kept as {{args: [...]}}")
        return {"args": value}
    return value


def result_text(value: Any) -> str:
    """A return value as message text: a string as is, anything else as canonical JSON."""
    return value if isinstance(value, str) else canonical_json(value)


def without_repeats(
    builder: ThreadBuilder, pieces: list[Piece], listed: list[Piece], where: str
) -> list[Piece]:
    """Listed calls and results (from the field at `where`) that the text does not already
    hold: PyALM writes a call both in the text and in function_calls."""
    seen = {_piece_key(piece) for piece in pieces}
    kept = [piece for piece in listed if _piece_key(piece) not in seen]
    if len(kept) < len(listed):
        builder.note(f"{where} repeats calls written in the text; kept once")
    return kept


def _piece_key(piece: Piece) -> tuple[str, str]:
    if piece.kind == "call":
        return piece.kind, f"{piece.name}:{canonical_json(piece.arguments)}"
    return piece.kind, piece.text


def emit_assistant_turn(builder: ThreadBuilder, pieces: list[Piece], meta: dict[str, Any]) -> None:
    """Add the pieces of one assistant turn; the entry's meta goes with the first."""
    for index, piece in enumerate(pieces):
        piece_meta = meta if index == 0 else {}
        if piece.kind == "text":
            builder.assistant(piece.text, meta=piece_meta)
        elif piece.kind == "call":
            code_meta = {"call_code": piece.code} if piece.code else {}
            builder.tool_call(piece.name, piece.arguments, meta={**piece_meta, **code_meta})
        else:
            builder.tool_result(piece.text, name=piece.name or None, meta=piece_meta)
