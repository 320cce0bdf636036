"""MkDocs hooks of the site (mkdocs.yml `hooks:`): the reference pages are generated from
the code at build time (scripts/build_reference.py) and added to the build and its
navigation, so `mkdocs build --strict` checks them with the written pages."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).resolve().parent))

import build_reference

REFERENCE_TITLE = "Reference"


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """The navigation's Reference section gets every generated page."""
    for entry in config.nav or []:
        if isinstance(entry, dict) and REFERENCE_TITLE in entry:
            entry[REFERENCE_TITLE] = build_reference.nav()
    return config


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    """The generated pages join the written ones; a written page of the same path is an
    error, not silently replaced."""
    for path, text in build_reference.pages().items():
        if files.get_file_from_path(path) is not None:
            raise SystemExit(f"docs/{path} is generated: remove the written file")
        files.append(File.generated(config, path, content=text))
    return files
