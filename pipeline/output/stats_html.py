"""`mms stats` as one self-contained HTML page (inline CSS and SVG, nothing fetched, same
figures same bytes): what a curator checks before training, drawn in the lint report's
style, showing whatever subset of the figures the output has and saying what is missing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from jinja2 import Template
from markupsafe import Markup

from pipeline.accounting import most_first
from pipeline.lint.reports import charts
from pipeline.lint.reports.page import page_template
from pipeline.output import stats_charts
from pipeline.output.objective_figures import NOUNS, objective_lines

TEMPLATE = "stats.html.j2"
MISSING = "—"
"""A figure these shards or this run do not have."""
NO_VALUE = "-"
"""The `--by` group of threads whose meta lacks the field."""
NOT_TOKENIZED = "Not tokenized: the shards hold no tokens, so no lengths or tokens per role."
NO_MESSAGES = "Packed rows keep no messages, so tokens per role and capabilities are not counted."
NO_ROLES = "Tokens per role need the output's tokenizer/mms_special_tokens.json."
NO_RUN = "needs the run's manifest.json"

Format = Callable[[Any], str]


def _count(value: Any) -> str:
    return MISSING if value is None else f"{value:,}"


def _mean(value: Any) -> str:
    return MISSING if value is None else f"{value:,.2f}"


def _share(value: Any) -> str:
    return MISSING if value is None else f"{value:.1%}"


FIGURES: tuple[tuple[str, str, Format], ...] = (
    ("threads", "threads", _count),
    ("rows", "packed rows", _count),
    ("messages", "messages", _count),
    ("turns_mean", "user turns per thread, mean", _mean),
    ("turns_max", "user turns per thread, most", _count),
    ("tool_calls", "tool calls", _count),
    ("threads_with_tool_calls", "threads with tool calls", _count),
    ("tokens", "tokens", _count),
    ("trained_tokens", "trained tokens", _count),
    ("trained_fraction", "trained share", _share),
    ("length_p50", "length p50 (tokens)", _count),
    ("length_p90", "length p90 (tokens)", _count),
    ("length_p99", "length p99 (tokens)", _count),
    ("length_max", "length max (tokens)", _count),
)
"""The rows of the splits table, and the columns of a `--by` table, when the shards have them."""
GROUP_FIGURES = (
    "threads",
    "rows",
    "messages",
    "tool_calls",
    "tokens",
    "trained_fraction",
    "length_p50",
    "length_p90",
    "length_max",
)
SOURCE_COLUMNS = {
    "records_read": "records read",
    "records_quarantined": "quarantined",
    "threads": "threads",
    "threads_dropped": "threads dropped",
    "rows_written": "threads written",
    "weighted_copies": "weighted copies",
    "tokens": "tokens",
}
"""The per-source table's columns (weighted copies when some input has them, tokens when
the output is tokenized)."""


def write_stats_html(stats: dict[str, Any], out: TextIO) -> None:
    """Write `stats` (`mms stats --output-format json`'s figures) to `out` as a
    self-contained HTML page (same figures, same bytes)."""
    out.writelines(_template().generate(page=_page(stats)))


def stats_html(stats: dict[str, Any]) -> str:
    """The page of `write_stats_html`, as text."""
    return "".join(_template().generate(page=_page(stats)))


def _template() -> Template:
    """The page template, compiled once per process."""
    return page_template(Path(__file__).parent, TEMPLATE)


def _page(stats: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the template shows, as plain values."""
    splits: Mapping[str, Mapping[str, Any]] = stats.get("splits") or {}
    run = stats.get("run")
    return {
        "splits": list(splits),
        "has_run": run is not None,
        "cards": _cards(splits, run),
        "table": _table(splits),
        "packed": any("rows" in figures for figures in splits.values()),
        "sections": [_split(n, name, figures) for n, (name, figures) in enumerate(splits.items())],
        "run": _run(run, splits) if run is not None else None,
    }


def _total(splits: Mapping[str, Mapping[str, Any]], key: str) -> int | None:
    """`key` summed over the splits; None unless every split has it."""
    if not splits or any(key not in figures for figures in splits.values()):
        return None
    total: int = sum(figures[key] for figures in splits.values())
    return total


def _plural(value: Any, noun: str) -> str:
    return f"{_count(value)} {noun}{'' if value == 1 else 's'}"


def _percent_of(part: int, whole: int) -> str:
    return f"{part / whole:.1%} of {whole:,}" if whole else ""


def _card(label: str, value: str, note: str = "", tone: str = "") -> dict[str, str]:
    return {"label": label, "value": value, "note": note, "tone": tone}


def _unknown(label: str, why: str) -> dict[str, str]:
    return _card(label, MISSING, why, "na")


def _cards(
    splits: Mapping[str, Mapping[str, Any]], run: Mapping[str, Any] | None
) -> list[dict[str, str]]:
    """The headline cards (label, value, a note and a tone for the colour), in the order
    the threads went: read, quarantined, written, tokens, dropped, duplicates, truncated."""
    tokens = _total(splits, "tokens")
    reads = _read_cards(run)
    return [
        reads[0],
        reads[1],
        _thread_card(splits),
        *_token_cards(tokens, _total(splits, "trained_tokens")),
        *_loss_cards(run, tokenized=tokens is not None),
    ]


def _read_cards(run: Mapping[str, Any] | None) -> list[dict[str, str]]:
    if run is None:
        return [_unknown("records read", NO_RUN), _unknown("records quarantined", NO_RUN)]
    read = run.get("records_read") or 0
    quarantined = run.get("records_quarantined") or 0
    return [
        _card("records read", _count(read)),
        _card(
            "records quarantined",
            _count(quarantined),
            _percent_of(quarantined, read),
            "warning" if quarantined else "ok",
        ),
    ]


def _thread_card(splits: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    rows = _total(splits, "rows")
    where = f"in {_plural(len(splits), 'split')}"
    if rows is not None:
        where = f"in {rows:,} packed rows"
    return _card("threads", _count(_total(splits, "threads") or 0), where)


def _token_cards(tokens: int | None, trained: int | None) -> list[dict[str, str]]:
    if tokens is None:
        return [_unknown("tokens", "not tokenized"), _unknown("trained share", "not tokenized")]
    share = _share(trained / tokens) if trained is not None and tokens else MISSING
    return [
        _card("tokens", _count(tokens)),
        _card("trained share", share, f"{_count(trained)} trained tokens"),
    ]


def _loss_cards(run: Mapping[str, Any] | None, *, tokenized: bool) -> list[dict[str, str]]:
    """Threads dropped, duplicate rates and tokens truncated."""
    if run is None:
        return [
            _unknown("threads dropped", NO_RUN),
            _unknown("duplicates exact / near", NO_RUN),
            _unknown("tokens truncated", NO_RUN),
        ]
    dropped = sum((run.get("dropped") or {}).values())
    lost = sum((run.get("tokens_dropped") or {}).values())
    note = f"{lost:,} tokens" if lost else _percent_of(dropped, run.get("threads") or 0)
    found = [_card("threads dropped", _count(dropped), note, "warning" if dropped else "ok")]
    rates = run.get("duplicate_rate") or {}
    found.append(
        _card(
            "duplicates exact / near",
            f"{_share(rates.get('exact'))} / {_share(rates.get('near'))}",
            f"of {_count(run.get('threads'))} threads read",
        )
    )
    truncated = run.get("tokens_truncated")
    if not tokenized:
        found.append(_unknown("tokens truncated", "not tokenized"))
        return found
    found.append(
        _card(
            "tokens truncated",
            _count(truncated),
            _plural(run.get("truncated"), "thread") + " cut to fit max_tokens",
            "warning" if truncated else "ok",
        )
    )
    return found


def _table(splits: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The splits table: a row per figure some split has, a cell per split."""
    return [
        {"label": label, "cells": [fmt(figures.get(key)) for figures in splits.values()]}
        for key, label, fmt in FIGURES
        if any(key in figures for figures in splits.values())
    ]


def _chart(
    split: int, key: str, svg: str | None, empty: str, *, wide: bool = False, caption: str = ""
) -> dict[str, Any]:
    return {
        "id": f"chart-{split}-{key}",
        "key": key,
        "svg": Markup(svg) if svg else None,
        "empty": empty,
        "wide": wide,
        "caption": caption,
    }


def _split(number: int, name: str, figures: Mapping[str, Any]) -> dict[str, Any]:
    """One split's charts (a note in place of those its shards cannot have) and its
    `--by` table."""
    if "objective" in figures:  # pairs, completions or prompts: their figures as text
        found = figures["objective"]
        rows = f"{found['rows']:,} {NOUNS[found['objective']]} rows ({found['objective']}). "
        shown = [
            _chart(number, "objective", None, rows + " · ".join(objective_lines(found)), wide=True)
        ]
    elif "rows" in figures:
        shown = [_length_chart(number, figures), _chart(number, "roles", None, NO_MESSAGES)]
    elif "tokens" not in figures:
        shown = [
            _chart(number, "lengths", None, NOT_TOKENIZED, wide=True),
            _capability_chart(number, figures.get("capabilities")),
        ]
    else:
        shown = [
            _length_chart(number, figures),
            _role_chart(number, figures.get("roles")),
            _capability_chart(number, figures.get("capabilities")),
        ]
    return {
        "number": number,
        "name": name,
        "charts": shown,
        "groups": _groups(figures.get("by")),
        "media": _media_rows(figures.get("media")),
        "media_from_kind_columns": bool((figures.get("media") or {}).get("counted_from")),
    }


def _media_rows(media: Mapping[str, Any] | None) -> list[dict[str, Any]] | None:
    """The split's media table: all media, then per kind its total and its roles."""
    if not media:
        return None
    rows = [_media_row("all", None, media)]
    for kind, found in media.get("kinds", {}).items():
        rows.append(_media_row(kind, None, found))
        rows += [_media_row(kind, role, r) for role, r in (found.get("roles") or {}).items()]
    return rows


def _media_row(kind: str, role: str | None, found: Mapping[str, Any]) -> dict[str, Any]:
    """One media table row; `holders` the threads holding one, or the rows (figures
    counted from the kind columns)."""
    return {
        "kind": kind,
        "role": role,
        "media": _count(found.get("media")),
        "holders": _count(found.get("threads", found.get("rows"))),
        "size": media_size(found),
    }


def media_size(found: Mapping[str, Any]) -> str:
    """`12,345 bytes`, with how many media that covers when not all of them."""
    sized, media = found.get("sized", 0), found.get("media", 0)
    if not sized:
        return MISSING
    size = f"{found.get('bytes', 0):,} bytes"
    return size if sized == media else f"{size} ({sized:,} of {media:,})"


def _length_chart(number: int, figures: Mapping[str, Any]) -> dict[str, Any]:
    """The length histogram, its percentiles under it."""
    percentiles = [
        f"{label} {figures[key]:,}"
        for key, label in (
            ("length_p50", "p50"),
            ("length_p90", "p90"),
            ("length_p99", "p99"),
            ("length_max", "max"),
        )
        if figures.get(key) is not None
    ]
    return _chart(
        number,
        "lengths",
        stats_charts.length_histogram(figures.get("length_histogram"), packed="rows" in figures),
        "No lengths: the split holds no rows.",
        caption=" · ".join(percentiles) + " tokens" if percentiles else "",
    )


def _role_chart(number: int, roles: Mapping[str, Any] | None) -> dict[str, Any]:
    why = NO_ROLES if roles is None else "No role has tokens."
    caption = "bos: the tokens before the first message." if roles and "bos" in roles else ""
    return _chart(number, "roles", stats_charts.role_tokens(roles), why, caption=caption)


def _capability_chart(number: int, capabilities: Mapping[str, Any] | None) -> dict[str, Any]:
    if capabilities is None:
        why = "Capabilities were not counted for these shards."
    else:
        why = "No thread enables or uses a format beyond markdown."
    return _chart(
        number,
        "capabilities",
        charts.capability_usage(
            {name: c.get("enabled", 0) for name, c in (capabilities or {}).items()},
            {name: c.get("used", 0) for name, c in (capabilities or {}).items()},
        ),
        why,
        wide=True,
        caption="Enabled: named in an inline code span of a platform or developer message "
        "(formats a thread's settings enable are not in the shards). Used: in an assistant "
        "message's format.",
    )


def _groups(by: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The `--by` table: a row per group, a column per figure some group has."""
    if not by:
        return None
    groups: Sequence[Mapping[str, Any]] = by.get("groups") or []
    formats = {key: (label, fmt) for key, label, fmt in FIGURES}
    shown = [key for key in GROUP_FIGURES if any(key in group for group in groups)]
    return {
        "field": by.get("field", ""),
        "columns": [formats[key][0].removesuffix(" (tokens)") for key in shown],
        "rows": [
            {
                "group": group.get("group", NO_VALUE),
                "none": group.get("group", NO_VALUE) == NO_VALUE,
                "cells": [formats[key][1](group.get(key)) for key in shown],
            }
            for group in groups
        ],
    }


def _run(run: Mapping[str, Any], splits: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """What the run's manifest tells: the accounting, drops, packing and the inputs."""
    tokenized = any("tokens" in figures for figures in splits.values())
    inputs: Sequence[Mapping[str, Any]] = run.get("inputs") or []
    quarantined: Counter[str] = Counter()
    for source in inputs:
        quarantined.update(source.get("quarantined_by") or {})
    tokens_dropped = run.get("tokens_dropped") or {}
    packing = run.get("packing")
    return {
        "facts": _run_facts(run),
        "balance": _balance(run, splits),
        "quarantined": [(r, _count(n)) for r, n in most_first(dict(quarantined))],
        "dropped": [
            (reason, _count(n), _count(tokens_dropped.get(reason)) if tokenized else None)
            for reason, n in most_first(run.get("dropped") or {})
        ],
        "tagged": [(key, _count(n)) for key, n in most_first(run.get("tagged") or {})],
        "tokenized": tokenized,
        "drops_without_tokens": tokenized
        and any(reason not in tokens_dropped for reason in run.get("dropped") or {}),
        "packing": _packing(packing) if packing else None,
        "inputs": _inputs(inputs, tokenized) if inputs else None,
    }


def _run_facts(run: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The accounting panel: reads and duplicates, then truncation and weighted copies."""
    rates = run.get("duplicate_rate") or {}
    return [
        ("records read", _count(run.get("records_read"))),
        ("records quarantined", _count(run.get("records_quarantined"))),
        ("threads read", _count(run.get("threads"))),
        ("exact duplicates", _share(rates.get("exact"))),
        ("near duplicates", _share(rates.get("near"))),
        ("threads truncated to fit max_tokens", _count(run.get("truncated"))),
        ("tokens truncation cut", _count(run.get("tokens_truncated"))),
        ("weighted copies written", _count(run.get("weighted_copies"))),
    ]


def _balance(run: Mapping[str, Any], splits: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Threads read + weighted copies = threads dropped + threads in the shards."""
    read = run.get("threads") or 0
    copies = run.get("weighted_copies") or 0
    dropped = sum((run.get("dropped") or {}).values())
    written = _total(splits, "threads") or 0
    text = f"{read:,} threads read"
    if copies:
        text += f" + {copies:,} weighted copies"
    text += f" = {dropped:,} dropped + {written:,} in the shards"
    return {"text": text, "ok": read + copies == dropped + written, "known": bool(read)}


def _packing(packing: Mapping[str, Any]) -> dict[str, Any]:
    labels = (
        ("seq_len", "sequence length", _count),
        ("sequences", "packed rows", _count),
        ("threads", "threads packed", _count),
        ("threads_per_sequence", "threads per row", _mean),
        ("tokens", "tokens", _count),
        ("padding", "padding tokens", _count),
        ("fill", "fill", _share),
    )
    return {
        "facts": [(label, fmt(packing[key])) for key, label, fmt in labels if key in packing],
        "svg": Markup(svg) if (svg := stats_charts.packing_fill(packing)) else None,
    }


def _inputs(inputs: Sequence[Mapping[str, Any]], tokenized: bool) -> dict[str, Any]:
    """The per-source accounting: a row per input, and the totals of several."""
    keys = [key for key in SOURCE_COLUMNS if key not in ("weighted_copies", "tokens")]
    if any(source.get("weighted_copies") for source in inputs):
        keys.append("weighted_copies")
    if tokenized and any("tokens" in source for source in inputs):
        keys.append("tokens")
    rows = [_source(source, keys) for source in inputs]
    totals = [_count(sum(source.get(key) or 0 for source in inputs)) for key in keys]
    return {
        "columns": [SOURCE_COLUMNS[key] for key in keys],
        "rows": rows,
        "totals": totals if len(rows) > 1 else None,
    }


def _source(source: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """An input's row: its path and license, why records and threads went, where its rows
    went, and its counts."""
    why = [
        f"{kind}: " + ", ".join(f"{reason} {n:,}" for reason, n in most_first(counts))
        for kind, counts in (
            ("quarantined", source.get("quarantined_by") or {}),
            ("dropped", source.get("dropped_by") or {}),
        )
        if counts
    ]
    written = [f"{split} {n:,}" for split, n in (source.get("written_by_split") or {}).items()]
    return {
        "path": source.get("path", ""),
        "license": source.get("license"),
        "why": why,
        "written": " · ".join(written),
        "cells": [_count(source.get(key)) for key in keys],
    }
