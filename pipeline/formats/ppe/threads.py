"""Dialogues -> MMS threads. Messages render with the script's template engine and
front-matter defaults; a generation slot (`[[AI]]`, `$AI`) ends the thread as a prompt;
directives, chains, functions and conditions are listed in `meta.unrenderable`, never
run. A dialogue that needs a script call or helper to render is left out, and a script
with no dialogue left is quarantined naming the construct."""

from __future__ import annotations

from typing import Any

import orjson

from pipeline.formats.base import ConvertOptions
from pipeline.formats.builder import ThreadBuilder, canonical_json, source_thread_id
from pipeline.formats.ppe.context import (
    ScriptContext,
    character_prompt,
    every_step,
    inheritance_notes,
    read_context,
    script_meta,
)
from pipeline.formats.ppe.dialogues import (
    MAX_PATHS,
    Assumption,
    Dialogue,
    PathStep,
    split_dialogues,
)
from pipeline.formats.ppe.slots import Slot, find_slots
from pipeline.formats.ppe.steps import (
    Chain,
    Conditional,
    Directive,
    Function,
    Message,
    Script,
    Separator,
    Step,
)
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record
from pipeline.templates import TemplateError, UnrenderableTemplate, UnsafeTemplate, render

NAME = "ppe"
SHOWN_CHARS = 120
"""How much of a directive's value `meta.unrenderable` shows."""
CHAIN_REASON = "a chain passes the result to other scripts, which are never opened or run"
DIRECTIVE_REASONS = {
    "$set": "sets variables at run time; never run, so templates use the front-matter defaults",
    "$echo": "prints at run time; never run",
    "$print": "prints at run time; never run",
    "$exec": "runs another script; never run",
    "$tool": "calls a tool at run time; never run",
    "$for": "a loop; never run, so the messages in its body are not unrolled",
    "$while": "a loop; never run, so the messages in its body are not unrolled",
    "$match": "branches on a run-time result; never run",
    "?=": "a JavaScript expression; never evaluated",
}
DIRECTIVE_REASON = "a PPE directive; never run"
SLOT_REASONS = {
    "call": "calls another script or directive at run time; never run, nothing it names is opened",
    "regex": "replaces text from a run-time result; never computed",
    "random": "picks one of its choices at random at run time; never run",
    "ai": "is filled by a model call at run time in a {role} message, so the message has no text",
}


class Blocked(Exception):
    """A dialogue that gives no thread: the construct (and its line) that stops it."""

    def __init__(self, code: str, construct: str, line: int, reason: str):
        super().__init__(f"`{construct}` at line {line} {reason}")
        self.code = code


def _shown(name: str, value: Any) -> str:
    """A directive with (the start of) its value, as `meta.unrenderable` names it."""
    if value is None:
        return name
    text = value if isinstance(value, str) else canonical_json(value)
    if len(text) > SHOWN_CHARS:
        text = text[:SHOWN_CHARS] + "..."
    return text if text.startswith(name) else f"{name}: {text}"


def _assumed(assumption: Assumption) -> str:
    holds = str(assumption.holds).lower()
    return f"`$if: {assumption.condition}` (line {assumption.line}) taken as {holds}"


