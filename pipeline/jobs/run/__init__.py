"""`mms run`: a pipeline config's stages from raw files to shards, reports, manifest and
dataset card. job.py drives a run, its phases in order (DESIGN §8 has the table); stages.py
lists its stages; claim.py is where it writes and on what engine, planning.py its parts,
map_side.py the map side over the parts (part.py: read, normalize, every stage's map),
partition.py the partition pass of a run that partitions by key, repeated_pass.py the rows
whose keys repeat, in plan order, decisions.py each part's task (every stage's decisions,
weights, splits) and their merge, selection.py what it keeps of each part, shard_tasks.py
the shards the engine's workers write from that; outputs.py the files written last."""

from pipeline.jobs.run.claim import LOCAL_WORKERS, engine_runner
from pipeline.jobs.run.job import FinishedBefore, RunResult, run_pipeline
from pipeline.jobs.run.phases import SHARD_WRITES
from pipeline.jobs.run.planning import detected_format, plan
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
