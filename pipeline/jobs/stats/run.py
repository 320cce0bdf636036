"""What a run's manifest adds to `mms stats`: records read and quarantined, the duplicate
rates, threads and tokens dropped per reason, truncation, packing and the per-input
accounting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.jobs.stats.files import StatsError, read_json_object
from pipeline.schemas import MAX_MESSAGE_CHARS, definition_validator

DUPLICATE_REASONS = (("exact", "duplicate"), ("near", "near_duplicate"))


def run_figures(folder: str | Path) -> dict[str, Any] | None:
    """The run figures of an output folder's manifest; None for a folder without one, or
    whose manifest is not a run's (`mms pack` and `mms tokenize` count other things)."""
    path = Path(folder) / "manifest.json"
    if not path.is_file():
        return None
    manifest = read_json_object(path)
    counts = manifest.get("counts", {})
    if not isinstance(counts, dict) or "records_read" not in counts or "inputs" not in counts:
        return None
    try:
        figures = figures_of_counts(counts, manifest.get("packing"))
    except (AttributeError, TypeError, ValueError, ZeroDivisionError) as err:
        raise _not_as_written(path, f"{type(err).__name__}: {err}") from None
    problem = next(definition_validator("stats", "run").iter_errors(figures), None)
    if problem is not None:
        where = "/".join(map(str, problem.absolute_path)) or "counts"
        raise _not_as_written(path, f"{where}: {problem.message[:MAX_MESSAGE_CHARS]}")
    return figures


def _not_as_written(path: Path, why: str) -> StatsError:
    """A manifest whose counts are not the figures mms writes (a damaged or edited one)."""
    return StatsError(
        f"{path}: its counts are not as mms writes them ({why}); `mms verify` checks the output"
    )


def figures_of_counts(counts: dict[str, Any], packing: dict[str, Any] | None) -> dict[str, Any]:
    """The run figures of a manifest's `counts` (and `packing`, None when not packed)."""
    threads = counts.get("threads", 0)
    dropped = counts.get("threads_dropped", {})
    return {
        "records_read": counts.get("records_read", 0),
        "records_quarantined": sum(counts.get("records_quarantined", {}).values()),
        "threads": threads,
        "duplicate_rate": {
            kind: round(dropped.get(reason, 0) / threads, 6) if threads else 0.0
            for kind, reason in DUPLICATE_REASONS
        },
        "dropped": dropped,
        "tagged": counts.get("threads_tagged", {}),
        "tokens_dropped": counts.get("tokens_dropped", {}),
        "truncated": counts.get("threads_truncated", 0),
        "tokens_truncated": counts.get("tokens_truncated", 0),
        "weighted_copies": counts.get("weighted_copies", 0),
        "packing": packing,
        "inputs": counts.get("inputs", []),
    }
