"""The HTML report's charts: matplotlib figures (no pyplot, no global state beyond a scoped
rc_context) saved as SVG with a fixed hash salt and no metadata, so the same counts give
the same bytes, ready to inline in a page. Each chart returns None when there is nothing
to draw."""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullFormatter, StrMethodFormatter

from pipeline.lint.profile import LENGTH_BUCKETS

ERROR_COLOR = "#c9372c"
WARNING_COLOR = "#e2a32b"
ENABLED_COLOR = "#9dbbe9"
USED_COLOR = "#1f5fbf"
BAR_COLOR = "#3d6fb6"
TEXT_COLOR = "#1f2933"
GRID_COLOR = "#d9dee5"
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
FULL_WIDTH = 10.0
HALF_WIDTH = 6.0
"""Figure widths in inches: a full-width chart and one of a two-column row (~1000px page)."""
LIST_HEIGHT = 4.6
"""Height of the roles and formats charts, which share a row."""
MIN_ROWS = 6
"""Bar slots a ranked list keeps, so a short list does not draw a few fat bars."""
LOG_RATIO = 50
"""Histograms switch to a log scale when the largest bin is this many times the smallest."""

_STYLE = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial"],
    "font.size": 10,
    "axes.titlesize": 12,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "axes.labelsize": 10,
    "axes.edgecolor": GRID_COLOR,
    "axes.labelcolor": TEXT_COLOR,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "xtick.color": TEXT_COLOR,
    "ytick.color": TEXT_COLOR,
    "text.color": TEXT_COLOR,
    "legend.frameon": False,
}
_NO_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
_TAG = re.compile(r"<[^>]*>")
_ID_REF = re.compile(r'(\bid="|href="#|url\(#)')
_SIZE = re.compile(r'\s(width|height)="[^"]*"')


@contextmanager
def _style(salt: str) -> Iterator[None]:
    """Scoped rcParams: the report's look, and a fixed SVG hash salt for stable ids."""
    with matplotlib.rc_context({**_STYLE, "svg.hashsalt": salt}):
        yield


def _svg(figure: Figure, prefix: str) -> str:
    """The figure as an inline <svg> element: no XML prolog, no metadata, ids prefixed so
    several charts can share one page, and sized by CSS instead of points."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata=_NO_METADATA)
    text = buffer.getvalue()
    text = text[text.index("<svg") :]

    def retag(match: re.Match[str]) -> str:
        return _ID_REF.sub(lambda ref: f"{ref.group(1)}{prefix}-", match.group(0))

    text = _TAG.sub(retag, text)
    return _SIZE.sub("", text, count=2).replace("<svg ", '<svg class="chart" role="img" ', 1)


def _short(label: str) -> str:
    """A tick label cut to fit the axis."""
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def _tidy(axes: Axes, value_axis: str) -> None:
    """Whole-number ticks and a light grid along the value axis, behind the bars."""
    values = axes.xaxis if value_axis == "x" else axes.yaxis
    if values.get_scale() == "linear":
        values.set_major_locator(MaxNLocator(nbins=6, integer=True, steps=[1, 2, 5, 10]))
        values.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    axes.grid(axis=value_axis, color=GRID_COLOR, linewidth=0.8)
    axes.set_axisbelow(True)
    axes.tick_params(which="both", length=0)


def _label_ends(axes: Axes, positions: Sequence[float], totals: Sequence[int]) -> None:
    """Write each horizontal bar's total just past its end."""
    for position, total in zip(positions, totals, strict=True):
        axes.annotate(
            f"{total:,}",
            (total, position),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=9,
        )
    axes.margins(x=0.1)


def _bar_height(rows: int) -> float:
    """Figure height in inches for a horizontal bar chart of `rows` bars."""
    return 1.2 + 0.28 * rows


