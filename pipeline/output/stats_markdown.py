"""`mms stats` as Markdown (and an output's reports/stats.md): a table of the splits, the
tokens per role and the capabilities of each, the figures of an objective's rows (pairs,
completions, prompts), one table per split's groups with --by, and a run's accounting."""

from __future__ import annotations

from typing import Any

from pipeline.accounting import most_first
from pipeline.output.objective_figures import objective_lines

COLUMNS = (
    ("threads", "threads"),
    ("rows", "rows"),
    ("messages", "messages"),
    ("tool_calls", "tool calls"),
    ("tokens", "tokens"),
    ("trained_tokens", "trained"),
    ("length_p50", "p50"),
    ("length_p90", "p90"),
    ("length_p99", "p99"),
    ("length_max", "max"),
)
"""The figures each table shows (those the shards have: tokens when tokenized ...)."""


def stats_markdown(stats: dict[str, Any]) -> str:
    """The Markdown page of `compute_stats`' figures (plus `run` when given)."""
    splits = stats["splits"]
    lines = ["# mms stats", ""]
    lines += _table("split", [(name, figures) for name, figures in splits.items()])
    for name, figures in splits.items():
        if figures.get("roles"):
            lines += ["", f"## {name}: tokens per role", ""]
            lines += _roles(figures["roles"])
        if figures.get("capabilities"):
            lines += ["", f"## {name}: capabilities (threads)", ""]
            lines += ["| format | enabled | used |", "|---|---:|---:|"]
            for fmt, counts in figures["capabilities"].items():
                lines.append(f"| `{fmt}` | {counts['enabled']:,} | {counts['used']:,} |")
        if figures.get("media"):
            lines += ["", f"## {name}: media", ""]
            lines += _media(figures["media"])
        objective = figures.get("objective")
        if objective:
            lines += ["", f"## {name}: {objective['objective']} rows", ""]
            lines += [f"- {line}" for line in objective_lines(objective)]
        grouped = figures.get("by")
        if grouped:
            lines += ["", f"## {name} by `{grouped['field']}`", ""]
            lines += _table(grouped["field"], [(g["group"], g) for g in grouped["groups"]])
    run = stats.get("run")
    if run is not None:
        lines += ["", "## The run", "", *_run(run)]
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


def _media(media: dict[str, Any]) -> list[str]:
    """Per kind and role: media, threads holding one, known size (inline data's decoded
    bytes and recorded sizes; how many media it covers when not all)."""
    if media.get("counted_from"):
        return _kind_media(media)
    lines = ["| media | role | media | threads | known size |", "|---|---|---:|---:|---:|"]
    rows = [("all", "all", media)]
    for kind, found in media["kinds"].items():
        rows.append((kind, "all", found))
        rows += [(kind, f"`{role}`", figures) for role, figures in found["roles"].items()]
    for kind, role, found in rows:
        shown = kind if kind == "all" else f"`{kind}`"
        lines.append(
            f"| {shown} | {role} | {found['media']:,} | {found['threads']:,} | {_size(found)} |"
        )
    return lines


def _kind_media(media: dict[str, Any]) -> list[str]:
    """Media counted from the rows' kind columns (no thread `media` column): per kind,
    media, rows holding one, embedded bytes; no roles, which those columns do not tell."""
    lines = [
        "Counted from the rows' `images` / `audios` / `videos` columns: the role of the "
        "message holding each media is not known; rows are the shards' rows (pairs, "
        "completions, prompts or packed sequences); known size: embedded bytes.",
        "",
        "| media | media | rows | known size |",
        "|---|---:|---:|---:|",
    ]
    rows = [("all", media), *((f"`{kind}`", found) for kind, found in media["kinds"].items())]
    for kind, found in rows:
        lines.append(f"| {kind} | {found['media']:,} | {found['rows']:,} | {_size(found)} |")
    return lines


def _size(found: dict[str, Any]) -> str:
    if not found["sized"]:
        return "-"
    size = f"{found['bytes']:,} bytes"
    return (
        size
        if found["sized"] == found["media"]
        else f"{size} ({found['sized']:,} of {found['media']:,})"
    )


def _roles(roles: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| role | messages | tokens | share | trained |", "|---|---:|---:|---:|---:|"]
    for role, figures in roles.items():
        lines.append(
            f"| `{role}` | {figures['messages']:,} | {figures['tokens']:,} | "
            f"{figures['token_share']:.1%} | {figures['trained_tokens']:,} |"
        )
    return lines


def _run(run: dict[str, Any]) -> list[str]:
    rates = run["duplicate_rate"]
    lines = [
        f"- records read: {run['records_read']:,}, quarantined: {run['records_quarantined']:,}",
        f"- threads: {run['threads']:,}; exact duplicates {rates['exact']:.2%}, near "
        f"{rates['near']:.2%}",
        f"- truncated to fit max_tokens: {run['truncated']:,} threads, "
        f"{run['tokens_truncated']:,} tokens cut",
    ]
    tokens = run["tokens_dropped"]
    for reason, count in most_first(run["dropped"]):
        lost = f" ({tokens[reason]:,} tokens)" if reason in tokens else ""
        lines.append(f"- dropped `{reason}`: {count:,} threads{lost}")
    for key, count in most_first(run.get("tagged") or {}):
        lines.append(f"- tagged `{key}`: {count:,}")
    packing = run.get("packing")
    if packing:
        lines.append(
            f"- packed: {packing['threads']:,} threads into {packing['sequences']:,} rows of "
            f"{packing['seq_len']:,} tokens; fill {packing['fill']:.2%}, padding "
            f"{packing['padding']:,} tokens"
        )
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
    return lines
