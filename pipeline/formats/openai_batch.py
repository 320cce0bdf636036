"""OpenAI Batch API files (also written by vLLM's `run-batch` and other OpenAI-compatible
batch runners), each line on its own:

- request lines `{custom_id, method, url, body}`: the request's messages (`body.messages`
  of `/v1/chat/completions`; `body.instructions` + `body.input` of `/v1/responses`;
  `body.prompt` of `/v1/completions`) become a thread, prompt-only when it ends before
  the answer; its tools are declared; the thread id is the `custom_id`; the request's
  parameters (`body.model`, `max_tokens` ...) are kept in `meta.extra_fields`.
- output lines `{id, custom_id, response: {status_code, body}, error}`: the answer, as
  the thread of each choice's assistant message (`response.body.choices[].message`, or a
  Responses API `output`), ids `CUSTOM_ID:INDEX`, several choices grouped by
  `meta.group_id`. The request's messages are not in the output file: the thread holds
  the answer only and says so in `meta.notes` (`meta.custom_id` names the request). A
  failed request (an `error`, a status of 400 or more) is quarantined as
  `empty_conversation` with the error.

An output file and the request file beside it (same folder: the one holding the output's
custom_ids) are read together: each answer after its request's messages (one thread per
choice, the request's `custom_id` its id), the request file listed as read with the
output file; a request no line answers is read on its own, prompt-only.

Example: a batch request line and the prompt-only thread it becomes.

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> line = {
...     "custom_id": "r1", "method": "POST", "url": "/v1/chat/completions",
...     "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]},
... }
>>> [thread] = to_threads(Record("batchinput.jsonl", "batchinput.jsonl:1", line), ConvertOptions())
>>> thread.id, [(m.role, m.content) for m in thread.messages], thread.meta["prompt_only"]
('r1', [('user', 'Hi')], True)
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import posixpath
from collections.abc import Iterator
from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder, a_json_kind, json_kind, source_thread_id
from pipeline.formats.openai.messages import MessageReader
from pipeline.formats.openai.tools import TOOL_KEYS, read_tools
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected, Rejection
from pipeline.sources import ReadLimits, Record, iter_file
from pipeline.sources.batch_files import batch_line_kind, request_file_for

NAME = "openai-batch"
REQUEST_KEYS = frozenset({"custom_id", "body"})
OUTPUT_KEYS = frozenset({"custom_id", "response", "error"})
JOINED, JOINED_REQUEST, JOINED_OUTPUT = "joined", "request", "output"
"""An output line joined with its request: `meta.joined`, and the merged record's keys."""
ANSWER_ONLY = (
    "an OpenAI Batch output line: the request's messages are in the batch input file "
    "(custom_id {custom_id}); this thread holds the answer only"
)
PROMPT_ONLY_REASON = "a batch request: the assistant turn is to be generated"


def _is_request(value: dict[str, Any]) -> bool:
    return isinstance(value.get("body"), dict) and isinstance(value.get("url"), str)


def _is_output(value: dict[str, Any]) -> bool:
    response, error = value.get("response"), value.get("error")
    return "response" in value and (isinstance(response, dict) or isinstance(error, dict))


def sniff(value: object) -> Sniff:
    """Sure for a line with a `custom_id` and a request (`url`, `body`) or a `response`
    / `error` of the Batch API."""
    if not isinstance(value, dict) or not isinstance(value.get("custom_id"), (str, int)):
        return Sniff(0.0, "no custom_id: not an OpenAI Batch line")
    if _is_request(value):
        return Sniff(1.0, "an OpenAI Batch request line (custom_id, method, url, body)")
    if _is_output(value):
        return Sniff(1.0, "an OpenAI Batch output line (custom_id, response, error)")
    return Sniff(0.0, "a custom_id without a request body or a response")


def _custom_id(record: Record, data: dict[str, Any]) -> str:
    return source_thread_id(record, data.get("custom_id"))


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RecordRejected("missing_field", f"{where} is {a_json_kind(value)}, not an object")
    return value


# ----------------------------------------------------------------------------- requests


def _request_turns(url: str, body: dict[str, Any]) -> tuple[list[tuple[str, Any]], set[str]]:
    """The request's (where, message) turns and the body keys they were read from."""
    endpoint = url.split("?", 1)[0].rstrip("/")
    if endpoint.endswith("/chat/completions"):
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise RecordRejected(
                "missing_field", f"body.messages is {a_json_kind(messages)}, not a list"
            )
        return [(f"body.messages[{i}]", m) for i, m in enumerate(messages)], {"messages"}
    if endpoint.endswith("/responses"):
        turns: list[tuple[str, Any]] = []
        if isinstance(body.get("instructions"), str) and body["instructions"].strip():
            turns.append(
                ("body.instructions", {"role": "developer", "content": body["instructions"]})
            )
        given = body.get("input")
        if isinstance(given, str):
            turns.append(("body.input", {"role": "user", "content": given}))
        elif isinstance(given, list):
            turns += [(f"body.input[{i}]", m) for i, m in enumerate(given)]
        else:
            raise RecordRejected(
                "missing_field", f"body.input is {a_json_kind(given)}, not a string or a list"
            )
        return turns, {"instructions", "input"}
    if endpoint.endswith("/completions"):
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise RecordRejected(
                "missing_field", f"body.prompt is {a_json_kind(prompt)}, not a string"
            )
        return [("body.prompt", {"role": "user", "content": prompt})], {"prompt"}
    raise RecordRejected(
        "missing_field",
        f"url {url!r} is not a conversation endpoint (/v1/chat/completions, /v1/responses, "
        "/v1/completions): nothing to convert",
    )


