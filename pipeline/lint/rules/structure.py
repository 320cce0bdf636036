"""MMS1xx: is it a thread at all? Records that cannot become valid threads (read from
the quarantine: unknown role, fields on the wrong role, wrong types, unreadable records)
and threads with nothing to train or empty messages. The media rules of the family
(MMS106..MMS109) are in pipeline/lint/rules/media.py; a quarantined record's media
problems are theirs."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pipeline.lint.rule import Finding, Rule
from pipeline.lint.rules import media
from pipeline.lint.rules.examples import assistant, developer, thread, user
from pipeline.lint.thread_view import ThreadView
from pipeline.quarantine import Rejection

FIELD_CODES = frozenset({"missing_field", "invalid_tool_call", "invalid_tools", "not_an_object"})
"""Quarantine codes that mean a missing or mistyped field (MMS102); `unknown_role` is
MMS101, and a record that fails for any other reason is MMS105."""
_MESSAGE_PATH = re.compile(r"messages\[(\d+)\]")


def rejection_findings(rejection: Rejection) -> Iterator[tuple[str, Finding]]:
    """The MMS101/MMS102/MMS105 findings of a quarantined record (MMS107..MMS109 for its
    media): one per validation problem when the MMS reader listed them, else one for the
    record."""
    if rejection.details:
        for detail in rejection.details:
            path = detail.get("path", "")
            message = detail.get("message", "")
            kind = detail.get("kind", "")
            code = media.rejection_code(path, message, kind)
            if code is not None:
                text = media.rejection_text(code, path, message)
            else:
                code = "MMS101" if kind == "unknown_role" else "MMS102"
                text = f"{path or 'thread'}: {message}"
            yield code, Finding(_message_index(path), text)
        return
    media_code = media.rejected_code(rejection.code, rejection.message)
    if media_code is not None:
        code = media_code
    elif rejection.code == "unknown_role":
        code = "MMS101"
    elif rejection.code in FIELD_CODES or rejection.code == "empty_conversation":
        code = "MMS102"
    else:
        code = "MMS105"
    text = f"{rejection.message} [{rejection.code}]"
    yield code, Finding(_message_index(rejection.message), text)


def _message_index(path: str) -> int | None:
    match = _MESSAGE_PATH.search(path)
    return int(match.group(1)) if match else None


def no_assistant_message(view: ThreadView, config: object) -> Iterator[Finding]:
    if not any(m.role == "assistant" for m in view.thread.messages):
        why = " (a prompt-only thread)" if view.thread.meta.get("prompt_only") else ""
        yield Finding(None, f"the thread has no assistant message, so nothing is trained{why}")


def empty_content(view: ThreadView, config: object) -> Iterator[Finding]:
    for index, message in enumerate(view.thread.messages):
        if not message.content.strip():
            blank = "empty" if not message.content else "only whitespace"
            if message.role == "assistant":
                yield Finding(index, f"assistant message is {blank}: it trains nothing", "error")
            else:
                yield Finding(index, f"{message.role} message is {blank}")


RULES = [
    Rule(
        code="MMS101",
        name="unknown-role",
        severity="error",
        scope="record",
        summary="A message has a role MMS does not define.",
        rationale=(
            "MMS has five roles: platform, developer, user, assistant and context. A record "
            "with any other role (`system`, `tool`, `robot`) cannot become a thread; read "
            "it with the converter for its source format (`--from openai`), which maps "
            "`system` to developer and `tool` to context, or fix the role."
        ),
        bad=[thread(user("Hi"), {"role": "robot", "content": "Beep."})],
        good=[thread(user("Hi"), assistant("Hello!"))],
    ),
    Rule(
        code="MMS102",
        name="invalid-field",
        severity="error",
        scope="record",
        summary="A field is not allowed on this role, or is missing or of the wrong type.",
        rationale=(
            "Each role has fixed fields: only assistant messages carry `format` and "
            "`end_turn`, only context messages a `name`; `content` is a string everywhere. "
            "A record that breaks this cannot be rendered to tokens, so it is never trained."
        ),
        bad=[thread(user("Hi"), {"role": "assistant", "content": "Hello!"})],
        good=[thread(user("Hi"), assistant("Hello!"))],
    ),
    Rule(
        code="MMS103",
        name="no-assistant-message",
        severity="warning",
        summary="The thread has no assistant message, so it trains nothing.",
        rationale=(
            "Only assistant messages are trained. A thread without one costs tokens and "
            "teaches nothing; prompt-only threads (templates with an `[[AI]]` slot) belong "
            "in an evaluation set, not in training data."
        ),
        bad=[thread(developer("Translate to French."), user("Good morning"))],
        good=[
            thread(developer("Translate to French."), user("Good morning"), assistant("Bonjour"))
        ],
        check=no_assistant_message,
    ),
    Rule(
        code="MMS104",
        name="empty-content",
        severity="warning",
        summary="A message is empty (an error for an assistant message).",
        rationale=(
            "An empty user or context message is usually a conversion loss (an image "
            "dropped, a field read from the wrong key). An empty assistant message trains "
            "the model to answer with nothing, so it is an error."
        ),
        bad=[thread(user("Hi"), assistant(""))],
        good=[thread(user("Hi"), assistant("Hello!"))],
        check=empty_content,
    ),
    Rule(
        code="MMS105",
        name="unreadable-record",
        severity="error",
        scope="record",
        summary="A record could not be read or converted into a thread.",
        rationale=(
            "Invalid JSON, an unknown input format, a template that cannot be rendered "
            "safely: the record was quarantined and is missing from the output. The finding "
            "carries the quarantine code and the exact position so it can be fixed."
        ),
        bad=['{"id": "t1", "messages": [{"role": "user", "content": "Hi"}'],
        good=[thread(user("Hi"), assistant("Hello!"))],
    ),
]
