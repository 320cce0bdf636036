"""The repository speaks of the project alone: no tracked file names a tracker's numbered
entries, since such a number says nothing to a reader of the code and outlives the tracker
it pointed into. Code and docs say what a thing does and why instead."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.conftest import REPO

TRACKER_NUMBER = re.compile("[Ii]" + "ssue" + r" [0-9]+")
"""A tracker reference (`I`+`ssue 12`), built from pieces so this file does not hold one."""


def tracked_files() -> list[str]:
    """The files git tracks in the repository (skipped outside a git checkout)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"not a git checkout: {error}")
    return [name for name in listed.decode().split("\0") if name]


def test_the_pattern_finds_a_tracker_number() -> None:
    assert TRACKER_NUMBER.search("as " + "issue" + " 38 asked")
    assert TRACKER_NUMBER.search("I" + "ssue 7: the quickstart")
    assert not TRACKER_NUMBER.search("huggingface_hub's bug #1411, an issue of theirs")


def test_no_tracked_file_names_a_tracker_number() -> None:
    found = []
    for name in tracked_files():
        path = REPO / name
        if not path.is_file():  # deleted in the work tree, not yet committed
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        found += [
            f"{name}:{number}: {line.strip()[:80]}"
            for number, line in enumerate(text.splitlines(), 1)
            if TRACKER_NUMBER.search(line)
        ]
    assert found == []
