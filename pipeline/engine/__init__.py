"""Engines (DESIGN §8): they run a plan of parts through a per-part function and hand back
each part's results in plan order; they know nothing of inputs, formats, rules or
tokenizers. `local` runs parts in worker processes on one machine, resumable from its work
directory."""

from __future__ import annotations

from pipeline.engine.local import (
    UnitFailed,
    WorkdirError,
    iter_units,
    reset_workdir,
    run_units,
)

__all__ = ["UnitFailed", "WorkdirError", "iter_units", "reset_workdir", "run_units"]
