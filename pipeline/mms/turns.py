"""Where a thread's final assistant turn begins: what the `last_assistant` labels policy
trains, and where the objectives cut a thread into its prompt and its completion."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.mms.model import Message


def final_turn_start(messages: Sequence[Message]) -> int:
    """Where the thread's final assistant turn starts: its last assistant message, with the
    assistant messages before it that did not end the turn (end_turn false: tool calls, a
    message cut short), across the context messages (tool results) between them. A thread
    with no assistant message has no final turn: the index past its end."""
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), None
    )
    if last is None:
        return len(messages)
    start = last
    for index in range(last - 1, -1, -1):
        message = messages[index]
        if message.role == "assistant" and message.end_turn is False:
            start = index
        elif message.role != "context":
            break
    return start
