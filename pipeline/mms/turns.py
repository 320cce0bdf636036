"""Where a thread's final assistant turn begins (what the `last_assistant` labels policy
trains), and where its answer begins (where the objectives cut a thread into its prompt
and its completion)."""

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


def answer_start(messages: Sequence[Message]) -> int:
    """Where the thread's answer begins, the cut between an objective row's prompt and its
    completion: the final assistant turn when the thread ends with it (its last message is
    the assistant's), else the end of the thread (it ends waiting for an answer: a user
    message, or a tool result the model has not yet answered).

    >>> from pipeline.mms import Message
    >>> asked, said = Message("user", "Hi"), Message.assistant("Hello")
    >>> answer_start([asked, said]), answer_start([asked, said, asked])
    (1, 3)
    """
    if messages and messages[-1].role == "assistant":
        return final_turn_start(messages)
    return len(messages)
