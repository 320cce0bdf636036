"""mms-pipeline: turn conversation datasets into Modular Model Spec training data.

The public API: every command as a function (`pipeline.api`: `run`, `curate`, `pack`,
`stats`, `verify`, `push` and `export` are here too), `read` (inputs -> threads),
`convert` (inputs -> MMS JSONL + quarantine), the thread model (`Thread`, `Message`, `Media`, `Format`, `SystemSettings`) and its Arrow form, and
the linter (`from pipeline.lint import lint`; `LintConfig`, `LintReport`, `lint_threads`
here: the function is not re-exported as `pipeline.lint`, which names the package). Each
is imported when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.accounting import Account
    from pipeline.api import Stats, convert, curate, export, pack, push, run, stats, verify
    from pipeline.formats import FORMATS
    from pipeline.jobs.convert import ConvertResult
    from pipeline.jobs.lint import lint_threads
    from pipeline.jobs.read import ReadSpec, read
    from pipeline.lint import LintConfig, LintReport
    from pipeline.mms import (
        THREAD_ARROW_SCHEMA,
        THREAD_MEDIA_ARROW_SCHEMA,
        FieldError,
        Format,
        Media,
        Message,
        SystemSettings,
        Thread,
        ThreadValidationError,
        threads_from_arrow,
        threads_to_arrow,
        validate_thread_dict,
    )
    from pipeline.quarantine import ERROR_CODES, Rejection
    from pipeline.sources import InputError, ReadLimits
    from pipeline.version import __version__

_LAZY = {
    "Account": "pipeline.accounting",
    **dict.fromkeys(
        ("Stats", "convert", "curate", "export", "pack", "push", "run", "stats", "verify"),
        "pipeline.api",
    ),
    "FORMATS": "pipeline.formats",
    "ConvertResult": "pipeline.jobs.convert",
    "lint_threads": "pipeline.jobs.lint",
    "ReadSpec": "pipeline.jobs.read",
    "read": "pipeline.jobs.read",
    "LintConfig": "pipeline.lint",
    "LintReport": "pipeline.lint",
    **dict.fromkeys(
        (
            "THREAD_ARROW_SCHEMA",
            "THREAD_MEDIA_ARROW_SCHEMA",
            "FieldError",
            "Format",
            "Media",
            "Message",
            "SystemSettings",
            "Thread",
            "ThreadValidationError",
            "threads_from_arrow",
            "threads_to_arrow",
            "validate_thread_dict",
        ),
        "pipeline.mms",
    ),
    "ERROR_CODES": "pipeline.quarantine",
    "Rejection": "pipeline.quarantine",
    "InputError": "pipeline.sources",
    "ReadLimits": "pipeline.sources",
    "__version__": "pipeline.version",
}
"""Where each name of the public API lives: imported when first asked for (PEP 562), so
`import pipeline.mms` or `mms run` loads only the floors it uses, not every job's."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ERROR_CODES",
    "FORMATS",
    "THREAD_ARROW_SCHEMA",
    "THREAD_MEDIA_ARROW_SCHEMA",
    "Account",
    "ConvertResult",
    "FieldError",
    "Format",
    "InputError",
    "LintConfig",
    "LintReport",
    "Media",
    "Message",
    "ReadLimits",
    "ReadSpec",
    "Rejection",
    "Stats",
    "SystemSettings",
    "Thread",
    "ThreadValidationError",
    "__version__",
    "convert",
    "curate",
    "export",
    "lint_threads",
    "pack",
    "push",
    "read",
    "run",
    "stats",
    "threads_from_arrow",
    "threads_to_arrow",
    "validate_thread_dict",
    "verify",
]
