"""The charts of the `mms stats` HTML page (lengths in tokens, tokens per role, packing fill),
drawn as inline SVG with the lint report's plot helpers and colours, so both pages look
alike and the same figures give the same bytes. Each chart returns None when there is
nothing to draw."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.lint.reports.charts import (
    BAR_COLOR,
    ENABLED_COLOR,
    FULL_WIDTH,
    HALF_WIDTH,
    HISTOGRAM_HEIGHT,
    LOG_RATIO,
    RANGE,
    ROLE_ORDER,
    THIN_LABELS,
    USED_COLOR,
)
from pipeline.lint.reports.plot import Bar, Chart, Note, columns, rows, rows_height

TRAINED_COLOR = USED_COLOR
UNTRAINED_COLOR = ENABLED_COLOR
"""Tokens with a label (trained) and without (the lint report's used and enabled blues)."""
PADDING_COLOR = "#c9d1db"
BEFORE_FIRST_MESSAGE = "bos"
"""The `roles` entry of the tokens before the first message."""
PACKING_PITCH = 46.0
"""Pixels of the packing chart's one row."""
MIN_ROLE_ROWS = 4
"""Rows the role chart keeps, so two or three roles do not draw fat bars."""


def _size(value: int) -> str:
    """A token count for a bucket label: 1K = 1024."""
    return f"{value // 1024:,}K" if value >= 1024 and value % 1024 == 0 else f"{value:,}"


def bucket_label(low: int) -> str:
    """The label of the power-of-two bucket from `low`: "0", "1", "2\u20133",
    "512\u20131,023", "1K\u20132K" (1,024 to 2,047 tokens)."""
    if low <= 1:
        return str(low)
    if low >= 1024:
        return f"{_size(low)}{RANGE}{_size(2 * low)}"
    return f"{low:,}{RANGE}{2 * low - 1:,}"


def histogram_buckets(histogram: Mapping[str, int]) -> list[tuple[int, int]]:
    """(lower bound, count) from the smallest bucket to the largest in numeric order, with
    the empty buckets between them (JSON keys sort as text: "128" before "16")."""
    counts = {int(low): n for low, n in histogram.items()}
    positive = sorted(low for low in counts if low > 0)
    lows = set(counts)
    low = positive[0] if positive else 0
    while positive and low < positive[-1]:
        lows.add(low)
        low *= 2
    return [(low, counts.get(low, 0)) for low in sorted(lows)]


def length_histogram(histogram: Mapping[str, int] | None, *, packed: bool) -> str | None:
    """Columns: threads (or packed rows) per power-of-two length bucket, a bar per non-empty
    bucket, on a log scale when the bars span LOG_RATIO or more."""
    buckets = histogram_buckets(histogram or {})
    counts = [n for _, n in buckets if n]
    if not counts:
        return None
    log = max(counts) >= LOG_RATIO * min(counts)
    unit = "rows" if packed else "threads"
    chart = Chart(
        "Packed row length" if packed else "Thread length",
        HALF_WIDTH,
        [bucket_label(low) for low, _ in buckets],
        [Bar(slot, n, BAR_COLOR, thickness=0.8) for slot, (_, n) in enumerate(buckets) if n],
        f"{unit} (log scale)" if log else unit,
        slot_label="tokens (power-of-two buckets, K = 1024)",
        notes=[Note(slot, n, f"{n:,}") for slot, (_, n) in enumerate(buckets) if n],
    )
    every = 2 if len(buckets) > THIN_LABELS else 1
    return columns(chart, HISTOGRAM_HEIGHT, log=log, label_every=every)


def roles_in_order(roles: Mapping[str, Any]) -> list[str]:
    """`bos` first, then the spec's roles in the spec's order, then any others by name."""
    known = [r for r in (BEFORE_FIRST_MESSAGE, *ROLE_ORDER) if r in roles]
    return known + sorted(r for r in roles if r not in known)


def role_tokens(roles: Mapping[str, Mapping[str, Any]] | None) -> str | None:
    """Stacked rows: each role's trained and untrained tokens, noted with its tokens and
    its share of all tokens; roles without tokens are left out."""
    roles = roles or {}
    order = [r for r in roles_in_order(roles) if roles[r].get("tokens")]
    if not order:
        return None
    bars = []
    notes = []
    for slot, role in enumerate(order):
        tokens = roles[role]["tokens"]
        trained = roles[role].get("trained_tokens", 0)
        share = roles[role].get("token_share")
        bars.append(Bar(slot, trained, TRAINED_COLOR))
        bars.append(Bar(slot, tokens - trained, UNTRAINED_COLOR, start=trained))
        text = f"{tokens:,} ({share:.1%})" if share is not None else f"{tokens:,}"
        notes.append(Note(slot, tokens, text))
    chart = Chart(
        "Tokens per role",
        HALF_WIDTH,
        order,
        bars,
        "tokens",
        legend=[("trained", TRAINED_COLOR), ("not trained", UNTRAINED_COLOR)],
        notes=notes,
    )
    return rows(chart, max(len(order), MIN_ROLE_ROWS), HISTOGRAM_HEIGHT)


def packing_fill(packing: Mapping[str, Any] | None) -> str | None:
    """One stacked row: the packed rows' tokens and their padding up to seq_len."""
    if not packing or not packing.get("tokens"):
        return None
    tokens, padding = packing["tokens"], packing.get("padding", 0)
    label = f"{packing.get('sequences', 0):,} rows of {packing.get('seq_len', 0):,}"
    fill = packing.get("fill")
    chart = Chart(
        "Packing: tokens and padding",
        FULL_WIDTH,
        [label],
        [Bar(0, tokens, BAR_COLOR, thickness=0.6), Bar(0, padding, PADDING_COLOR, start=tokens)],
        "tokens",
        legend=[("tokens", BAR_COLOR), ("padding", PADDING_COLOR)],
        notes=[Note(0, tokens + padding, f"fill {fill:.1%}")] if fill is not None else [],
    )
    return rows(chart, 1, rows_height(1, PACKING_PITCH))
