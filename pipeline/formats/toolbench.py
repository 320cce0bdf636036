"""ToolBench answer files (`data/answer/G*_answer/*.json`): one DFS trajectory per file.

`answer_generation.train_messages` holds the step-by-step training samples of the
trajectory, each the conversation up to one assistant step; the last holds the whole
trajectory, so it becomes the thread (what only earlier samples hold is counted in a
note). Messages are OpenAI legacy-function style: `function` definitions become declared
tools, `function_call` a tool call, `function` results context named after the tool.
`Finish` is ToolBench's pseudo-tool that ends a trajectory: `give_answer` becomes the final
assistant message (its `final_answer`); `give_up_and_restart` stays a `Finish` call, and
`meta.finish_type`/`meta.win` let curators filter such trajectories. Files without
train_messages (`valid_data: false`) are quarantined. The DFS search `tree` and
`compare_candidates` are search state, not the conversation, and are left out (noted).

Example (abridged; a record is a whole answer file): the last train_messages sample

    {"answer_generation": {"valid_data": true, "finish_type": "give_answer",
      "function": [{"name": "forecast", "description": "A city forecast.",
                    "parameters": {"type": "object", "properties": {"city": ...}}}, ...],
      "train_messages": [..., [
        {"role": "system", "content": "You are AutoGPT, ..."},
        {"role": "user", "content": "Weather in Lyon?"},
        {"role": "assistant", "content": "Ask for the forecast.",
         "function_call": {"name": "forecast", "arguments": "{\"city\": \"Lyon\"}"}},
        {"role": "function", "name": "forecast", "content": "{\"sky\": \"sunny\"}"},
        {"role": "assistant", "content": null, "function_call": {"name": "Finish",
         "arguments": "{\"return_type\": \"give_answer\", \"final_answer\": \"Sunny.\"}"}}]]}}

becomes the thread

    developer                    You are AutoGPT, ...
    developer                    You have access to the tools below. ... (`forecast:json`)
    user                         Weather in Lyon?
    assistant  markdown          Ask for the forecast.
    assistant  forecast:json     {"city":"Lyon"}
    context    forecast          {"sky": "sunny"}
    assistant  markdown          Sunny.

with meta `finish_type: give_answer`, `valid_data: true` and the tool's schema and
description (`tool_schemas`, `tool_descriptions`).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any

import orjson

from pipeline.capabilities import ToolSpec
from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import (
    ThreadBuilder,
    a_json_kind,
    canonical_json,
    json_kind,
    source_thread_id,
    tool_specs,
)
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "toolbench"
FINISH = "Finish"
SIGNATURE = ("train_messages", "finish_type", "valid_data")
LEFT_OUT = ("tree", "compare_candidates")
"""Top-level search state that is not the conversation (and can be very large)."""
IN_META = ("win",)
ANSWER_IN_META = ("finish_type", "valid_data")
QUERY_ID = re.compile(r"^(\d+)_")


def sniff(value: object) -> Sniff:
    """Sure for an object whose `answer_generation` has ToolBench's fields."""
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object")
    answer = value.get("answer_generation")
    if isinstance(answer, dict) and any(key in answer for key in SIGNATURE):
        return Sniff(1.0, "ToolBench answer: answer_generation with train_messages")
    return Sniff(0.0, "no ToolBench answer_generation")


def _query_id(record: Record) -> int | None:
    """ToolBench names answer files after the query: `<query_id>_<method>.json`."""
    match = QUERY_ID.match(os.path.basename(record.source))
    return int(match.group(1)) if match else None


