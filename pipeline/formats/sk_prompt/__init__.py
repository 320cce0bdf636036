"""Semantic Kernel prompts: PromptTemplateConfig YAML (`template`, `template_format`
semantic-kernel / handlebars / liquid / jinja2, `input_variables`, `execution_settings`)
and the legacy `skprompt.txt` + `config.json` pair.

The template is rendered in the sandbox with the variables' defaults; its `<message
role="...">` tags become messages (system -> developer). Values of variables not marked
`allow_dangerously_set_content` are escaped before rendering, as SK does, so a value can
never open a message of its own. A template that needs a plugin call or helper to render
is quarantined as `unrenderable_template`, naming it; it is never emitted with raw braces.

Example: a PromptTemplateConfig (as its YAML reads) and the prompt-only thread it
becomes.

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> config = {
...     "name": "Greet",
...     "template": '<message role="system">Be brief.</message>'
...     '<message role="user">Hi {{$name}}</message>',
...     "template_format": "semantic-kernel",
...     "input_variables": [{"name": "name", "default": "Ada"}],
... }
>>> [thread] = to_threads(Record("greet.yaml", "greet.yaml", config), ConvertOptions())
>>> [(m.role, m.content) for m in thread.messages], thread.meta["prompt_only"]
([('developer', 'Be brief.'), ('user', 'Hi Ada')], True)
"""

from __future__ import annotations

import html
from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder, source_thread_id
from pipeline.formats.sk_prompt.chat_tags import (
    ChatMessage,
    OutsideText,
    has_message_tags,
    split_messages,
)
from pipeline.formats.sk_prompt.settings import (
    declared_functions,
    json_response,
    prompt_config,
)
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.schemas import schema_problem
from pipeline.sources import Record, TextDocument
from pipeline.templates import (
    Deadline,
    Rendered,
    TemplateError,
    UnrenderableTemplate,
    UnsafeTemplate,
    engine_name,
    render,
)

NAME = "sk-prompt"
SCHEMA = "sk-prompt"
TEMPLATE_FORMATS = ("semantic-kernel", "handlebars", "liquid", "jinja2")
ROLES = {
    "system": "developer",
    "developer": "developer",
    "user": "user",
    "assistant": "assistant",
    "tool": "context",
}
META_KEYS = ("name", "description", "template_format", "output_variable")


def sniff(value: object) -> Sniff:
    """Sure for skprompt.txt and for YAML naming an SK template_format; likely for a
    template with input_variables or execution_settings; half sure for a lone legacy
    config.json (so it is quarantined with the right hint)."""
    if isinstance(value, TextDocument):
        if value.kind == "skprompt":
            return Sniff(1.0, "a skprompt.txt template")
        return Sniff(0.0, f"a {value.kind} script, not an SK prompt")
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object")
    if (
        isinstance(value.get("template_format"), str)
        and value["template_format"] in TEMPLATE_FORMATS
    ):
        return Sniff(1.0, f"template_format {value['template_format']}")
    if isinstance(value.get("template"), str) and (
        "input_variables" in value or "execution_settings" in value
    ):
        return Sniff(0.9, "template with input_variables/execution_settings")
    if (
        isinstance(value.get("schema"), int)
        and "template" not in value
        and ("execution_settings" in value or "completion" in value)
    ):
        return Sniff(0.5, "a legacy config.json of an SK prompt")
    return Sniff(0.0, "no SK template, template_format or execution_settings")


def _escaped(value: Any) -> Any:
    """A variable's value HTML-encoded as SK encodes untrusted content."""
    if isinstance(value, str):
        return html.escape(value)
    if isinstance(value, list):
        return [_escaped(item) for item in value]
    if isinstance(value, dict):
        return {key: _escaped(item) for key, item in value.items()}
    return value