def _request(record: Record, options: ConvertOptions, data: dict[str, Any]) -> list[Thread]:
    builder, turns = _request_builder(record, options, data, _custom_id(record, data), {})
    last = turns[-1][1]
    if not (isinstance(last, dict) and last.get("role") == "assistant"):
        builder.prompt_only(PROMPT_ONLY_REASON)
    return [builder.build()]


def _request_builder(
    record: Record,
    options: ConvertOptions,
    data: dict[str, Any],
    thread_id: str,
    meta: dict[str, Any],
) -> tuple[ThreadBuilder, list[tuple[str, Any]]]:
    """A builder holding the request's messages and tools (its unread fields in meta),
    and the request's turns."""
    body = _object(data.get("body"), "body")
    url = data.get("url")
    if not isinstance(url, str):
        raise RecordRejected("missing_field", f"url is {a_json_kind(url)}, not a string")
    turns, read = _request_turns(url, body)
    if not turns:
        raise RecordRejected("empty_conversation", "the request holds no messages")
    builder = ThreadBuilder(
        record,
        NAME,
        options,
        thread_id=thread_id,
        meta={"custom_id": data.get("custom_id"), **meta},
    )
    tools = read_tools([(f"body.{key}", body[key]) for key in TOOL_KEYS if body.get(key)])
    builder.declare_tools(tools.specs)
    reader = MessageReader(builder, body, tools)
    for where, message in turns:
        reader.message(where, message)
    reader.finish()
    builder.keep_unread(data, REQUEST_KEYS, where="request" if meta.get(JOINED) else "")
    listed = reader.content.media_tags.read_keys
    builder.keep_unread(body, read | set(TOOL_KEYS) | listed, where="body")
    return builder, turns


# ----------------------------------------------------------------------------- outputs


def _failure(data: dict[str, Any], response: Any) -> str | None:
    """Why the request failed, or None when it has an answer."""
    error = data.get("error")
    if error is not None:
        return f"error {_error_text(error)}"
    if not isinstance(response, dict):
        return f"response is {a_json_kind(response)}"
    status = response.get("status_code")
    body = response.get("body", response)
    body_error = body.get("error") if isinstance(body, dict) else None
    if isinstance(status, int) and not isinstance(status, bool) and status >= 400:
        return f"status {status}" + (f": {_error_text(body_error)}" if body_error else "")
    if body_error is not None:
        return f"error {_error_text(body_error)}"
    return None


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        parts = [str(error[key]) for key in ("code", "message") if error.get(key)]
        return ": ".join(parts) or json_kind(error)
    return str(error)[:200]