def _conversation(answer: dict[str, Any]) -> tuple[int, list[Any]]:
    """The index and messages of the last train_messages sample."""
    samples = answer.get("train_messages")
    if not samples:
        if answer.get("valid_data") is False:
            raise RecordRejected(
                "empty_conversation",
                "answer_generation.valid_data is false and there are no train_messages: "
                f"ToolBench kept no trajectory to train on (finish_type "
                f"{answer.get('finish_type')!r}); the DFS search tree is not converted",
            )
        raise RecordRejected(
            "missing_field", "answer_generation.train_messages is missing or empty"
        )
    if not isinstance(samples, list):
        raise RecordRejected(
            "missing_field",
            f"answer_generation.train_messages is {a_json_kind(samples)} "
            "(expected a list of conversations)",
        )
    for index, sample in enumerate(samples):
        if not isinstance(sample, list):
            raise RecordRejected(
                "missing_field",
                f"answer_generation.train_messages[{index}] is not a list of messages",
            )
    return len(samples) - 1, samples[-1]


def _tools(answer: dict[str, Any]) -> list[ToolSpec]:
    return tool_specs(answer.get("function"), "answer_generation.function")


def _parsed(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return None


class _Converter:
    """Turns the last train_messages sample into a thread."""

    def __init__(self, builder: ThreadBuilder, tools: list[ToolSpec], where: str):
        self.builder = builder
        self.declared = {tool.name: tool for tool in tools}
        self.where = where
        self.finish_arguments: list[Any] = []
        """The parsed arguments of every Finish call (the answer file repeats the last)."""
        self.finish_called = False

    def message(self, index: int, message: Any) -> None:
        where = f"{self.where}[{index}]"
        if not isinstance(message, dict):
            raise RecordRejected("missing_field", f"{where} is not a message object")
        role = message.get("role")
        extras = {k: v for k, v in message.items() if k not in ("role", "content")}
        text = self.builder.text(message.get("content"), f"{where}.content")
        if role == "system":
            self.builder.developer(text, meta=extras)
            self.builder.note(
                "kept ToolBench's system prompt as the developer message; it describes "
                "ToolBench's own convention (a short thought, then a function call; `Finish` "
                "to answer or give up)"
            )
        elif role == "user":
            self.builder.user(text, meta=extras)
        elif role == "function":
            name = extras.get("name")
            if isinstance(name, str):
                del extras["name"]  # the tool's name; any other value is kept in meta
            self.builder.tool_result(
                text, name=name if isinstance(name, str) else None, meta=extras
            )
        elif role == "assistant":
            self._assistant(where, text, message)
        else:
            raise RecordRejected(
                "unknown_role",
                f"{where}.role is {role!r} (expected system, user, assistant or function)",
            )

    def _assistant(self, where: str, text: str, message: dict[str, Any]) -> None:
        call = message.get("function_call")
        extras = {k: v for k, v in message.items() if k not in ("role", "content", "function_call")}
        if text:
            self.builder.assistant(text, meta=extras)
            extras = {}
        if call is None:
            if not text:
                raise RecordRejected(
                    "missing_field", f"{where} is an assistant message with no content or call"
                )
            return
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise RecordRejected("missing_field", f"{where}.function_call has no name")
        name, arguments = call["name"], call.get("arguments")
        if name == FINISH:
            self._finish(arguments, extras)
            return
        if name not in self.declared:
            self.builder.note(f"calls {name!r}, which answer_generation.function does not define")
        self.builder.tool_call(name, arguments, meta=extras)

    def _finish(self, arguments: Any, extras: dict[str, Any]) -> None:
        """`Finish(give_answer)` becomes the final answer; any other Finish stays a call."""
        parsed = _parsed(arguments)
        self.finish_arguments.append(parsed)
        answer = parsed.get("final_answer") if isinstance(parsed, dict) else None
        gives_answer = isinstance(parsed, dict) and parsed.get("return_type") == "give_answer"
        if gives_answer and isinstance(answer, str):
            self.builder.assistant(answer, meta=extras)
            self.builder.note(
                "ToolBench's Finish(give_answer) call became the final assistant message"
            )
            return
        self.finish_called = True
        return_type = parsed.get("return_type") if isinstance(parsed, dict) else None
        self.builder.note(
            f"kept a Finish call ({return_type or 'unreadable arguments'}): ToolBench's "
            "pseudo-tool that ends a trajectory; `give_up_and_restart` means it gave up"
        )
        self.builder.tool_call(FINISH, arguments, meta=extras)

    def declare(self) -> None:
        """Declare the API functions, and Finish only when a Finish call is kept."""
        self.builder.declare_tools(
            tool for name, tool in self.declared.items() if name != FINISH or self.finish_called
        )
        if self.finish_called and FINISH not in self.declared:
            self.builder.note("calls 'Finish', which answer_generation.function does not define")


def _left_out_of_earlier(samples: list[Any], last: list[Any]) -> Counter[str]:
    """Distinct messages that earlier train_messages samples hold and the last one does
    not, by role."""
    seen = {canonical_json(message) for message in last}
    missing: Counter[str] = Counter()
    for sample in samples[:-1]:
        for message in sample:
            text = canonical_json(message)
            if text not in seen:
                seen.add(text)
                role = message.get("role") if isinstance(message, dict) else None
                missing[str(role)] += 1
    return missing


def _sample_notes(builder: ThreadBuilder, samples: list[Any]) -> None:
    if len(samples) == 1:
        return
    builder.note(
        f"answer_generation.train_messages holds {len(samples)} step-by-step samples; "
        "converted the last, which holds the whole trajectory"
    )
    missing = _left_out_of_earlier(samples, samples[-1])
    if missing:
        counts = ", ".join(f"{n} {role}" for role, n in sorted(missing.items()))
        builder.note(f"left out message(s) that only earlier samples hold: {counts}")


def _keep_fields(builder: ThreadBuilder, value: dict[str, Any], converter: _Converter) -> None:
    """Keep every field MMS has no place for, except the search state and what the
    thread already holds (the query, the Finish answer)."""
    answer = value["answer_generation"]
    builder.keep_unread(value, (*LEFT_OUT, *IN_META, "answer_generation"))
    builder.keep_unread(answer, _answer_read(answer, converter))
    left_out = [key for key in LEFT_OUT if key in value]
    if left_out:
        names = " and ".join(f"`{key}`" for key in left_out)
        builder.note(f"left out ToolBench's DFS search state {names} (not the conversation)")


def _answer_read(answer: dict[str, Any], converter: _Converter) -> set[str]:
    """The answer_generation fields the thread holds: the messages, the meta, and the
    query and final answer where its user message and Finish call repeat them."""
    read = {*ANSWER_IN_META, "train_messages", "function"}
    first_user = next(
        (
            m.get("content")
            for m in answer["train_messages"][-1]
            if isinstance(m, dict) and m.get("role") == "user"
        ),
        None,
    )
    query = answer.get("query")
    if "query" in answer and isinstance(first_user, str) and str(query).strip() in first_user:
        read.add("query")
    if "final_answer" in answer and _parsed(answer["final_answer"]) in converter.finish_arguments:
        read.add("final_answer")
    return read


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread: the trajectory's last train_messages sample."""
    value = record.value
    if not isinstance(value, dict):
        kind = f"a JSON {json_kind(value)}"
        raise RecordRejected("not_an_object", f"expected a ToolBench answer object, got {kind}")
    answer = value.get("answer_generation")
    if not isinstance(answer, dict):
        raise RecordRejected("missing_field", "answer_generation is missing or not an object")
    last, conversation = _conversation(answer)
    query_id = _query_id(record)
    meta: dict[str, Any] = {} if query_id is None else {"query_id": query_id}
    meta.update({key: value[key] for key in IN_META if key in value})
    meta.update({key: answer[key] for key in ANSWER_IN_META if key in answer})
    builder = ThreadBuilder(record, NAME, options, thread_id=source_thread_id(record), meta=meta)
    converter = _Converter(builder, _tools(answer), f"answer_generation.train_messages[{last}]")
    for index, message in enumerate(conversation):
        converter.message(index, message)
    converter.declare()
    _sample_notes(builder, answer["train_messages"])
    _keep_fields(builder, value, converter)
    return [builder.build()]


FORMAT = InputFormat(
    name=NAME,
    summary="ToolBench answer files (answer_generation.train_messages, legacy functions): "
    "the trajectory as one thread, Finish(give_answer) as the final answer",
    sniff=sniff,
    to_threads=to_threads,
)