class _Walk:
    """Adds one dialogue's steps to a builder, in order."""

    def __init__(self, builder: ThreadBuilder, context: ScriptContext):
        self.builder = builder
        self.context = context
        self.generated: tuple[str, int, str] | None = None
        """(construct, line, reason) of the turn the model writes, once reached."""
        self.left_out = 0
        self.emitted = 0
        self.last: tuple[str, str] | None = None
        """(MMS role, PPE role) of the last message added."""
        self.missing: list[str] = []

    def step(self, step: PathStep) -> None:
        if isinstance(step, Assumption):
            branch = "then" if step.holds else "else"
            self.builder.unrenderable(
                f"$if: {step.condition}",
                f"line {step.line}",
                "the condition is JavaScript, never evaluated; this thread takes it as "
                f"{str(step.holds).lower()} (its `{branch}` branch)",
            )
        elif isinstance(step, Message):
            self.message(step)
        elif isinstance(step, Directive):
            self.directive(step)
        elif isinstance(step, Chain):
            self.builder.unrenderable(f"-> {step.text}", f"line {step.line}", CHAIN_REASON)
        elif isinstance(step, Conditional):
            inner = [_construct(s) for s in (*step.then_steps, *step.else_steps)]
            self.builder.unrenderable(
                f"$if: {step.condition}",
                f"line {step.line}",
                "the condition is JavaScript, never evaluated; its branches hold no messages "
                f"and are not run ({', '.join(inner) or 'empty'})",
            )

    def character(self, content: str) -> None:
        """The developer message written for a `type: char` script."""
        self.builder.developer(content)
        self.emitted += 1

    def message(self, message: Message) -> None:
        role, speaker = self.context.role(message)
        if self.generated is not None:
            self.left_out += 1
            return
        meta = {k: v for k, v in (("speaker", speaker), ("to", message.to)) if v}
        text = message.content
        if text.startswith("~"):
            self.add(role, text[1:], message, meta)
            return
        slots = find_slots(text)
        for slot in slots:
            if slot.kind != "ai" or role != "assistant":
                reason = SLOT_REASONS[slot.kind].format(role=message.role)
                raise Blocked("unrenderable_template", slot.text, message.line, reason)
        if slots:
            self.generate(slots[0], message, speaker)
            return
        self.add(role, self.render(text, message.line), message, meta)

    def generate(self, slot: Slot, message: Message, speaker: str | None) -> None:
        """The assistant turn at a `[[slot]]` is written by the model: the thread ends."""
        who = f" (spoken by {speaker})" if speaker else ""
        reason = (
            f"the assistant turn `{slot.text}` at line {message.line}{who} is generated at run time"
        )
        self.generated = (slot.text, message.line, reason)
        generation: dict[str, Any] = {"variable": slot.name, "line": message.line}
        if slot.params:
            generation["parameters"] = slot.params
        if speaker:
            generation["speaker"] = speaker
        self.builder.meta["ppe"]["generation"] = generation
        around = message.content.replace(slot.text, "", 1).strip()
        if around:
            self.builder.note(
                f"line {message.line}: the text around `{slot.text}` ({around!r}) is not kept; "
                "the whole assistant turn is left to generation"
            )
        if slot.choices:
            self.builder.respond_in("plaintext", allowed_values=slot.choices)

    def render(self, text: str, line: int) -> str:
        """`text` rendered with the front-matter defaults (`#` = format now: same here)."""
        source = text[1:] if text.startswith("#") else text
        try:
            rendered = render(
                source,
                self.context.engine,
                self.context.variables,
                deadline=self.context.deadline,
            )
        except UnrenderableTemplate as err:
            construct = err.construct or source
            raise Blocked(
                "unrenderable_template",
                construct,
                line,
                "is a template function or helper; never run, so the message cannot render",
            ) from None
        except UnsafeTemplate as err:
            raise RecordRejected("unsafe_template", f"line {line}: {err}") from None
        except TemplateError as err:
            raise RecordRejected(
                "invalid_template",
                f"line {line}: the {self.context.engine} template does not parse: {err}",
            ) from None
        self.missing.extend(name for name in rendered.missing if name not in self.missing)
        return rendered.text

    def add(self, role: str, content: str, message: Message, meta: dict[str, str]) -> None:
        if role == "developer":
            self.builder.developer(content, meta=meta)
        elif role == "user":
            self.builder.user(content, meta=meta)
        else:
            self.builder.assistant(content, format=self.answer_format(content, message), meta=meta)
        self.last = (role, message.role)
        self.emitted += 1

    def answer_format(self, content: str, message: Message) -> str:
        """`json` for a literal answer of a script that asks for JSON, when it is JSON."""
        if not self.context.respond_json:
            return "markdown"
        try:
            orjson.loads(content)
        except orjson.JSONDecodeError:
            self.builder.note(
                f"line {message.line}: the assistant line is not JSON although the script "
                "asks for JSON answers; kept as markdown"
            )
            return "markdown"
        return "json"

    def directive(self, directive: Directive) -> None:
        where = f"line {directive.line}"
        shown = _shown(directive.name, directive.value)
        if directive.name == "$AI":
            if self.generated is None:
                reason = f"`$AI` at line {directive.line} generates the assistant turn at run time"
                self.generated = ("$AI", directive.line, reason)
                self.builder.meta["ppe"]["generation"] = {
                    "directive": "$AI",
                    "line": directive.line,
                }
            if directive.value is not None or directive.params:
                self.builder.unrenderable(shown, where, "its arguments are not applied")
            return
        if directive.name.startswith("$!") and self.generated is None:
            raise Blocked(
                "unrenderable_template",
                directive.name,
                directive.line,
                "adds a message from a directive's result, which is never run",
            )
        reason = DIRECTIVE_REASONS.get(directive.name, DIRECTIVE_REASON)
        self.builder.unrenderable(shown, where, reason)

    def finish(self) -> None:
        """Prompt-only when the model writes the last turn; missing variables listed."""
        if self.generated is not None:
            construct, line, reason = self.generated
            if self.emitted == 0:
                raise Blocked(
                    "empty_conversation", construct, line, "is the first turn: nothing precedes it"
                )
            self.builder.prompt_only(reason)
            if self.left_out:
                self.builder.note(
                    f"{self.left_out} message(s) after the generated turn depend on it; left out"
                )
        elif self.last is not None and self.last[0] != "assistant":
            self.builder.prompt_only(
                f"the script ends with a {self.last[1]} message: PPE generates the assistant "
                "turn at run time"
            )
        if self.missing:
            self.builder.meta["missing_variables"] = sorted(self.missing)


