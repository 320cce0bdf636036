"""Engines that run the stages of `mms run` over work units (DESIGN §8): `local` runs them
in worker processes on one machine, resumable from its work directory."""

from __future__ import annotations

from pipeline.engine.local import (
    UnitFailed,
    WorkdirError,
    iter_units,
    reset_workdir,
    run_units,
)
from pipeline.engine.units import (
    DEFAULT_SPLIT_BYTES,
    WorkUnit,
    iter_unit_records,
    plan_units,
)

__all__ = [
    "DEFAULT_SPLIT_BYTES",
    "UnitFailed",
    "WorkUnit",
    "WorkdirError",
    "iter_unit_records",
    "iter_units",
    "plan_units",
    "reset_workdir",
    "run_units",
]
