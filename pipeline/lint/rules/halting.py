"""MMS3xx: what follows a tool call or a halting format. The system halts after such a
message and hands control to the developer, who answers with context (the result)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

from pipeline.lint.rule import Finding, Rule
from pipeline.lint.rules.examples import assistant, context, developer, thread, tool_format, user
from pipeline.lint.thread_view import ThreadView


def _is_tool_call(view: ThreadView, format_name: str) -> bool:
    return ":" in format_name or view.halts_on_completion(format_name)


def result_not_context(view: ThreadView, config: object) -> Iterator[Finding]:
    messages = view.thread.messages
    for index, (message, following) in enumerate(pairwise(messages)):
        if (
            message.role == "assistant"
            and following.role in ("user", "developer")
            and _is_tool_call(view, message.format or "markdown")
        ):
            yield Finding(
                index,
                f"`{message.format}` is followed by a {following.role} message (message "
                f"{index + 1}); its result should come back as a context message",
            )


def continues_after_halt(view: ThreadView, config: object) -> Iterator[Finding]:
    messages = view.thread.messages
    for index, (message, following) in enumerate(pairwise(messages)):
        if (
            message.role == "assistant"
            and following.role == "assistant"
            and view.halts_on_completion(message.format or "markdown")
        ):
            yield Finding(
                index + 1,
                f"assistant message follows `{message.format}` directly, but settings halt "
                "on its completion: the model can never write this",
            )


_SETTINGS = {"formats": [tool_format("get_weather")]}
_DECLARE = developer("Use `get_weather:json` for weather questions.")
_CALL = assistant('{"city":"Oslo"}', "get_weather:json", end_turn=False)
_ANSWERED = thread(
    _DECLARE,
    user("Weather?"),
    _CALL,
    context('{"temp": -3}', "get_weather"),
    assistant("It is -3 °C in Oslo."),
    settings=_SETTINGS,
)

RULES = [
    Rule(
        code="MMS301",
        name="tool-result-not-context",
        severity="warning",
        summary="A tool call (or halting format) is followed by a user or developer message.",
        rationale=(
            "After a tool call the system halts and the developer returns the result as a "
            "context message named after the tool. A user message in its place usually "
            "means the result was lost or mislabelled in conversion; the model learns that "
            "calls go unanswered."
        ),
        bad=[thread(_DECLARE, user("Weather?"), _CALL, user("-3 °C"), settings=_SETTINGS)],
        good=[_ANSWERED],
        check=result_not_context,
    ),
    Rule(
        code="MMS303",
        name="continues-after-halt",
        severity="error",
        summary="A halt_on_completion format is followed directly by another assistant message.",
        rationale=(
            "With halt_on_completion the system stops generating when the message ends; "
            "the next assistant message can only come after the developer answered. "
            "Training on the pair teaches the model to invent the result. Sources with "
            "parallel calls and no results convert cleanly with `--parallel-calls jsonl` "
            "(one `tool:jsonl` message for all calls)."
        ),
        bad=[
            thread(
                _DECLARE,
                user("Weather?"),
                _CALL,
                assistant("It is -3 °C in Oslo."),
                settings=_SETTINGS,
            )
        ],
        good=[_ANSWERED],
        check=continues_after_halt,
    ),
]
