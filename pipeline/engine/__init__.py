"""Engines (DESIGN §8): they run a plan of parts through a per-part function and hand back
each part's directory in plan order; they know nothing of inputs, formats, rules or
tokenizers. `local` runs parts in worker processes on one machine; `ray` runs them on a Ray
cluster (pipeline/engine/ray.py, the `ray` extra). Both write the same work directory
(pipeline/engine/workdir.py), so a run resumes from its finished parts on either. The
partition pass (pipeline/engine/keys.py) runs on either through its tasks."""

from __future__ import annotations

from pipeline.engine.keys import find_repeated
from pipeline.engine.local import LocalRunner
from pipeline.engine.parts import Runner, iter_parts, run_parts, workers_apart
from pipeline.engine.workdir import PartFailed, WorkdirError, reset_workdir

__all__ = [
    "LocalRunner",
    "PartFailed",
    "Runner",
    "WorkdirError",
    "find_repeated",
    "iter_parts",
    "reset_workdir",
    "run_parts",
    "workers_apart",
]
