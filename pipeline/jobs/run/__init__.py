"""`mms run`: a pipeline config's stages from raw files to shards, reports, manifest and
dataset card. job.py drives a run; stages.py lists its stages; part.py is the map side
over the parts (read, normalize, every stage's map), reduce.py the dataset side:
repeated_pass.py the rows whose keys repeat, in plan order, then decisions.py each part's
task (every stage's decisions, weights, splits), selection.py what it keeps of each part,
shard_tasks.py the shards the engine's workers write from that; outputs.py the files
written last; partition.py the partition pass of an engine that partitions by key."""

from pipeline.jobs.run.job import (
    LOCAL_WORKERS,
    FinishedBefore,
    RunResult,
    detected_format,
    engine_runner,
    plan,
    run_pipeline,
)
from pipeline.jobs.run.reduce import SHARD_WRITES
from pipeline.output.folder import WORK_DIR
from pipeline.stages.fractions import stable_fraction

__all__ = [
    "LOCAL_WORKERS",
    "SHARD_WRITES",
    "WORK_DIR",
    "FinishedBefore",
    "RunResult",
    "detected_format",
    "engine_runner",
    "plan",
    "run_pipeline",
    "stable_fraction",
]
