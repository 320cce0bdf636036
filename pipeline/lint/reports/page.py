"""The Jinja2 environment of the self-contained HTML pages (the lint report, the stats
page): autoescaped, strict about undefined names, templates compiled once per process."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, Template


@cache
def page_template(folder: Path, name: str) -> Template:
    """The template `name` of `folder`, compiled once per process."""
    environment = Environment(
        loader=FileSystemLoader(folder),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    return environment.get_template(name)
