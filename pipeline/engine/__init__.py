"""Engines (DESIGN §8): they run a plan of parts through a per-part function and hand back
each part's directory in plan order; they know nothing of inputs, formats, rules or
tokenizers. `local` runs parts in worker processes on one machine; `ray` runs them on a Ray
cluster (pipeline/engine/ray.py, the `ray` extra). Both write the same work directory
(pipeline/engine/workdir.py), so a run resumes from its finished parts on either."""

from __future__ import annotations

from pipeline.engine.local import LocalRunner
from pipeline.engine.units import Partitioner, Runner, iter_units, run_units
from pipeline.engine.workdir import UnitFailed, WorkdirError, reset_workdir

__all__ = [
    "LocalRunner",
    "Partitioner",
    "Runner",
    "UnitFailed",
    "WorkdirError",
    "iter_units",
    "reset_workdir",
    "run_units",
]