def findings_by_rule(counts: Sequence[tuple[str, int, int]]) -> str | None:
    """Horizontal stacked bars: errors and warnings per rule; `counts` holds
    (label, errors, warnings), most findings first."""
    if not counts:
        return None
    with _style("findings"):
        figure = Figure(figsize=(FULL_WIDTH, _bar_height(len(counts))), layout="constrained")
        axes = figure.add_subplot()
        positions = list(range(len(counts)))[::-1]
        errors = [c[1] for c in counts]
        warnings = [c[2] for c in counts]
        axes.barh(positions, errors, color=ERROR_COLOR, label="errors", height=0.7)
        axes.barh(
            positions, warnings, left=errors, color=WARNING_COLOR, label="warnings", height=0.7
        )
        axes.set_yticks(positions, [_short(c[0]) for c in counts])
        _label_ends(axes, positions, [e + w for e, w in zip(errors, warnings, strict=True)])
        axes.set_xlabel("findings")
        axes.set_title("Findings by rule")
        axes.legend(loc="lower right")
        _tidy(axes, "x")
        return _svg(figure, "findings")


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
    """Histogram of thread lengths (messages per thread)."""
    if not lengths:
        return None
    bins = _thread_length_bins(lengths)
    with _style("messages"):
        figure = Figure(figsize=(HALF_WIDTH, 3.6), layout="constrained")
        axes = figure.add_subplot()
        axes.bar(range(len(bins)), [b[1] for b in bins], color=BAR_COLOR, width=0.8)
        axes.set_xticks(range(len(bins)), [b[0] for b in bins])
        if len(bins) > 16:
            for label in axes.get_xticklabels()[1::2]:
                label.set_visible(False)
        axes.set_xlabel("messages in the thread")
        counts = [b[1] for b in bins if b[1]]
        if max(counts) >= LOG_RATIO * min(counts):
            axes.set_yscale("log")
            axes.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
            axes.yaxis.set_minor_formatter(NullFormatter())
            axes.set_ylabel("threads (log scale)")
        else:
            axes.set_ylabel("threads")
        axes.set_title("Messages per thread")
        _tidy(axes, "y")
        return _svg(figure, "messages")


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
    labels = length_bucket_labels()
    width = 0.8 / len(roles)
    with _style("lengths"):
        figure = Figure(figsize=(HALF_WIDTH, 3.6), layout="constrained")
        axes = figure.add_subplot()
        for number, role in enumerate(roles):
            buckets = by_role[role]
            total = sum(buckets.values())
            shares = [100 * buckets.get(low, 0) / total for low in LENGTH_BUCKETS]
            offsets = [i - 0.4 + width * (number + 0.5) for i in range(len(LENGTH_BUCKETS))]
            axes.bar(
                offsets,
                shares,
                width=width,
                color=ROLE_COLORS.get(role, OTHER_ROLE_COLOR),
                label=f"{role} ({total:,})",
            )
        axes.set_xticks(range(len(labels)), labels, fontsize=8.5)
        axes.set_xlabel("content length (characters, K = 1024)")
        axes.set_ylabel("% of the role's messages")
        axes.set_title("Content length by role")
        axes.legend(fontsize=8.5, loc="upper right")
        _tidy(axes, "y")
        return _svg(figure, "lengths")


def role_distribution(roles: Mapping[str, int]) -> str | None:
    """Bars: messages per role, in the spec's role order, each in its role's colour."""
    order = _roles_in_order([r for r, n in roles.items() if n])
    if not order:
        return None
    with _style("roles"):
        figure = Figure(figsize=(HALF_WIDTH, LIST_HEIGHT), layout="constrained")
        axes = figure.add_subplot()
        counts = [roles[r] for r in order]
        colors = [ROLE_COLORS.get(r, OTHER_ROLE_COLOR) for r in order]
        bars = axes.bar(range(len(order)), counts, color=colors, width=0.7)
        axes.bar_label(bars, [f"{n:,}" for n in counts], padding=3, fontsize=9)
        axes.set_xticks(range(len(order)), order)
        axes.margins(y=0.1)
        axes.set_ylabel("messages")
        axes.set_title("Messages by role")
        _tidy(axes, "y")
        return _svg(figure, "roles")


def _top(counts: Mapping[str, int], limit: int) -> list[tuple[str, int]]:
    """The `limit` largest counts (ties by name), the rest summed as "other"."""
    ranked = sorted(((name, n) for name, n in counts.items() if n), key=lambda c: (-c[1], c[0]))
    if len(ranked) <= limit:
        return ranked
    rest = ranked[limit - 1 :]
    return [*ranked[: limit - 1], (f"other ({len(rest):,} formats)", sum(n for _, n in rest))]


def format_distribution(formats: Mapping[str, int]) -> str | None:
    """Horizontal bars: assistant messages per format, the top 12 with the rest as other."""
    ranked = _top(formats, TOP_FORMATS)
    if not ranked:
        return None
    with _style("formats"):
        figure = Figure(figsize=(HALF_WIDTH, LIST_HEIGHT), layout="constrained")
        axes = figure.add_subplot()
        positions = list(range(len(ranked)))[::-1]
        counts = [n for _, n in ranked]
        axes.barh(positions, counts, color=ROLE_COLORS["assistant"], height=0.7)
        axes.set_yticks(positions, [_short(name) for name, _ in ranked])
        axes.set_ylim(len(ranked) - 0.5 - max(len(ranked), MIN_ROWS), len(ranked) - 0.5)
        _label_ends(axes, positions, counts)
        axes.set_xlabel("assistant messages")
        axes.set_title("Assistant formats")
        _tidy(axes, "x")
        return _svg(figure, "formats")


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
    with _style("capabilities"):
        figure = Figure(figsize=(FULL_WIDTH, 1.2 + 0.34 * len(shown)), layout="constrained")
        axes = figure.add_subplot()
        rows = [float(p) for p in range(len(shown))][::-1]
        on = [enabled.get(n, 0) for n in shown]
        use = [used.get(n, 0) for n in shown]
        axes.barh([r + 0.19 for r in rows], on, height=0.38, color=ENABLED_COLOR, label="enabled")
        axes.barh([r - 0.19 for r in rows], use, height=0.38, color=USED_COLOR, label="used")
        axes.set_yticks(rows, [_short(n) for n in shown])
        for row, enabling, using in zip(rows, on, use, strict=True):
            axes.annotate(
                f"used in {using:,} of {enabling:,}"
                if enabling
                else f"used in {using:,}, never enabled",
                (max(enabling, using), row),
                xytext=(5, 0),
                textcoords="offset points",
                va="center",
                fontsize=8.5,
            )
        axes.margins(x=0.14)
        axes.set_xlabel("threads")
        more = f" (top {len(shown)} of {len(names):,})" if len(names) > len(shown) else ""
        axes.set_title(f"Capabilities: threads enabling vs using{more}")
        axes.legend(loc="lower right")
        _tidy(axes, "x")
        return _svg(figure, "capabilities")
