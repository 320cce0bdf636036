"""Records that could not become threads: stable error codes, the rejection record, and
the quarantine JSONL writer. Nothing is dropped silently: every rejection is written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

REJECTED_FILE = "quarantine/rejected.jsonl"
"""Where an output keeps the records that did not become threads (relative to it)."""
DROPPED_FILE = "quarantine/dropped.jsonl"
"""Where an output lists the threads a stage left out, with why (relative to it)."""
RAW_KEEP_CHARS = 4096
"""How much of a rejected record's raw text the quarantine keeps."""

ERROR_CODES: dict[str, str] = {
    "invalid_utf8": "the bytes of the record are not valid UTF-8",
    "invalid_json": "the record is not valid JSON (position given)",
    "invalid_yaml": "the YAML document does not parse (line and column given)",
    "invalid_csv": "the CSV row does not parse (a quote never closed, line given)",
    "oversize_record": "the record is larger than --max-record-bytes",
    "too_deep": "the record nests lists and objects deeper than --max-depth levels",
    "unreadable_file": "the file (or the rest of it) cannot be read or decompressed",
    "unknown_format": "no input format recognised the record; pass --from, or a field "
    "mapping (`mms formats --suggest-mapping FILE` writes one to start from)",
    "dataset_registry": "the file is a dataset registry (dataset_info.json), not data",
    "not_an_object": "the record is not a JSON object (or a list of messages)",
    "invalid_thread": "the record has the right shape but is not a valid MMS thread",
    "missing_field": "a field the input format requires is missing or has the wrong type",
    "unknown_role": "a message has a role or speaker the input format does not define",
    "invalid_tool_call": "a tool call cannot be read (no tool name, or not a call object)",
    "unknown_tool_call": "a tool result refers to a call id that no earlier tool call has",
    "invalid_tools": "the record's tool definitions cannot be read",
    "empty_conversation": "the record holds no messages to convert",
    "media_mismatch": "the record's media lists and the `<image>`-style tags in its text "
    "differ in number (media kept: some would be lost or have no place)",
    "media_missing": "a media the record refers to does not exist (path, object or URL)",
    "media_outside_input": "a media path leads outside the folder of the record's input file "
    "and of every media root (`..`, an absolute path elsewhere, or a symlink out)",
    "media_kind": "a media's bytes are not the kind it claims (magic bytes), or no known "
    "image, audio or video file",
    "media_corrupt": "a media cannot be decoded: a truncated or broken image (Pillow), a bad "
    "audio or video header, or `data` that is not base64",
    "media_too_large": "a media is larger than `media.max_bytes` (or an image than "
    "`media.max_pixels`)",
    "media_unreadable": "a media cannot be read: not a regular file, no permission, or a "
    "fetch that failed or timed out",
    "invalid_template": "the prompt template does not parse (engine and line given)",
    "unrenderable_template": "the prompt needs a call, helper or directive that is never run",
    "unsafe_template": "the template tries to escape the sandbox or exceeds its size/time limits",
    "unsafe_yaml": "the YAML holds a tag that would construct objects (e.g. !!python/...)",
    "internal_error": "a converter failed unexpectedly on this record (a bug: please report it)",
}
"""Stable quarantine codes: users filter and gate on them, so never rename one."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """One quarantined record: where it came from, why, and (truncated) what it was."""

    source: str
    locator: str
    code: str
    message: str
    raw: str | None = None
    stage: str = "read"
    details: tuple[dict[str, str], ...] = field(default_factory=tuple)
    record_id: str | None = None
    """The id the record itself gives (`id`), when it was parsed and has one: the linter
    reports a record's findings under the thread id it would have had."""

    def to_dict(self) -> dict[str, Any]:
        raw = self.raw
        truncated = raw is not None and len(raw) > RAW_KEEP_CHARS
        return {
            "source": self.source,
            "locator": self.locator,
            "stage": self.stage,
            "code": self.code,
            "message": self.message,
            "details": list(self.details),
            "raw": raw[:RAW_KEEP_CHARS] if raw is not None and truncated else raw,
            "raw_truncated": truncated,
        }


def rejection_from_line(line: bytes) -> Rejection:
    """A Rejection read back from its quarantine JSONL line (the raw text as kept)."""
    data = orjson.loads(line)
    return Rejection(
        data["source"],
        data["locator"],
        data["code"],
        data["message"],
        raw=data.get("raw"),
        stage=data.get("stage", "read"),
        details=tuple(data.get("details") or ()),
    )


class RecordRejected(Exception):
    """Raised by a format adapter for a record it cannot convert; becomes a Rejection."""

    def __init__(self, code: str, message: str, details: tuple[dict[str, str], ...] = ()):
        if code not in ERROR_CODES:
            raise ValueError(f"unknown quarantine code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


def raw_text(data: bytes | str | None, value: Any = None) -> str | None:
    """The raw text to keep for a rejected record: its bytes decoded (bad bytes shown as
    `\\xNN`), or the JSON of its parsed value when the source kept no bytes."""
    if isinstance(data, bytes):
        return data[: RAW_KEEP_CHARS * 4].decode("utf-8", errors="backslashreplace")
    if isinstance(data, str):
        return data
    if value is None:
        return None
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError as err:  # nested past orjson's limit, or an integer beyond 64 bits
        return f"<a JSON {type(value).__name__} that cannot be shown: {err}>"


def rejection_line(rejection: Rejection) -> bytes:
    """One line of the quarantine JSONL."""
    return orjson.dumps(rejection.to_dict()) + b"\n"


def dropped_line(
    thread_id: str, meta: Any, stage: str, code: str, details: dict[str, Any] | None = None
) -> bytes:
    """One line of `quarantine/dropped.jsonl`: a thread a stage left out (its id, where it
    was read from, the stage and the code counted, and what more the stage said, such as
    the id of the thread a duplicate repeats)."""
    where = meta if isinstance(meta, dict) else {}
    line = {
        "id": thread_id,
        "source": where.get("source"),
        "locator": where.get("locator"),
        "stage": stage,
        "code": code,
        **(details or {}),
    }
    return orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)
