"""What a script's front-matter means for its threads: the template engine and the
variables (front-matter defaults), the character and the roles that speak as the
assistant, the expected response format, and what goes to meta. The scripts it names
(`type`, `extends`, `import`, `roles`) are recorded, never opened."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.formats.builder import a_json_kind
from pipeline.formats.ppe.steps import Conditional, Function, Message, Script, Step
from pipeline.quarantine import RecordRejected
from pipeline.schemas import schema_problem
from pipeline.templates import Deadline, TemplateError, engine_name

SCHEMA = "ppe"
"""schemas/ppe.schema.json: the front-matter's known keys and their shapes."""
DEFAULT_ENGINE = "hf"
ROLES = {"system": "developer", "user": "user", "assistant": "assistant"}
"""PPE roles -> MMS roles."""
BUILT_IN_TYPES = ("char", "lib", "type")
"""`type` values that name no script to inherit from (`char` is handled on its own)."""
DESCRIPTIVE = ("type", "name", "description", "tag", "version", "character")
"""Front-matter keys copied to `meta.ppe`."""
CONFIGURATION = frozenset(
    {
        "_id",
        "type",
        "templateFormat",
        "contentType",
        "modelPattern",
        "extends",
        "import",
        "export",
        "input",
        "output",
        "parameters",
        "prompt",
        "tag",
        "version",
        "test",
        "roles",
        "llmStream",
        "autoRunLLMIfPromptAvailable",
        "forceJson",
        "shouldAppendResponse",
        "disableLlmRequest",
    }
)
"""Front-matter keys that configure the script rather than give a template a value."""
PROMPT_SETTINGS = frozenset({"messages", "stop_words", "add_generation_prompt"})
JSON_TYPES = ("json", "json_object")


@dataclass(slots=True)
class ScriptContext:
    """The front-matter, read once per script."""

    front: dict[str, Any]
    engine: str
    variables: dict[str, Any]
    character: str | None
    speakers: dict[str, str]
    """Lower-cased role keys that speak as the assistant -> the name as written."""
    respond_json: bool
    schema: Any
    functions: list[Function] = field(default_factory=list)
    prompt_messages: list[Message] = field(default_factory=list)
    deadline: Deadline = field(default_factory=Deadline)
    """One time limit for every template the script renders."""

    def role(self, message: Message) -> tuple[str, str | None]:
        """The MMS role of a message, and its speaker when a character speaks."""
        key = message.role.lower()
        if key in ROLES:
            return ROLES[key], None
        if key in self.speakers:
            return "assistant", message.role
        if self.speakers:
            known = ", ".join(sorted(set(self.speakers.values())))
            hint = f"nor a character of this script ({known})"
        else:
            hint = "(character roles need `type: char` or `roles:`)"
        raise RecordRejected(
            "unknown_role",
            f"line {message.line}: role `{message.role}` is not system, user or assistant {hint}",
        )


def read_context(script: Script) -> ScriptContext:
    """The context of a script; raises RecordRejected for an unknown `templateFormat`,
    an unknown role key, or `input`/`prompt` entries of the wrong shape."""
    front = script.front_matter
    problem = schema_problem(front, SCHEMA)
    if problem is not None:
        where = f"front-matter {problem.path}" if problem.path else "the front-matter"
        raise RecordRejected("missing_field", f"{where}: {problem.message}", problem.details)
    template_format = front.get("templateFormat", DEFAULT_ENGINE)
    try:
        engine = engine_name(str(template_format))
    except TemplateError:
        raise RecordRejected(
            "invalid_template",
            f"front-matter templateFormat {template_format!r} is not a template format "
            "this pipeline renders (hf, golang, fstring and their aliases)",
        ) from None
    character = _character_name(front)
    given = front.get("parameters")
    parameters = given if isinstance(given, dict) else {}
    response = parameters.get("response_format")
    kind = response.get("type") if isinstance(response, dict) else response
    context = ScriptContext(
        front=front,
        engine=engine,
        variables=_variables(front),
        character=character,
        speakers=_speakers(front, character),
        respond_json=kind in JSON_TYPES or front.get("forceJson") is True,
        schema=front.get("output") if isinstance(front.get("output"), dict) else None,
        functions=list(_functions(script.steps)),
        prompt_messages=_prompt_messages(front),
    )
    for message in (*context.prompt_messages, *_messages(script.steps)):
        context.role(message)
    return context


def _character_name(front: dict[str, Any]) -> str | None:
    character = front.get("character")
    for value in (
        front.get("name"),
        character.get("name") if isinstance(character, dict) else None,
    ):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _speakers(front: dict[str, Any], character: str | None) -> dict[str, str]:
    """Role keys that are characters: in a `type: char` script (or one with `roles:`),
    the script's own character and every role listed in `roles` (or `character.roles`)."""
    inner = front.get("character")
    listed = [front.get("roles"), inner.get("roles") if isinstance(inner, dict) else None]
    names = [name for roles in listed for name in _role_names(roles)]
    if front.get("type") != "char" and not names:
        return {}
    if character:
        names.insert(0, character)
    return {name.lower(): name for name in names}


def _role_names(roles: Any) -> list[str]:
    if isinstance(roles, dict):
        return [str(name) for name in roles]
    if isinstance(roles, list):
        return [str(name) for name in roles if isinstance(name, (str, int))]
    return []


