"""The Jinja2 environment of the self-contained HTML pages (the lint report, the stats
page): autoescaped, strict about undefined names, templates compiled once per process and
their compiled code kept in the mms cache, so a run loads it instead of compiling again."""

from __future__ import annotations

import hashlib
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import Environment, FileSystemBytecodeCache, FileSystemLoader, StrictUndefined, Template
from jinja2.bccache import Bucket

from pipeline.user_cache import cache_folder
from pipeline.version import __version__

OPTIONS: dict[str, Any] = {
    "autoescape": True,
    "undefined": StrictUndefined,
    "trim_blocks": True,
    "lstrip_blocks": True,
    "keep_trailing_newline": True,
}
"""The environment's settings; the compiled code depends on them."""


class _KeptCode(FileSystemBytecodeCache):
    """Compiled templates kept on disk, written whole (Jinja renames a temporary file); a
    cache that cannot be written is skipped, since compiling again gives the same code."""

    def dump_bytecode(self, bucket: Bucket) -> None:
        with suppress(OSError):
            Path(self.directory).mkdir(parents=True, exist_ok=True)
            super().dump_bytecode(bucket)


def _kept_code() -> FileSystemBytecodeCache | None:
    """Where compiled templates are kept: none when the mms cache is off. Jinja keys an
    entry by template name, file and source; the file names add what else the code
    depends on (the Jinja and mms versions, the settings)."""
    folder = cache_folder()
    if folder is None:
        return None
    made_by = repr((jinja2.__version__, __version__, sorted(OPTIONS.items(), key=str)))
    prefix = hashlib.sha256(made_by.encode()).hexdigest()[:16]
    return _KeptCode(str(folder / "templates"), f"{prefix}-%s.code")


@cache
def page_template(folder: Path, name: str) -> Template:
    """The template `name` of `folder`, compiled once per process (or loaded compiled)."""
    environment = Environment(
        loader=FileSystemLoader(folder), bytecode_cache=_kept_code(), **OPTIONS
    )
    return environment.get_template(name)
