"""A record's tool definitions (`tools`, legacy `functions`, as JSON or a JSON string):
function tools to declare, and hosted tools (code_interpreter, file_search ...) that have
no schema; a code_interpreter is declared as the `python` tool its calls name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from pipeline.capabilities import ToolSpec
from pipeline.formats.builder import json_kind, tool_specs
from pipeline.quarantine import RecordRejected

TOOL_KEYS = ("tools", "functions")
"""Fields holding tool definitions (at the top level, or in a preference record's input)."""
CODE_INTERPRETER = "code_interpreter"
CODE_TOOL = ToolSpec(
    "python",
    "Runs Python code in a stateful interpreter and returns its output (the record's "
    "code_interpreter tool).",
    {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The Python code to run."}},
        "required": ["code"],
    },
)


@dataclass(slots=True)
class Tools:
    """The record's tool definitions: function tools, and whether it declares a
    code_interpreter (whose calls arrive as `python` with the code as arguments)."""

    specs: list[ToolSpec] = field(default_factory=list)
    code_interpreter: bool = False
    hosted: list[Any] = field(default_factory=list)
    """Non-function entries (code_interpreter, file_search ...): no schema to declare."""


def _is_hosted(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("type"), str)
        and entry["type"] != "function"
        and "function" not in entry
        and "name" not in entry
    )


def read_tools(definitions: list[tuple[str, Any]]) -> Tools:
    """Parse every (where, definitions) entry; raises RecordRejected(invalid_tools) naming
    the field."""
    tools = Tools()
    for key, value in definitions:
        if isinstance(value, str):
            try:
                value = orjson.loads(value) if value.strip() else []
            except orjson.JSONDecodeError as err:
                raise RecordRejected(
                    "invalid_tools", f"{key} is a string but not JSON ({err})"
                ) from None
        if value is None:
            continue
        if not isinstance(value, (list, dict)):
            raise RecordRejected(
                "invalid_tools", f"{key} is a JSON {json_kind(value)}, expected a list"
            )
        for index, entry in enumerate(value if isinstance(value, list) else [value]):
            if _is_hosted(entry):
                tools.hosted.append(entry)
                tools.code_interpreter |= entry["type"] == CODE_INTERPRETER
                continue
            tools.specs += tool_specs(entry, f"{key}[{index}]")
    return tools
