"""Shared test fixtures: repository paths, the ../shared data folder, hypothesis profile."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MMS_SHARED", REPO.parent / "shared"))

settings.register_profile("mms", derandomize=True, max_examples=300, deadline=None)
settings.load_profile("mms")


@pytest.fixture
def shared() -> Path:
    """The ../shared folder of real public files; tests using it skip when it is absent."""
    if not (SHARED / "DESIGN.md").is_file():
        pytest.skip(f"real data folder {SHARED} is absent (set MMS_SHARED to point at it)")
    return SHARED
