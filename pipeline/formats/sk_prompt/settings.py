"""What an SK prompt configures besides its template: the prompt config of either file
layout, functions offered to the model, and the response format."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any, NamedTuple

from pipeline.capabilities import ToolSpec
from pipeline.formats.builder import ThreadBuilder
from pipeline.quarantine import RecordRejected
from pipeline.sources import TextDocument
from pipeline.sources.text_documents import SKPROMPT_NAME

PLUGIN_SEPARATOR = "-"
"""SK names a plugin function `plugin-function` when it offers it to a model."""


class JsonResponse(NamedTuple):
    """The prompt asks for JSON, with this JSON Schema (None for any JSON object)."""

    schema: Any


def _legacy_variables(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Input variables of a legacy config.json: `input_variables`, or the older
    `input.parameters` with `defaultValue`."""
    variables = config.get("input_variables")
    if isinstance(variables, list):
        return variables
    parameters = (config.get("input") or {}).get("parameters") or []
    return [
        {
            "name": p.get("name"),
            "description": p.get("description"),
            **({"default": p["defaultValue"]} if p.get("defaultValue") not in (None, "") else {}),
            "is_required": p.get("defaultValue") in (None, ""),
        }
        for p in parameters
        if isinstance(p, dict)
    ]


def _from_skprompt(document: TextDocument, source: str) -> dict[str, Any]:
    config = document.config if isinstance(document.config, dict) else {}
    prefix = PurePath(source).name[: -len(SKPROMPT_NAME)].rstrip("_-.")
    name = prefix or PurePath(source).parent.name
    prompt: dict[str, Any] = {
        "name": config.get("name") or name,
        "template": document.text,
        "template_format": config.get("template_format", "semantic-kernel"),
        "input_variables": _legacy_variables(config),
    }
    if config.get("description"):
        prompt["description"] = config["description"]
    settings = config.get("execution_settings") or (
        {"default": config["completion"]} if isinstance(config.get("completion"), dict) else None
    )
    if settings:
        prompt["execution_settings"] = settings
    return prompt


def prompt_config(value: Any, source: str) -> dict[str, Any]:
    """The PromptTemplateConfig of a record: the YAML as it is, or built from a
    skprompt.txt and its config.json. A lone legacy config.json is quarantined."""
    if isinstance(value, TextDocument):
        return _from_skprompt(value, source)
    if not isinstance(value, dict):
        raise RecordRejected(
            "not_an_object",
            f"a Semantic Kernel prompt is an object, not a JSON {type(value).__name__}",
        )
    if "template" not in value and isinstance(value.get("schema"), int):
        raise RecordRejected(
            "missing_field",
            "a legacy Semantic Kernel config.json read without its template: the prompt is "
            "in the skprompt.txt beside it; read the folder (or the skprompt.txt) instead",
        )
    return value


def _settings_in_order(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Execution settings with `default` first, then by service id."""
    settings = config.get("execution_settings") or {}
    keys = sorted(settings, key=lambda k: (k != "default", k))
    return [settings[k] for k in keys if isinstance(settings[k], dict)]


def declared_functions(config: dict[str, Any], builder: ThreadBuilder) -> list[ToolSpec]:
    """Tools for the functions `function_choice_behavior` offers by name. Their parameter
    schemas live in the plugins' code, which a prompt file does not hold."""
    names: list[str] = []
    for settings in _settings_in_order(config):
        behavior = settings.get("function_choice_behavior")
        if not isinstance(behavior, dict):
            continue
        functions = behavior.get("functions")
        if not functions:
            builder.note(
                f"function_choice_behavior {behavior.get('type', '?')} offers every kernel "
                "function; none is named in the prompt, so no tool is declared"
            )
        for function in functions or []:
            if isinstance(function, str) and function not in names:
                names.append(function)
    if names:
        builder.note(
            "tool parameters are defined by the plugins' code, not in the prompt: "
            "declared without a schema"
        )
    return [
        ToolSpec(
            name.replace(".", PLUGIN_SEPARATOR),
            f"Semantic Kernel function {name}.",
            {},
        )
        for name in names
    ]


def json_response(config: dict[str, Any]) -> JsonResponse | None:
    """The JSON response format of the first execution settings that ask for one."""
    for settings in _settings_in_order(config):
        wanted = settings.get("response_format")
        if wanted in ("json_object", "json"):
            return JsonResponse(None)
        if not isinstance(wanted, dict):
            continue
        if wanted.get("type") == "json_schema":
            described = wanted.get("json_schema")
            schema = described.get("schema") if isinstance(described, dict) else None
            return JsonResponse(schema if isinstance(schema, dict) else None)
        if wanted.get("type") in ("json_object", "json"):
            return JsonResponse(None)
    return None