def _construct(step: Step) -> str:
    """A step as written, briefly (for reasons and errors)."""
    if isinstance(step, Directive):
        return step.name
    if isinstance(step, Chain):
        return f"-> {step.text}"
    if isinstance(step, Function):
        return step.tag
    if isinstance(step, Conditional):
        return "$if"
    if isinstance(step, Separator):
        return step.mark
    return f"{step.role}:"


def _dialogue_builder(
    record: Record,
    options: ConvertOptions,
    context: ScriptContext,
    dialogue: Dialogue,
    thread_id: str,
) -> ThreadBuilder:
    """The builder of one dialogue's thread (not built yet: notes may follow)."""
    ppe, extra = script_meta(context)
    if dialogue.start_line is not None:
        ppe["dialogue_line"] = dialogue.start_line
    meta: dict[str, Any] = {"ppe": ppe}
    if isinstance(context.front.get("parameters"), dict):
        meta["parameters"] = context.front["parameters"]
    builder = ThreadBuilder(record, NAME, options, thread_id=thread_id, meta=meta)
    builder.keep_unread(extra)
    for note in inheritance_notes(context):
        builder.note(note)
    for function in context.functions:
        builder.unrenderable(
            f"{function.tag} {function.code}",
            f"line {function.line}",
            "function code is kept as text and never run",
        )
    if context.respond_json:
        builder.respond_in("json", schema=context.schema)
    walk = _Walk(builder, context)
    if context.front.get("type") == "char":
        walk.character(character_prompt(context))
    for step in (*context.prompt_messages, *dialogue.steps):
        walk.step(step)
    walk.finish()
    return builder


def _no_thread(
    script: Script, left_out: list[tuple[Dialogue, Blocked]], empty: int
) -> RecordRejected:
    """Why a script gives no thread, naming the constructs and lines."""
    if left_out:
        code = (
            "unrenderable_template"
            if any(b.code == "unrenderable_template" for _, b in left_out)
            else "empty_conversation"
        )
        reasons = "; ".join(f"{_label(d)}: {b}" if _label(d) else str(b) for d, b in left_out)
        return RecordRejected(code, f"no dialogue can be converted: {reasons}")
    steps = every_step(script.steps)
    if any(isinstance(step, Message) for step in steps):
        return RecordRejected(
            "empty_conversation",
            f"{empty} dialogue(s) hold no message; the messages before the separators are only "
            "their preamble",
        )
    constructs = [
        f"`{_construct(s)}` at line {s.line}" for s in steps if not isinstance(s, Separator)
    ]
    if constructs:
        return RecordRejected(
            "unrenderable_template",
            "the script holds no messages, only constructs that are never run: "
            + ", ".join(constructs),
        )
    return RecordRejected("empty_conversation", "the script holds no messages")


def _label(dialogue: Dialogue) -> str:
    """Which dialogue, for notes and errors ("" for a script that is one dialogue)."""
    where = f"the dialogue at line {dialogue.start_line}" if dialogue.start_line else ""
    if dialogue.assumptions:
        where += (" with " if where else "with ") + ", ".join(map(_assumed, dialogue.assumptions))
    return where


def script_threads(record: Record, options: ConvertOptions, script: Script) -> list[Thread]:
    """One thread per dialogue (per path through `$if` branches that hold messages)."""
    context = read_context(script)
    dialogues = split_dialogues(script.steps)
    base = source_thread_id(record, script.front_matter.get("_id"))
    builders: list[ThreadBuilder] = []
    left_out: list[tuple[Dialogue, Blocked]] = []
    for dialogue in dialogues.found:
        thread_id = f"{base}#{dialogue.label}" if dialogue.label else base
        try:
            builders.append(_dialogue_builder(record, options, context, dialogue, thread_id))
        except Blocked as blocked:
            left_out.append((dialogue, blocked))
    if not builders:
        raise _no_thread(script, left_out, len(dialogues.empty))
    for builder in builders:
        for note in script.notes:
            builder.note(note)
        for dialogue, reason in left_out:
            builder.note(f"left out {_label(dialogue) or 'the script'}: {reason}")
        for dialogue in dialogues.empty:
            builder.note(f"no thread for {_label(dialogue) or 'the script'}: it holds no message")
        if dialogues.capped:
            builder.note(f"only the first {MAX_PATHS} combinations of `$if` branches are converted")
    return [builder.build() for builder in builders]
