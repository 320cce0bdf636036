"""Tool calls of assistant messages (`tool_calls`, legacy `function_call`, LLaMA-Factory
`tool_call` parts) as call pieces, and the tools they need declared at the end: the
code_interpreter's `python` tool, with its bare-code arguments wrapped as `{"code": ...}`."""

from __future__ import annotations

from typing import Any

import orjson

from pipeline.formats.builder import ThreadBuilder, json_kind
from pipeline.formats.openai.tools import CODE_INTERPRETER, CODE_TOOL, Tools
from pipeline.quarantine import RecordRejected


class CallReader:
    """Reads one thread's tool calls and remembers which tools they call."""

    def __init__(self, builder: ThreadBuilder, tools: Tools):
        self.b = builder
        self.tools = tools
        self.declared = {spec.name for spec in tools.specs}
        self.called: list[str] = []
        """The names of the tools called so far, in order."""

    def calls(self, where: str, message: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The message's `tool_calls`, then its legacy `function_call`, as call pieces."""
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise RecordRejected(
                "missing_field",
                f"{where}.tool_calls is {json_kind(calls)}, expected a list of calls",
            )
        pieces = [
            self.call(f"{where}.tool_calls[{index}]", call)
            for index, call in enumerate(calls or [])
        ]
        legacy = message.get("function_call")
        if legacy is not None:
            pieces.append(self.call(f"{where}.function_call", {"function": legacy}))
        return pieces

    def call(self, where: str, call: Any) -> tuple[Any, ...]:
        """A call object (`{id, function: {name, arguments}}` or flat `{name, arguments}`)
        as the piece ("call", name, arguments, call id or None)."""
        if not isinstance(call, dict):
            raise RecordRejected("invalid_tool_call", f"{where} is not a tool call object")
        function = call.get("function", call)
        if not isinstance(function, dict):
            raise RecordRejected("invalid_tool_call", f"{where}.function is not an object")
        name = function.get("name")
        if not isinstance(name, str) or not name.strip():
            raise RecordRejected("invalid_tool_call", f"{where} has no function name")
        arguments = function.get("arguments", function.get("parameters"))
        call_id = call.get("id")
        self.called.append(name)
        return ("call", name, arguments, call_id if isinstance(call_id, str) and call_id else None)

    def arguments(self, name: str, arguments: Any) -> Any:
        """Arguments as given; the bare code of a code_interpreter's `python` call becomes
        `{"code": ...}` so the call is a JSON object like every other."""
        if name != CODE_TOOL.name or name in self.declared or not self.tools.code_interpreter:
            return arguments
        if isinstance(arguments, str):
            try:
                if isinstance(orjson.loads(arguments), dict):
                    return arguments
            except orjson.JSONDecodeError:
                pass
            self.b.note('python calls hold bare code; wrapped as {"code": ...}')
            return {"code": arguments}
        return arguments

    def finish(self) -> None:
        """Declare the code_interpreter tool if its calls were read, and keep the other
        hosted tools in meta."""
        hosted = self.tools.hosted
        if CODE_TOOL.name in self.called and self.tools.code_interpreter:
            if CODE_TOOL.name not in self.declared:
                self.b.declare_tools([CODE_TOOL])
                self.b.note(
                    "declared the code_interpreter tool as `python`, the name its calls use"
                )
            hosted = [entry for entry in hosted if entry["type"] != CODE_INTERPRETER]
        if hosted:
            self.b.keep("hosted_tools", hosted)
            self.b.note(
                f"kept {len(hosted)} non-function tool(s) without a schema in "
                "meta.extra_fields.hosted_tools"
            )
