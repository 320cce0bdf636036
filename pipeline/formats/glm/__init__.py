"""GLM chat histories (seed 004), as PyALM (GLM's later name) writes them: a `history` of
user / assistant / user_interaction entries (single-key mappings, or {role, content}),
chat `meta`, `settings` (`function_calls.available_functions`, delimiters; real files nest
them as `settings.settings`) and `system` (`content` or `primary_message`, extra info
keys; real files nest `system.system`); or a PyALM ConversationTracker dump (`tracker`
entries whose `!ConversationRole` tag the YAML reader turns into the role name).

Function calls are Python call code, either listed in an entry's `function_calls` or
written in the assistant's text between PyALM's delimiters, the return value following
between the delimiters reversed (PyALM's integration template). The code is read with
`ast.parse` and its arguments with `ast.literal_eval`, never run: a call that is not a
named function applied to literals stays text, listed in `meta.unrenderable`. Calls become
`name:json` tool-call messages, return values context messages named after the tool, and
`available_functions` tool declarations. PyALM `[[SYMBOL]]`s in system text are filled
with what PyALM would put there when the record tells us; unknown ones stay and are noted.

Layout: history.py and tracker.py read the two shapes; turns.py makes an entry's text and
function_calls into messages, reading call code with calls.py; settings.py gives the
delimiters, functions.py the tool declarations, system.py the system text and symbols.

Example: a GLM history and the thread it becomes.

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> record = {"history": [
...     {"role": "user", "content": "Translate 'good morning' to German."},
...     {"role": "assistant", "content": "Guten Morgen!"},
... ]}
>>> [thread] = to_threads(Record("histories.jsonl", "histories.jsonl:1", record), ConvertOptions())
>>> [(m.role, m.content) for m in thread.messages]
[('user', "Translate 'good morning' to German."), ('assistant', 'Guten Morgen!')]
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder, json_kind, source_thread_id
from pipeline.formats.glm.history import ENTRY_ROLES, history_thread
from pipeline.formats.glm.tracker import tracker_thread
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.schemas import schema_problem
from pipeline.sources import Record

NAME = "glm"


def _entry_role(entry: dict[str, Any]) -> Any:
    return entry["role"] if "role" in entry else next(iter(entry), None)


def sniff(value: object) -> Sniff:
    """Sure for a `history` of GLM entries (single-key user/assistant/user_interaction
    mappings or role objects) or a PyALM `tracker` of role entries."""
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object")
    tracker = value.get("tracker")
    if (
        isinstance(tracker, list)
        and tracker
        and all(isinstance(entry, dict) and "role" in entry for entry in tracker)
    ):
        return Sniff(1.0, "a PyALM ConversationTracker dump (tracker entries with roles)")
    history = value.get("history")
    if (
        isinstance(history, list)
        and history
        and all(isinstance(e, dict) and ("role" in e or len(e) == 1) for e in history)
        and any(_entry_role(e) in ENTRY_ROLES for e in history)
    ):
        return Sniff(1.0, "GLM history entries (user / assistant / user_interaction)")
    return Sniff(0.0, "no GLM history or PyALM tracker")


def _validate(value: Any) -> None:
    """Quarantine a record that breaks schemas/glm.schema.json, naming the path."""
    problem = schema_problem(value, NAME)
    if problem is None:
        return
    where = problem.path or "the record"
    if problem.keyword == "enum" and _is_role_path(problem.path):
        role = problem.instance
        expected = ", ".join(_expected_roles(problem.path))
        raise RecordRejected(
            "unknown_role",
            f"{problem.path.removesuffix('.role')} has role {role!r} (expected {expected})",
            problem.details,
        )
    if "available_functions" in problem.path:
        code = "invalid_tools"
    elif "function_calls" in problem.path:
        code = "invalid_tool_call"
    else:
        code = "missing_field"
    raise RecordRejected(code, f"{where}: {problem.message}", problem.details)


def _is_role_path(path: str) -> bool:
    return path.endswith(".role") or re.fullmatch(r"history\[\d+\]", path) is not None


def _expected_roles(path: str) -> Iterable[str]:
    if path.startswith("tracker"):
        return ("USER", "ASSISTANT", "SYSTEM", "FUNCTION")
    return ENTRY_ROLES


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per history or tracker dump; no assistant entry -> prompt-only."""
    data = record.value
    if not isinstance(data, dict):
        raise RecordRejected(
            "not_an_object",
            f"expected a GLM history or PyALM tracker object, got {json_kind(data)}",
        )
    _validate(data)
    builder = ThreadBuilder(
        record, NAME, options, thread_id=source_thread_id(record, data.get("id"))
    )
    if "tracker" in data:
        tracker_thread(builder, data)
    else:
        history_thread(builder, data)
    return [builder.build()]


FORMAT = InputFormat(
    name=NAME,
    summary="GLM / PyALM chat histories (history of user/assistant/user_interaction entries, "
    "settings, system) and PyALM ConversationTracker dumps; Python function calls read, never run",
    sniff=sniff,
    to_threads=to_threads,
)
