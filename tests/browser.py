"""Test helper: headless Chromium for the HTML pages (the lint report, the stats page),
through scripts/render_lint_report.py's helpers; a test skips with the reason when no
browser is installed."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from tests.conftest import REPO


def render_script() -> ModuleType:
    """scripts/render_lint_report.py, loaded as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "render_lint_report", REPO / "scripts" / "render_lint_report.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def chromium(page: str) -> tuple[ModuleType, str]:
    """The script module and the Chromium executable; skips naming `page` without one."""
    script = render_script()
    found = script.find_chromium()
    if found is None:
        pytest.skip(f"headless Chromium (`chromium` on PATH) is needed to load {page}")
    return script, found
