"""Python call code read without running it: `ast.parse` for the calls, `ast.literal_eval`
for their arguments (JSON values only), and text split at a pair of call delimiters
(`START call END`, then a return value as `END value START`). Nothing here is GLM-specific.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

MAX_CALL_CODE = 20_000
"""Call code longer than this is not parsed (kept as text)."""
WHITESPACE = re.compile(r"\s*")


class NotPlainCall(ValueError):
    """Call code that is not a named function applied to literals: what and why."""

    def __init__(self, construct: str, reason: str):
        super().__init__(reason)
        self.construct = construct
        self.reason = reason


class PythonCall(NamedTuple):
    """One call statement: the function's name and its literal arguments as JSON values."""

    name: str
    args: list[Any]
    kwargs: dict[str, Any]


def parse_calls(code: str) -> list[PythonCall]:
    """Each call statement of `code`; raises NotPlainCall for anything else. The code is
    parsed, never run."""
    text = code.strip()
    if len(text) > MAX_CALL_CODE:
        raise NotPlainCall(text[:80] + "…", f"call code over {MAX_CALL_CODE} characters")
    try:
        tree = ast.parse(text, mode="exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
        raise NotPlainCall(text, f"not Python code ({type(err).__name__})") from None
    if not tree.body:
        raise NotPlainCall(text, "no call")
    return [_read_call(statement, text) for statement in tree.body]


def _read_call(statement: ast.stmt, code: str) -> PythonCall:
    segment = ast.get_source_segment(code, statement) or ast.dump(statement)
    call = statement.value if isinstance(statement, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        raise NotPlainCall(segment, "not a call of a named function")
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(
        keyword.arg is None for keyword in call.keywords
    ):
        raise NotPlainCall(segment, "*args / **kwargs unpacking")
    args = [_literal(arg, code) for arg in call.args]
    kwargs = {
        keyword.arg: _literal(keyword.value, code)
        for keyword in call.keywords
        if keyword.arg is not None  # none is: unpacking was refused above
    }
    return PythonCall(call.func.id, args, kwargs)


def _literal(node: ast.expr, code: str) -> Any:
    segment = ast.get_source_segment(code, node) or ast.dump(node)
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise NotPlainCall(segment, "an argument is not a literal") from None
    return _json_value(value, segment)


def _json_value(value: Any, segment: str) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(item, segment) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _json_value(item, segment) for key, item in value.items()}
    raise NotPlainCall(segment, f"the literal is a Python {type(value).__name__}, not JSON")


def first_pair(text: str, pairs: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """The first delimiter pair with a start followed by an end in `text`."""
    for start, end in pairs:
        opened = text.find(start)
        if opened >= 0 and text.find(end, opened + len(start)) >= 0:
            return start, end
    return None


def split_segments(text: str, pair: tuple[str, str]) -> tuple[list[tuple[str, str]], bool]:
    """('text' | 'call' | 'return', body) segments of `text` and whether a start
    delimiter is left unclosed. A return value follows its call between the delimiters
    reversed (PyALM: `START call END` then `END value START`)."""
    start, end = pair
    segments: list[tuple[str, str]] = []
    position = 0
    unclosed = False
    while (opened := text.find(start, position)) >= 0:
        closed = text.find(end, opened + len(start))
        if closed < 0:
            unclosed = True
            break
        segments.append(("text", text[position:opened]))
        segments.append(("call", text[opened + len(start) : closed]))
        position = closed + len(end)
        after = WHITESPACE.match(text, position).end()  # type: ignore[union-attr]
        back = text.find(start, after + len(end)) if text.startswith(end, after) else -1
        if back >= 0:
            segments.append(("return", text[after + len(end) : back]))
            position = back + len(start)
    segments.append(("text", text[position:]))
    return segments, unclosed