def _variables(config: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The values to render with (defaults; optional variables without one are empty)
    and the names whose values are trusted (allow_dangerously_set_content)."""
    values: dict[str, Any] = {}
    trusted: set[str] = set()
    trust_all = config.get("allow_dangerously_set_content") is True
    for variable in config.get("input_variables") or []:
        name = variable["name"]
        if "default" in variable and variable["default"] is not None:
            values[name] = variable["default"]
        elif variable.get("is_required") is False:
            values[name] = ""
        if trust_all or variable.get("allow_dangerously_set_content") is True:
            trusted.add(name)
    return values, trusted


def _render(template: str, engine: str, values: dict[str, Any], deadline: Deadline) -> Rendered:
    try:
        return render(template, engine, values, deadline=deadline)
    except UnrenderableTemplate as err:
        raise RecordRejected(
            "unrenderable_template",
            f"the {engine} template cannot be rendered without running code: {err}",
        ) from None
    except UnsafeTemplate as err:
        raise RecordRejected(
            "unsafe_template", f"the {engine} template was refused: {err}"
        ) from None
    except TemplateError as err:
        raise RecordRejected("invalid_template", f"the {engine} template: {err}") from None


def _rendered_messages(config: dict[str, Any]) -> tuple[list[ChatMessage | OutsideText], Rendered]:
    """Render the template; with message tags, untrusted values are escaped first."""
    engine = engine_name(config.get("template_format") or "semantic-kernel")
    values, trusted = _variables(config)
    guarded = {k: v if k in trusted else _escaped(v) for k, v in values.items()}
    deadline = Deadline()  # both renders share the record's time limit
    rendered = _render(config["template"], engine, guarded, deadline)
    if has_message_tags(rendered.text):
        return split_messages(rendered.text), rendered
    rendered = _render(config["template"], engine, values, deadline)
    return [ChatMessage("user", rendered.text.strip(), {})], rendered


def _add_message(builder: ThreadBuilder, part: ChatMessage | OutsideText, index: int) -> None:
    if isinstance(part, OutsideText):
        builder.note(f"text outside <message> tags kept as a user message: {part.text[:60]!r}")
        builder.user(part.text)
        return
    role = ROLES.get(part.role.lower())
    if role is None:
        raise RecordRejected(
            "unknown_role",
            f'<message role="{part.role}"> (message {index + 1}) has a role SK does not define '
            f"(expected one of {', '.join(ROLES)})",
        )
    extra = {"attributes": part.attributes} if part.attributes else {}
    if role == "assistant":
        builder.assistant(part.content, meta=extra)
    elif role == "context":
        builder.context(part.content, part.attributes.get("name"), meta=extra)
    else:
        getattr(builder, role)(part.content, meta=extra)


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per prompt: the rendered messages, prompt-only unless the template
    itself ends with an assistant message."""
    config = prompt_config(record.value, record.source)
    problem = schema_problem(config, SCHEMA)
    if problem is not None:
        where = problem.path or "the prompt"
        raise RecordRejected("missing_field", f"{where}: {problem.message}", problem.details)
    if not config.get("template"):
        raise RecordRejected(
            "empty_conversation",
            f"prompt {config.get('name', '(unnamed)')!r} has no template: its instructions come "
            "from elsewhere (e.g. an agent's code), so there is nothing to convert",
        )
    parts, rendered = _rendered_messages(config)
    meta: dict[str, Any] = {"prompt": {k: config[k] for k in META_KEYS if k in config}}
    if config.get("execution_settings"):
        meta["execution_settings"] = config["execution_settings"]
    builder = ThreadBuilder(record, NAME, options, thread_id=source_thread_id(record), meta=meta)
    for index, part in enumerate(parts):
        _add_message(builder, part, index)
    if rendered.missing:
        builder.meta["missing_variables"] = sorted(set(rendered.missing))
        builder.note(
            "no value for " + ", ".join(sorted(set(rendered.missing))) + ": placeholders kept"
        )
    tools = declared_functions(config, builder)
    if tools:
        builder.declare_tools(tools)
    wanted = json_response(config)
    if wanted is not None:
        builder.respond_in("json", schema=wanted.schema)
    if not parts or not isinstance(parts[-1], ChatMessage) or parts[-1].role != "assistant":
        builder.prompt_only("a prompt template: the assistant turn is what the model generates")
    return [builder.build()]


FORMAT = InputFormat(
    name=NAME,
    summary="Semantic Kernel prompt YAML and skprompt.txt + config.json (templates rendered "
    "in a sandbox)",
    sniff=sniff,
    to_threads=to_threads,
)
