"""The names fields go by in conversation datasets, by what they hold: the prompt, the
answer, the system prompt, earlier turns, a message's speaker and its text, and what the
usual speaker names mean. Formats that guess a record's shape from its keys (the reading
by structure, prompt lists, TRL's lone prompts, suggested mappings) share them, so a key
means one thing to all of them."""

from __future__ import annotations

from pipeline.formats.field_mapping import DEFAULT_ROLES

PROMPT_NAMES = (
    "prompt", "instruction", "query", "question", "input", "inputs", "request", "problem",
)  # fmt: skip
"""Fields holding the user's prompt."""
ANSWER_NAMES = (
    "completion", "response", "answer", "output", "target", "targets", "reply",
)  # fmt: skip
"""Fields holding the answer to a prompt: a record with one is a prompt/answer pair."""
REFERENCE_NAMES = ("solution",)
"""Fields that hold a prompt's answer or its reference for a reward: next to TRL's
`prompt` a reference (a prompt-only row for RL), next to any other prompt name, read by
structure, the answer (`problem` + `solution`, as competition-math sets)."""
PREFERENCE_NAMES = ("chosen", "rejected")
SYSTEM_NAMES = ("system", "system_prompt", "sys_prompt", "system_message")
HISTORY_NAMES = ("history", "chat_history", "previous_turns")
SPEAKER_KEYS = ("role", "from", "speaker", "author", "sender", "who", "participant", "actor")
"""Keys of a message object naming who speaks."""
TEXT_KEYS = ("content", "value", "text", "message", "utterance", "body", "msg", "turn")
"""Keys of a message object holding what is said."""
SPEAKER_NAMES: dict[str, str] = {
    **DEFAULT_ROLES,
    **dict.fromkeys(
        ("customer", "client", "patient", "student", "questioner", "prompter", "usr",
         "person", "people", "q", "question", "you", "me", "instruction", "input"),
        "user",
    ),
    **dict.fromkeys(
        ("bot", "ai", "agent", "chatbot", "answerer", "a", "answer", "response", "output",
         "llm", "support", "helper", "gemini", "claude", "chatgpt"),
        "assistant",
    ),
    **dict.fromkeys(("sys", "system_prompt", "developer", "instructions"), "system"),
}  # fmt: skip
"""Speaker names (lower case) and the role each means."""


def answer_fields(record: dict[str, object]) -> list[str]:
    """The answer-like fields of a record that hold a string, in the record's order."""
    return [
        key
        for key, value in record.items()
        if key.lower() in ANSWER_NAMES and isinstance(value, str)
    ]
