"""The canonical MMS thread (DESIGN §3), the ground floor every other package builds on:
the typed model (`model`), validation that names the exact field at fault
(`validation`), the Arrow form every stage and shard uses (`arrow`), and where a
thread's final assistant turn begins (`turns`)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pipeline.mms.model import (
    Format,
    Media,
    MediaKind,
    Message,
    Role,
    SystemSettings,
    Thread,
    canonical_weight,
    content_from_parts,
    content_parts,
    shown_content,
    stable_thread_id,
)
from pipeline.mms.turns import answer_start, final_turn_start
from pipeline.mms.validation import (
    DEFAULT_FORMAT,
    FORMAT_FIELDS,
    FRAMES,
    MEDIA_KINDS,
    MEDIA_MARKER,
    MEDIA_PART_FIELDS,
    MEDIA_ROLES,
    MEDIA_SOURCES,
    MESSAGE_FIELDS,
    ROLE_FIELDS,
    ROLES,
    SAMPLERS,
    TEXT_PART_FIELDS,
    THREAD_FIELDS,
    FieldError,
    ThreadValidationError,
    is_weight,
    validate_thread_dict,
    without_foreign_nulls,
)

if TYPE_CHECKING:
    from pipeline.mms.arrow import (
        FORMAT_ARROW_TYPE,
        MEDIA_ARROW_TYPE,
        MEDIA_COLUMN,
        MESSAGE_ARROW_TYPE,
        THREAD_ARROW_SCHEMA,
        THREAD_MEDIA_ARROW_SCHEMA,
        media_rows,
        media_to_arrow,
        normalize_thread_dict,
        settings_to_arrow,
        threads_from_arrow,
        threads_to_arrow,
    )

_ARROW = (
    "FORMAT_ARROW_TYPE",
    "MEDIA_ARROW_TYPE",
    "MEDIA_COLUMN",
    "MESSAGE_ARROW_TYPE",
    "THREAD_ARROW_SCHEMA",
    "THREAD_MEDIA_ARROW_SCHEMA",
    "media_rows",
    "media_to_arrow",
    "normalize_thread_dict",
    "settings_to_arrow",
    "threads_from_arrow",
    "threads_to_arrow",
)
"""The names of the Arrow form (`arrow`), imported when first asked for (PEP 562): the
model and its validation need no pyarrow."""


def __getattr__(name: str) -> Any:
    if name not in _ARROW:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("pipeline.mms.arrow"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_ARROW})


__all__ = [
    "DEFAULT_FORMAT",
    "FORMAT_ARROW_TYPE",
    "FORMAT_FIELDS",
    "FRAMES",
    "MEDIA_ARROW_TYPE",
    "MEDIA_COLUMN",
    "MEDIA_KINDS",
    "MEDIA_MARKER",
    "MEDIA_PART_FIELDS",
    "MEDIA_ROLES",
    "MEDIA_SOURCES",
    "MESSAGE_ARROW_TYPE",
    "MESSAGE_FIELDS",
    "ROLES",
    "ROLE_FIELDS",
    "SAMPLERS",
    "TEXT_PART_FIELDS",
    "THREAD_ARROW_SCHEMA",
    "THREAD_FIELDS",
    "THREAD_MEDIA_ARROW_SCHEMA",
    "FieldError",
    "Format",
    "Media",
    "MediaKind",
    "Message",
    "Role",
    "SystemSettings",
    "Thread",
    "ThreadValidationError",
    "answer_start",
    "canonical_weight",
    "content_from_parts",
    "content_parts",
    "final_turn_start",
    "is_weight",
    "media_rows",
    "media_to_arrow",
    "normalize_thread_dict",
    "settings_to_arrow",
    "shown_content",
    "stable_thread_id",
    "threads_from_arrow",
    "threads_to_arrow",
    "validate_thread_dict",
    "without_foreign_nulls",
]
