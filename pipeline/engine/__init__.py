"""Engines (DESIGN §8): they run a plan of parts through a per-part function and hand back
each part's directory in plan order; they know nothing of inputs, formats, rules or
tokenizers. `local` runs parts in worker processes on one machine; `ray` runs them on a Ray
cluster (pipeline/engine/ray.py, the `ray` extra). Both write the same work directory
(pipeline/engine/workdir.py), so a run resumes from its finished parts on either."""

from __future__ import annotations

from pipeline.engine.local import LocalRunner
from pipeline.engine.parts import Partitioner, Runner, iter_parts, run_parts
from pipeline.engine.workdir import PartFailed, WorkdirError, reset_workdir

__all__ = [
    "LocalRunner",
    "PartFailed",
    "Partitioner",
    "Runner",
    "WorkdirError",
    "iter_parts",
    "reset_workdir",
    "run_parts",
]
