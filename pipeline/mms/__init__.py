"""The canonical MMS thread (DESIGN §3), the ground floor every other package builds on:
the typed model (`model`), validation that names the exact field at fault
(`validation`), the Arrow form every stage and shard uses (`arrow`), and where a
thread's final assistant turn begins (`turns`)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pipeline.mms.model import (
    Format,
    Message,
    Role,
    SystemSettings,
    Thread,
    canonical_weight,
    stable_thread_id,
)
from pipeline.mms.turns import answer_start, final_turn_start
from pipeline.mms.validation import (
    DEFAULT_FORMAT,
    FORMAT_FIELDS,
    MESSAGE_FIELDS,
    ROLE_FIELDS,
    ROLES,
    SAMPLERS,
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
        MESSAGE_ARROW_TYPE,
        THREAD_ARROW_SCHEMA,
        normalize_thread_dict,
        settings_to_arrow,
        threads_from_arrow,
        threads_to_arrow,
    )

_ARROW = (
    "FORMAT_ARROW_TYPE",
    "MESSAGE_ARROW_TYPE",
    "THREAD_ARROW_SCHEMA",
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
    "MESSAGE_ARROW_TYPE",
    "MESSAGE_FIELDS",
    "ROLES",
    "ROLE_FIELDS",
    "SAMPLERS",
    "THREAD_ARROW_SCHEMA",
    "THREAD_FIELDS",
    "FieldError",
    "Format",
    "Message",
    "Role",
    "SystemSettings",
    "Thread",
    "ThreadValidationError",
    "answer_start",
    "canonical_weight",
    "final_turn_start",
    "is_weight",
    "normalize_thread_dict",
    "settings_to_arrow",
    "stable_thread_id",
    "threads_from_arrow",
    "threads_to_arrow",
    "validate_thread_dict",
    "without_foreign_nulls",
]
