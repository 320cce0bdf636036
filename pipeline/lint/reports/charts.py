"""The HTML report's charts: the dataset profile's counters as bar charts, drawn as inline
SVG by plot.py in the page's pixels, so the same counts give the same bytes and no
plotting library is loaded (matplotlib cost the report ~2 s to import and draw). Each
chart returns None when there is nothing to draw."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from pipeline.accounting import most_first
from pipeline.lint.profile import LENGTH_BUCKETS
from pipeline.lint.reports.plot import Bar, Chart, Note, columns, rows, rows_height

ERROR_COLOR = "#c9372c"
WARNING_COLOR = "#e2a32b"
ENABLED_COLOR = "#9dbbe9"
USED_COLOR = "#1f5fbf"
BAR_COLOR = "#3d6fb6"
ROLE_ORDER: tuple[str, ...] = ("platform", "developer", "user", "assistant", "context")
ROLE_COLORS: dict[str, str] = {
    "platform": "#7048c8",
    "developer": "#1f6fd1",
    "user": "#23915f",
    "assistant": "#d9701e",
    "context": "#6b7785",
}
OTHER_ROLE_COLOR = "#a8a8a8"
RANGE = "\u2013"
"""The en dash of range labels ("16\u201363")."""
TOP_FORMATS = 12
TOP_CAPABILITIES = 15
LABEL_CHARS = 42
FULL_WIDTH = 982.0
HALF_WIDTH = 476.0
"""Chart widths in CSS pixels: a full-width chart box and one of a two-column row, inside
the page's 1000px column, so text is drawn at its size when the page is that wide."""
HISTOGRAM_HEIGHT = 290.0
"""Height of the messages and content-length charts, which share a row."""
LIST_HEIGHT = 370.0
"""Height of the roles and formats charts, which share a row."""
RULE_PITCH = 26.0
CAPABILITY_PITCH = 34.0
"""Pixels between the rows of the findings and the capabilities charts."""
MIN_ROWS = 6
"""Bar slots a ranked list keeps, so a short list does not draw a few fat bars."""
LOG_RATIO = 50
"""Histograms switch to a log scale when the largest bin is this many times the smallest."""
THIN_LABELS = 16
"""A histogram with more bins than this labels every other one."""


def _short(label: str) -> str:
    """A tick label cut to fit the axis."""
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def findings_by_rule(counts: Sequence[tuple[str, int, int]]) -> str | None:
    """Horizontal stacked bars: errors and warnings per rule; `counts` holds
    (label, errors, warnings), most findings first."""
    if not counts:
        return None
    bars = []
    notes = []
    for slot, (_, errors, warnings) in enumerate(counts):
        bars.append(Bar(slot, errors, ERROR_COLOR))
        bars.append(Bar(slot, warnings, WARNING_COLOR, start=errors))
        notes.append(Note(slot, errors + warnings, f"{errors + warnings:,}"))
    chart = Chart(
        "Findings by rule",
        FULL_WIDTH,
        [_short(label) for label, _, _ in counts],
        bars,
        "findings",
        legend=[("errors", ERROR_COLOR), ("warnings", WARNING_COLOR)],
        notes=notes,
    )
    return rows(chart, len(counts), rows_height(len(counts), RULE_PITCH))


