"""Test helper: a plugin that holds back the threads of some files until a gate file exists,
so a cluster test can lose a node while parts are certainly still running, however fast
the others go (tests/test_engine_ray_cluster.py). It keeps every thread."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

POLL_SECONDS = 0.02
HELD = ["toy_chat_fine_tuning", "weather_chat_fine_tuning", "evals_older_samples"]
"""The files whose threads wait in the real-files mix (tests/realdata_mix.py): its second
input, read after the first one's parts."""
HOLD_SECONDS = 3600
"""How long the plugin may hold a thread (its `timeout`): as long as a test keeps the gate shut."""


def hold_until_open(thread: Any, gate: str, held: list[str]) -> None:
    """Wait while `gate` does not exist if the thread comes from a file named in `held`."""
    source = str(thread.meta.get("source") or "")
    if any(name in source for name in held):
        while not os.path.exists(gate):
            time.sleep(POLL_SECONDS)


def add_gate(config: Path) -> Path:
    """Add this plugin to a real-files mix config (holding HELD's threads), its gate open;
    the gate file's path (remove it to hold those parts, create it to let them go)."""
    gate = gate_of(config)
    gate.touch()
    plugin = {
        "use": f"{__name__}:hold_until_open",
        "options": {"gate": str(gate), "held": HELD},
        "timeout": HOLD_SECONDS,
    }
    text = config.read_text()
    config.write_text(text.replace("stages:\n", f"stages:\n  plugins: [{json.dumps(plugin)}]\n"))
    return gate


def gate_of(config: Path) -> Path:
    """The gate file of a config `add_gate` changed."""
    return config.with_name("gate")