def _input_entries(value: Any) -> list[tuple[str, Any]]:
    """(name, spec) of each `input` entry: `- name`, `- name: {spec}` or `{name: spec}`."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [(str(name), spec) for name, spec in value.items()]
    if isinstance(value, str):
        return [(value, None)]
    if not isinstance(value, list):
        raise RecordRejected(
            "missing_field", f"front-matter input is {a_json_kind(value)}, not a list or mapping"
        )
    entries: list[tuple[str, Any]] = []
    for index, entry in enumerate(value):
        if isinstance(entry, str):
            entries.append((entry, None))
        elif isinstance(entry, dict):
            entries.extend((str(name), spec) for name, spec in entry.items())
        else:
            raise RecordRejected(
                "missing_field",
                f"front-matter input[{index}] is {a_json_kind(entry)}, not a name or a mapping",
            )
    return entries


def _variables(front: dict[str, Any]) -> dict[str, Any]:
    """Template values, lowest precedence first: the front-matter's own keys (PPE's
    runtime object), `prompt:` values, then `input` entries' `default`/`value`. A
    `type: type` script's name and description document the type, so they are not its
    inputs' values."""
    variables = {k: v for k, v in front.items() if k not in CONFIGURATION}
    if front.get("type") == "type":
        for key in ("name", "description", "character"):
            variables.pop(key, None)
    prompt = front.get("prompt")
    if isinstance(prompt, dict):
        variables.update({k: v for k, v in prompt.items() if k not in PROMPT_SETTINGS})
    for name, spec in _input_entries(front.get("input")):
        if isinstance(spec, dict):
            for key in ("default", "value"):
                if key in spec:
                    variables[name] = spec[key]
                    break
    return variables


def _prompt_messages(front: dict[str, Any]) -> list[Message]:
    """`prompt.messages` of the front-matter ({role, content} entries): the first messages."""
    prompt = front.get("prompt")
    entries = prompt.get("messages") if isinstance(prompt, dict) else None
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise RecordRejected(
            "missing_field", f"front-matter prompt.messages is {a_json_kind(entries)}, not a list"
        )
    messages = []
    for index, entry in enumerate(entries):
        role = entry.get("role") if isinstance(entry, dict) else None
        content = entry.get("content") if isinstance(entry, dict) else None
        if not isinstance(role, str) or not isinstance(content, str):
            raise RecordRejected(
                "missing_field",
                f"front-matter prompt.messages[{index}] needs a string role and content",
            )
        messages.append(Message(role, content, 1))
    return messages


def every_step(steps: tuple[Step, ...]) -> list[Step]:
    """Every step of a script, branches included, in order."""
    found: list[Step] = []
    for step in steps:
        found.append(step)
        if isinstance(step, Conditional):
            found.extend(every_step(step.then_steps))
            found.extend(every_step(step.else_steps))
    return found


def _functions(steps: tuple[Step, ...]) -> list[Function]:
    return [step for step in every_step(steps) if isinstance(step, Function)]


def _messages(steps: tuple[Step, ...]) -> list[Message]:
    return [step for step in every_step(steps) if isinstance(step, Message)]


def character_prompt(context: ScriptContext) -> str:
    """A developer message for a `type: char` script, written from its front-matter
    (the `char` type's own prompt lives in a script that is never opened)."""
    name = context.character or "the character"
    parts = [
        f"Play {name}. Stay in character for the whole conversation and answer the way "
        f"{name} would, in {name}'s own voice."
    ]
    description = context.front.get("description")
    if isinstance(description, str) and description.strip():
        parts.append(description.strip())
    details = context.front.get("character")
    if isinstance(details, dict):
        details = {k: v for k, v in details.items() if k not in ("name", "roles")}
    if details:
        parts.append(f"About {name}:\n" + "\n".join(_outline(details, 0)))
    return "\n\n".join(parts)


def _outline(value: Any, depth: int) -> list[str]:
    """A nested value as an indented bullet list."""
    pad = "  " * depth
    if isinstance(value, dict):
        lines = []
        for key, inner in value.items():
            if isinstance(inner, (dict, list)):
                lines.append(f"{pad}- {key}:")
                lines.extend(_outline(inner, depth + 1))
            else:
                lines.append(f"{pad}- {key}: {_scalar(inner)}")
        return lines
    if isinstance(value, list):
        lines = []
        for inner in value:
            if isinstance(inner, (dict, list)):
                lines.append(f"{pad}-")
                lines.extend(_outline(inner, depth + 1))
            else:
                lines.append(f"{pad}- {_scalar(inner)}")
        return lines
    return [f"{pad}{_scalar(value)}"]


def _scalar(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return " ".join(str(value).split())


def script_meta(context: ScriptContext) -> tuple[dict[str, Any], dict[str, Any]]:
    """(meta.ppe, the front-matter fields kept in meta.extra_fields)."""
    front = context.front
    ppe = {key: front[key] for key in DESCRIPTIVE if key in front}
    for key, shown in (("import", "import"), ("roles", "roles"), ("extends", "extends")):
        if key in front:
            ppe[shown] = front[key]
    ppe["template_format"] = context.engine
    used = {*DESCRIPTIVE, "import", "roles", "extends", "templateFormat", "parameters"}
    if context.respond_json and context.schema is not None:
        used.add("output")
    extra = {key: value for key, value in front.items() if key not in used}
    return ppe, extra


def inheritance_notes(context: ScriptContext) -> list[str]:
    """Notes about the scripts this one inherits from or imports (never opened)."""
    front = context.front
    notes = []
    kind = front.get("type")
    if kind == "char":
        notes.append(
            "`type: char` inherits the system prompt of the `char` type script "
            "(lib/char.ai.yaml), which is never opened; the developer message was written "
            "from the front-matter name, description and character instead"
        )
    elif isinstance(kind, str) and kind not in BUILT_IN_TYPES:
        notes.append(f"the script inherits from type `{kind}`, whose script is never opened")
    if "extends" in front:
        notes.append(f"the script extends `{front['extends']}`, which is never opened")
    if "import" in front:
        notes.append("the `import:` entries (meta.ppe.import) are recorded, never opened or run")
    return notes
