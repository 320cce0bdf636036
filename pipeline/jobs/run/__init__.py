"""`mms run`: a pipeline config's stages from raw files to shards, reports, manifest and
dataset card. job.py drives a run; unit.py is the map over work units (read, normalize,
lint, tokenize), reduce.py the ordered pass (dataset rules, gate, filters, dedup, splits,
shards), outputs.py the files written last."""

from pipeline.jobs.run.counts import RunCounts
from pipeline.jobs.run.job import WORK_DIR, RunResult, detected_format, plan, run_pipeline
from pipeline.jobs.run.keys import stable_fraction

__all__ = [
    "WORK_DIR",
    "RunCounts",
    "RunResult",
    "detected_format",
    "plan",
    "run_pipeline",
    "stable_fraction",
]
