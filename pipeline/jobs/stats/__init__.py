"""`mms stats`: figures of an output's shards (polars, streaming) and of its run."""

from pipeline.jobs.stats.compute import compute_stats, output_stats, stats_json
from pipeline.jobs.stats.files import ALL, StatsError, role_token_id, shard_files
from pipeline.jobs.stats.run import figures_of_counts, run_figures
from pipeline.jobs.stats.threads import PERCENTILES

__all__ = [
    "ALL",
    "PERCENTILES",
    "StatsError",
    "compute_stats",
    "figures_of_counts",
    "output_stats",
    "role_token_id",
    "run_figures",
    "shard_files",
    "stats_json",
]
