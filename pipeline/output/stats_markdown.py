"""`mms stats` as Markdown (and an output's reports/stats.md): a table of the splits, one
per split's groups with --by, and a run's accounting."""

from __future__ import annotations

from typing import Any

COLUMNS = (
    ("threads", "threads"),
    ("messages", "messages"),
    ("tool_calls", "tool calls"),
    ("tokens", "tokens"),
    ("trained_tokens", "trained"),
    ("length_p50", "p50"),
    ("length_p90", "p90"),
    ("length_p99", "p99"),
    ("length_max", "max"),
)
"""The figures each table shows (token columns only when the shards are tokenized)."""


def stats_markdown(stats: dict[str, Any]) -> str:
    """The Markdown page of `compute_stats`' figures (plus `run` when given)."""
    splits = stats["splits"]
    lines = ["# mms stats", ""]
    lines += _table("split", [(name, figures) for name, figures in splits.items()])
    for name, figures in splits.items():
        grouped = figures.get("by")
        if grouped:
            lines += ["", f"## {name} by `{grouped['field']}`", ""]
            lines += _table(grouped["field"], [(g["group"], g) for g in grouped["groups"]])
    run = stats.get("run")
    if run is not None:
        lines += ["", "## The run", ""]
        rates = run["duplicate_rate"]
        lines += [
            f"- records read: {run['records_read']:,}, quarantined: {run['records_quarantined']:,}",
            f"- threads: {run['threads']:,}; exact duplicates {rates['exact']:.2%}, near "
            f"{rates['near']:.2%}; truncated to fit: {run['truncated']:,}",
        ]
        for reason, count in sorted(run["dropped"].items()):
            lines.append(f"- dropped `{reason}`: {count:,}")
        if run["inputs"]:
            lines += [
                "",
                "| input | read | quarantined | dropped | written | tokens |",
                "|---|---:|---:|---:|---:|---:|",
            ]
            for source in run["inputs"]:
                lines.append(
                    f"| `{source['path']}` | {source['records_read']:,} | "
                    f"{source['records_quarantined']:,} | {source['threads_dropped']:,} | "
                    f"{source['rows_written']:,} | {source.get('tokens', 0):,} |"
                )
    return "\n".join(lines) + "\n"


def _table(first: str, rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    shown = [(key, title) for key, title in COLUMNS if any(key in f for _, f in rows)]
    lines = [
        "| " + " | ".join([first, *(title for _, title in shown)]) + " |",
        "|---|" + "---:|" * len(shown),
    ]
    for name, figures in rows:
        cells = [f"{figures[key]:,}" if key in figures else "" for key, _ in shown]
        lines.append("| " + " | ".join([f"`{name}`", *cells]) + " |")
    return lines
