"""The registry of input formats imports an adapter when it is asked for: a command that
names its format imports that adapter alone, and every name gives the format that the
whole list gives."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

SCRIPT = """
import sys
from pipeline.formats import FORMATS, get_format
named = {name: get_format(name) for name in sys.argv[1:]}
adapters = sorted(m for m in sys.modules if m.startswith("pipeline.formats.") and "." not in m[17:])
print(" ".join(adapters))
everything = dict(FORMATS)
assert all(everything[name] is fmt for name, fmt in named.items())
print(" ".join(everything))
"""


def _run(*names: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *names],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def test_a_named_format_imports_its_adapter_alone():
    imported, listed = _run("mms", "hh-rlhf")
    adapters = {m.removeprefix("pipeline.formats.") for m in imported.split()}
    assert {"mms", "hh_rlhf"} <= adapters
    assert not adapters & {"openai", "sharegpt", "alpaca", "toolbench", "harmony"}
    assert len(listed.split()) > 20


def test_every_format_by_name_is_the_one_the_list_holds():
    """Names whose module is named otherwise (`prompts`) fall back to the whole list."""
    _, listed = _run()
    _, again = _run(*listed.split())
    assert again == listed
