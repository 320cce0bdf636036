"""PyALM function definitions (`available_functions`, `included_functions`: a name, or
{name, help, args, kwargs}) as tool declarations with JSON Schema parameters, and as the
`name(a, b=2): help` lines PyALM lists in a system prompt."""

from __future__ import annotations

from typing import Any

from pipeline.capabilities import ToolSpec
from pipeline.formats.builder import ThreadBuilder, canonical_json
from pipeline.formats.glm.settings import CallSettings

PYTHON_TYPES = {
    "str": "string",
    "string": "string",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "bool": "boolean",
    "boolean": "boolean",
    "list": "array",
    "tuple": "array",
    "dict": "object",
    "none": "null",
}
"""Python type names in function signatures -> JSON Schema types."""


def declare_functions(
    builder: ThreadBuilder, function_settings: Any, calls: CallSettings
) -> tuple[list[ToolSpec], bool]:
    """Declare `available_functions` (unless function calls are disabled); the specs
    and whether they are enabled."""
    if not isinstance(function_settings, dict):
        return [], False
    tools = [function_spec(d, calls) for d in function_settings.get("available_functions") or ()]
    enabled = function_settings.get("enabled", True) is not False
    if tools and not enabled:
        builder.note(
            "function calls are disabled (settings.function_calls.enabled: false); "
            "the available_functions are not declared"
        )
    elif tools:
        builder.declare_tools(tools)
    return tools, enabled


def function_spec(definition: str | dict[str, Any], calls: CallSettings) -> ToolSpec:
    """The tool spec of one definition; records its parameter order in `calls.signatures`."""
    if isinstance(definition, str):
        return ToolSpec(definition)
    name = definition["name"]
    help_text = definition.get("help", definition.get("description"))
    if "args" not in definition and "kwargs" not in definition:
        return ToolSpec(name, help_text)
    required = _parameter_list(definition.get("args"), optional=False)
    optional = _parameter_list(definition.get("kwargs"), optional=True)
    calls.signatures[name] = [param for param, _ in required + optional]
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": dict(required + optional),
    }
    if required:
        parameters["required"] = [param for param, _ in required]
    return ToolSpec(name, help_text, parameters)


def _parameter_list(value: Any, optional: bool) -> list[tuple[str, dict[str, Any]]]:
    """(name, JSON Schema) of each declared parameter: a list of names or of
    {name, type, description, default} objects, or a {name: type-or-default} mapping."""
    if isinstance(value, dict):
        items = [
            {"name": name, "default": spec} if optional else {"name": name, "type": spec}
            for name, spec in value.items()
        ]
    else:
        items = [{"name": item} if isinstance(item, str) else item for item in value or ()]
    return [(item["name"], _parameter_schema(item, optional)) for item in items]


def _parameter_schema(item: dict[str, Any], optional: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    declared = item.get("type")
    json_type = (
        PYTHON_TYPES.get(declared.split("[")[0].strip().lower())
        if isinstance(declared, str)
        else None
    )
    description = item.get("description")
    if declared is not None and json_type is None:
        description = f"Python type {declared}" + (f". {description}" if description else "")
    if json_type:
        schema["type"] = json_type
    if isinstance(description, str) and description:
        schema["description"] = description
    if optional and "default" in item:
        schema["default"] = item["default"]
    return schema


def signature(tool: ToolSpec, calls: CallSettings) -> str:
    """`name(a, b=2): help` for the function list of a system prompt."""
    params = calls.signatures.get(tool.name)
    text = tool.name
    if params is not None:
        properties = (tool.parameters or {}).get("properties", {})
        shown = [
            f"{p}={canonical_json(properties[p]['default'])}"
            if "default" in properties.get(p, {})
            else p
            for p in params
        ]
        text += f"({', '.join(shown)})"
    return f"{text}: {tool.description}" if tool.description else text
