"""mms-pipeline: turn conversation datasets into Modular Model Spec training data.

The public API: `read` (inputs -> threads), `convert` (inputs -> MMS JSONL + quarantine),
the thread model (`Thread`, `Message`, `Format`, `SystemSettings`) and its Arrow form, and
the linter (`from pipeline.lint import lint`; `LintConfig`, `LintReport`, `lint_threads`
here: the function is not re-exported as `pipeline.lint`, which names the package).
"""

from pipeline.accounting import Account
from pipeline.formats import FORMATS
from pipeline.jobs.convert import ConvertResult, convert
from pipeline.jobs.lint import lint_threads
from pipeline.jobs.read import ReadSpec, read
from pipeline.lint import LintConfig, LintReport
from pipeline.mms import (
    THREAD_ARROW_SCHEMA,
    FieldError,
    Format,
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

__all__ = [
    "ERROR_CODES",
    "FORMATS",
    "THREAD_ARROW_SCHEMA",
    "Account",
    "ConvertResult",
    "FieldError",
    "Format",
    "InputError",
    "LintConfig",
    "LintReport",
    "Message",
    "ReadLimits",
    "ReadSpec",
    "Rejection",
    "SystemSettings",
    "Thread",
    "ThreadValidationError",
    "__version__",
    "convert",
    "lint_threads",
    "read",
    "threads_from_arrow",
    "threads_to_arrow",
    "validate_thread_dict",
]