def _choices(body: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Each answer as (where, assistant message, the choice's other fields)."""
    if "choices" in body:
        choices = body["choices"]
        if not isinstance(choices, list) or not choices:
            raise RecordRejected(
                "empty_conversation", f"response.body.choices is {a_json_kind(choices)} or empty"
            )
        found = []
        for index, choice in enumerate(choices):
            where = f"response.body.choices[{index}]"
            choice = _object(choice, where)
            if "message" in choice:
                message = _object(choice["message"], f"{where}.message")
                rest = {k: v for k, v in choice.items() if k != "message"}
                found.append((f"{where}.message", message, rest))
            elif isinstance(choice.get("text"), str):  # /v1/completions
                rest = {k: v for k, v in choice.items() if k != "text"}
                found.append(
                    (f"{where}.text", {"role": "assistant", "content": choice["text"]}, rest)
                )
            else:
                raise RecordRejected("missing_field", f"{where} has no message nor text")
        return found
    output = body.get("output")
    if isinstance(output, list):  # /v1/responses
        return [("response.body.output", _responses_message(output), {})]
    raise RecordRejected("missing_field", "response.body has no choices nor output")


def _responses_message(output: list[Any]) -> dict[str, Any]:
    """A Responses API output as one assistant message: its output text and calls."""
    texts: list[Any] = []
    calls: list[dict[str, Any]] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message" and isinstance(item.get("content"), list):
            texts += item["content"]
        elif item.get("type") == "function_call":
            calls.append(
                {
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")},
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": texts}
    if calls:
        message["tool_calls"] = calls
    return message


def _output(
    record: Record,
    options: ConvertOptions,
    data: dict[str, Any],
    request: dict[str, Any] | None = None,
) -> list[Thread]:
    """The thread of each choice's answer: after the request's messages when `request`
    (its line) is given, else alone (the answer only, noted)."""
    custom_id = _custom_id(record, data)
    response = data.get("response")
    failure = _failure(data, response)
    if failure is not None:
        raise RecordRejected(
            "empty_conversation", f"batch request {custom_id} failed ({failure}): no answer"
        )
    response = _object(response, "response")
    body = _object(response.get("body", response), "response.body")
    wrapped = "body" in response
    choices = _choices(body)
    threads = []
    for index, (where, message, rest) in enumerate(choices):
        meta: dict[str, Any] = {"custom_id": data.get("custom_id")}
        if len(choices) > 1:
            meta["group_id"] = custom_id
        if isinstance(body.get("model"), str):
            meta["model"] = body["model"]
        thread_id = custom_id if len(choices) == 1 and request else f"{custom_id}:{index}"
        if request is not None:
            meta[JOINED] = True
            builder, _ = _request_builder(record, options, request, thread_id, meta)
        else:
            builder = ThreadBuilder(record, NAME, options, thread_id=thread_id, meta=meta)
        if message.get("role", "assistant") != "assistant":
            raise RecordRejected("unknown_role", f"{where}.role is {message.get('role')!r}")
        reader = MessageReader(builder, body, read_tools([]))
        reader.message(where, {"role": "assistant", **message})
        reader.finish()
        if request is None:
            builder.note(ANSWER_ONLY.format(custom_id=custom_id))
        builder.keep_unread(data, OUTPUT_KEYS)
        if wrapped:
            builder.keep_unread(response, {"body"}, where="response")
        builder.keep_unread(body, {"choices", "output", "model"}, where="response.body")
        builder.keep_unread(rest, (), where="choice")
        threads.append(builder.build())
    return threads


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """A request line: its thread (prompt-only before the answer); an output line: the
    thread of each choice's answer, after its request's messages when `join_requests`
    found them."""
    data = record.value
    if not isinstance(data, dict):
        raise RecordRejected("not_an_object", f"expected an object, got {json_kind(data)}")
    if set(data) == {JOINED_REQUEST, JOINED_OUTPUT}:
        return _output(record, options, data[JOINED_OUTPUT], data[JOINED_REQUEST])
    if "body" in data and "response" not in data:
        return _request(record, options, data)
    if "response" in data or "error" in data:
        return _output(record, options, data)
    raise RecordRejected("missing_field", "neither a request body nor a response")


def join_requests(
    items: Iterator[Record | Rejection],
) -> Iterator[Record | Rejection | tuple[Record, tuple[Record, ...]]]:
    """An output file's lines, each joined with its request's line when the request file
    beside it (pipeline/sources/batch_files.py) holds it: one merged record standing for
    both; then the requests no output line answered, each on its own. The request file's
    lines are held while the output file is read (a batch holds at most tens of
    thousands); a request file's unreadable lines are passed on, quarantined with it."""
    items = iter(items)
    head = next(items, None)
    if head is None:
        return
    request_file = request_file_for(head.source) if os.path.isfile(head.source) else None
    requests: dict[Any, Record] = {}
    if request_file is not None:
        # the request file lies beside the output file: named beside it too
        name = (
            posixpath.join(posixpath.dirname(head.name), os.path.basename(request_file))
            if isinstance(head, Record) and head.name is not None
            else None
        )
        for item in iter_file(request_file, ReadLimits(), name=name):
            custom_id = (
                item.value.get("custom_id")
                if isinstance(item, Record) and isinstance(item.value, dict)
                else None
            )
            if isinstance(item, Record) and custom_id is not None and custom_id not in requests:
                requests[custom_id] = item
            else:
                yield item
    for item in itertools.chain([head], items):
        value = item.value if isinstance(item, Record) else None
        request = requests.pop(value.get("custom_id"), None) if isinstance(value, dict) else None
        if not isinstance(item, Record) or request is None or batch_line_kind(value) != "output":
            yield item
            continue
        merged = dataclasses.replace(
            item,
            value={JOINED_REQUEST: request.value, JOINED_OUTPUT: value},
            notes=(*item.notes, *request.notes, f"joined with its request ({request.lineage[1]})"),
        )
        yield merged, (item, request)
    yield from requests.values()


FORMAT = InputFormat(
    name=NAME,
    summary="OpenAI Batch API files: request lines (custom_id, url, body.messages) as "
    "prompt-only threads, output lines (response.body.choices) as the answers, joined with "
    "their requests when the request file is beside the output file",
    sniff=sniff,
    to_threads=to_threads,
    group=join_requests,
)
