"""The examples in the package's docstrings run, and show what they say: every module of
pipeline/ with a `>>>` example is imported and its doctests run (ELLIPSIS and
NORMALIZE_WHITESPACE on, so a long result may wrap); a module whose examples fail fails
here with doctest's report."""

from __future__ import annotations

import doctest
import importlib

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "pipeline"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules_with_examples() -> list[str]:
    """The dotted names of the modules whose source holds a `>>>` example (read, not
    imported: a module without examples is never imported here)."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>> " not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(REPO).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _modules_with_examples()


def test_modules_with_examples_are_found() -> None:
    """The scan sees the examples the package is known to hold (a guard against a scan that
    silently finds nothing)."""
    for name in ("pipeline.mms.model", "pipeline.packing.best_fit", "pipeline.stages.split"):
        assert name in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder().find(module)
    assert any(test.examples for test in tests), f"{name} has `>>> ` but no doctest found"
    failures: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test, out=failures.append)
    assert runner.failures == 0, "".join(failures)