def _thread_length_bins(lengths: Mapping[int, int]) -> list[tuple[str, int]]:
    """(label, threads) bins: one per message count up to 30, else powers of two."""
    top = max(lengths)
    if top <= 30:
        low = min(lengths)
        return [(str(n), lengths.get(n, 0)) for n in range(low, top + 1)]
    bins: Counter[tuple[int, int]] = Counter()
    for count, threads in lengths.items():
        if count <= 2:
            bins[(count, count)] += threads
            continue
        upper = 1 << (count - 1).bit_length()
        bins[(upper // 2 + 1, upper)] += threads
    return [
        (str(low) if low == high else f"{low}{RANGE}{high}", bins[(low, high)])
        for low, high in sorted(bins)
    ]


def messages_per_thread(lengths: Mapping[int, int]) -> str | None:
    """Histogram of thread lengths (messages per thread), on a log scale when the bins span
    LOG_RATIO or more."""
    if not lengths:
        return None
    bins = _thread_length_bins(lengths)
    counts = [n for _, n in bins if n]
    log = max(counts) >= LOG_RATIO * min(counts)
    chart = Chart(
        "Messages per thread",
        HALF_WIDTH,
        [label for label, _ in bins],
        [Bar(slot, n, BAR_COLOR, thickness=0.8) for slot, (_, n) in enumerate(bins)],
        "threads (log scale)" if log else "threads",
        slot_label="messages in the thread",
    )
    every = 2 if len(bins) > THIN_LABELS else 1
    return columns(chart, HISTOGRAM_HEIGHT, log=log, label_every=every)


def _size(value: int) -> str:
    """A character count for a bucket label: 1K = 1024."""
    return f"{value // 1024}K" if value >= 1024 and value % 1024 == 0 else str(value)


def length_bucket_labels() -> list[str]:
    """Labels of the content-length buckets, from "<16" to "≥64K"."""
    labels = []
    for number, low in enumerate(LENGTH_BUCKETS):
        if number + 1 == len(LENGTH_BUCKETS):
            labels.append(f"≥{_size(low)}")
            continue
        high = LENGTH_BUCKETS[number + 1]
        upper = _size(high) if high > 1024 else str(high - 1)
        labels.append(f"<{_size(high)}" if low == 0 else f"{_size(low)}{RANGE}{upper}")
    return labels


def _roles_in_order(roles: Sequence[str]) -> list[str]:
    """The spec's roles first, in the spec's order, then any others by name."""
    known = [r for r in ROLE_ORDER if r in roles]
    return known + sorted(r for r in roles if r not in ROLE_ORDER)


def content_length(by_role: Mapping[str, Mapping[int, int]]) -> str | None:
    """Grouped bars: the share of each role's messages in each content-length bucket."""
    roles = _roles_in_order([r for r, buckets in by_role.items() if sum(buckets.values())])
    if not roles:
        return None
    width = 0.8 / len(roles)
    bars = []
    legend = []
    for number, role in enumerate(roles):
        buckets = by_role[role]
        total = sum(buckets.values())
        color = ROLE_COLORS.get(role, OTHER_ROLE_COLOR)
        offset = width * (number + 0.5) - 0.4
        for slot, low in enumerate(LENGTH_BUCKETS):
            share = 100 * buckets.get(low, 0) / total
            bars.append(Bar(slot, share, color, offset=offset, thickness=width))
        legend.append((f"{role} ({total:,})", color))
    chart = Chart(
        "Content length by role",
        HALF_WIDTH,
        length_bucket_labels(),
        bars,
        "% of the role's messages",
        slot_label="content length (characters, K = 1024)",
        legend=legend,
    )
    return columns(chart, HISTOGRAM_HEIGHT)


def role_distribution(roles: Mapping[str, int]) -> str | None:
    """Bars: messages per role, in the spec's role order, each in its role's colour."""
    order = _roles_in_order([r for r, n in roles.items() if n])
    if not order:
        return None
    chart = Chart(
        "Messages by role",
        HALF_WIDTH,
        order,
        [Bar(slot, roles[r], ROLE_COLORS.get(r, OTHER_ROLE_COLOR)) for slot, r in enumerate(order)],
        "messages",
        notes=[Note(slot, roles[r], f"{roles[r]:,}") for slot, r in enumerate(order)],
    )
    return columns(chart, LIST_HEIGHT)


def _top(counts: Mapping[str, int], limit: int) -> list[tuple[str, int]]:
    """The `limit` largest counts (ties by name), the rest summed as "other"."""
    ranked = most_first({name: n for name, n in counts.items() if n})
    if len(ranked) <= limit:
        return ranked
    rest = ranked[limit - 1 :]
    return [*ranked[: limit - 1], (f"other ({len(rest):,} formats)", sum(n for _, n in rest))]


def format_distribution(formats: Mapping[str, int]) -> str | None:
    """Horizontal bars: assistant messages per format, the top 12 with the rest as other."""
    ranked = _top(formats, TOP_FORMATS)
    if not ranked:
        return None
    color = ROLE_COLORS["assistant"]
    chart = Chart(
        "Assistant formats",
        HALF_WIDTH,
        [_short(name) for name, _ in ranked],
        [Bar(slot, n, color) for slot, (_, n) in enumerate(ranked)],
        "assistant messages",
        notes=[Note(slot, n, f"{n:,}") for slot, (_, n) in enumerate(ranked)],
    )
    return rows(chart, max(len(ranked), MIN_ROWS), LIST_HEIGHT)


def capability_usage(enabled: Mapping[str, int], used: Mapping[str, int]) -> str | None:
    """Grouped horizontal bars: threads enabling and threads using each capability, for
    the 15 capabilities enabled in most threads."""
    names = sorted(
        {n for n, c in enabled.items() if c} | {n for n, c in used.items() if c},
        key=lambda n: (-enabled.get(n, 0), -used.get(n, 0), n),
    )
    if not names:
        return None
    shown = names[:TOP_CAPABILITIES]
    bars = []
    notes = []
    for slot, name in enumerate(shown):
        enabling, using = enabled.get(name, 0), used.get(name, 0)
        bars.append(Bar(slot, enabling, ENABLED_COLOR, offset=-0.19, thickness=0.38))
        bars.append(Bar(slot, using, USED_COLOR, offset=0.19, thickness=0.38))
        text = (
            f"used in {using:,} of {enabling:,}"
            if enabling
            else f"used in {using:,}, never enabled"
        )
        notes.append(Note(slot, max(enabling, using), text))
    more = f" (top {len(shown)} of {len(names):,})" if len(names) > len(shown) else ""
    chart = Chart(
        f"Capabilities: threads enabling vs using{more}",
        FULL_WIDTH,
        [_short(name) for name in shown],
        bars,
        "threads",
        legend=[("enabled", ENABLED_COLOR), ("used", USED_COLOR)],
        notes=notes,
    )
    return rows(chart, len(shown), rows_height(len(shown), CAPABILITY_PITCH))
