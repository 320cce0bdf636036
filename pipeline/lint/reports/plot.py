"""Bar charts laid out in the page's pixels and drawn with svg.py: a title with its legend,
bars in rows (`rows`, the value axis along the bottom) or columns (`columns`, the value
axis on the left, linear or logarithmic), labels, notes past the bars' ends, and a light
grid at round values."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.lint.reports.svg import Drawing, text_width

TEXT_COLOR = "#1f2933"
GRID_COLOR = "#d9dee5"
AXIS_COLOR = "#aab4c0"
PAD = 12.0
TITLE_SIZE = 15.0
LABEL_SIZE = 12.0
SMALL_SIZE = 11.0
MIN_TICK_SIZE = 8.0
"""Font sizes: the title, labels of rows and axes, ticks, notes and legend entries (column
labels shrink down to MIN_TICK_SIZE to fit their column)."""
HEAD_ROOM = PAD + TITLE_SIZE + 14
"""From the top to the plot, when the legend sits beside the title."""
AXIS_ROOM = 36 + PAD
"""From the plot's bottom to the chart's: tick labels, then the axis label."""
SWATCH = 10.0
LEGEND_GAP = 16.0
LEGEND_LINE = 18.0
MOST_TICKS = 6
TICK_SPACING = 16.0
"""At most MOST_TICKS steps on a value axis, and at least this many pixels between ticks
beyond a tick label's width."""


@dataclass(frozen=True, slots=True)
class Bar:
    """A bar in slot `slot` (a row or a column, counted from the top or the left), `offset`
    slots from the slot's centre and `thickness` slots thick, from `start` to `start + value`."""

    slot: int
    value: float
    color: str
    start: float = 0.0
    offset: float = 0.0
    thickness: float = 0.7


@dataclass(frozen=True, slots=True)
class Note:
    """A text just past a bar's end, at `value` on the value axis."""

    slot: int
    value: float
    text: str


@dataclass(frozen=True, slots=True)
class Chart:
    """What a chart shows: one label per slot, the bars, and the texts around them."""

    title: str
    width: float
    labels: Sequence[str]
    bars: Sequence[Bar]
    value_label: str
    slot_label: str = ""
    legend: Sequence[tuple[str, str]] = ()
    """(label, colour) entries."""
    notes: Sequence[Note] = ()


@dataclass(frozen=True, slots=True)
class Scale:
    """Values to pixels along one axis: `low` at pixel `start`, `high` at `end`; on a log
    scale values below `low` sit at `low`."""

    low: float
    high: float
    start: float
    end: float
    log: bool = False

    def __call__(self, value: float) -> float:
        low, high = self.low, self.high
        if self.log:
            low, high, value = math.log10(low), math.log10(high), math.log10(max(value, low))
        return self.start + (self.end - self.start) * (value - low) / (high - low)


def linear_ticks(high: float, length: float, label: float) -> list[int]:
    """0 and the multiples of a round step (1, 2 or 5 times a power of ten) up to `high`:
    at most MOST_TICKS steps, and fewer when `length` pixels cannot space labels `label`
    pixels long."""
    most = min(MOST_TICKS, max(1, int(length / (label + TICK_SPACING))))
    magnitude = 1
    while True:
        for factor in (1, 2, 5):
            step = factor * magnitude
            if high <= step * most:
                return list(range(0, int(high) + 1, step))
        magnitude *= 10


def log_ticks(low: float, high: float) -> list[int]:
    """The powers of ten from `low` to `high`."""
    return [10**power for power in range(math.ceil(math.log10(low)), int(math.log10(high)) + 1)]


def rows(chart: Chart, slots: int, height: float) -> str:
    """Horizontal bars: a labelled row per slot from the top (`slots` rows share the plot's
    height, so a short list keeps thin bars), the value axis along the bottom."""
    drawing = Drawing(chart.width, chart.title)
    top = _heading(drawing, chart.title, chart.legend)
    bottom = height - AXIS_ROOM
    pitch = (bottom - top) / slots
    high = max(bar.start + bar.value for bar in chart.bars)
    widest = text_width(f"{high:,.0f}", SMALL_SIZE)
    left = PAD + max(text_width(label, LABEL_SIZE) for label in chart.labels) + 8
    past_end = [text_width(note.text, SMALL_SIZE) + 6 for note in chart.notes]
    right = chart.width - PAD - max([*past_end, widest / 2])
    ticks = linear_ticks(high, right - left, widest)
    scale = Scale(0, high, left, right)
    for tick in ticks:
        drawing.line(scale(tick), top, scale(tick), bottom, GRID_COLOR)
        drawing.text(scale(tick), bottom + 16, f"{tick:,}", size=SMALL_SIZE, anchor="middle")
    drawing.line(left, top, left, bottom, AXIS_COLOR)
    for slot, label in enumerate(chart.labels):
        centre = top + (slot + 0.5) * pitch
        drawing.text(left - 8, _middle(centre, LABEL_SIZE), label, size=LABEL_SIZE, anchor="end")
    for bar in chart.bars:
        centre = top + (bar.slot + 0.5 + bar.offset) * pitch
        across = bar.thickness * pitch
        begin, end = scale(bar.start), scale(bar.start + bar.value)
        drawing.rect(begin, centre - across / 2, end - begin, across, bar.color)
    for note in chart.notes:
        centre = top + (note.slot + 0.5) * pitch
        drawing.text(scale(note.value) + 5, _middle(centre, SMALL_SIZE), note.text, size=SMALL_SIZE)
    drawing.text(
        (left + right) / 2, bottom + 36, chart.value_label, size=LABEL_SIZE, anchor="middle"
    )
    drawing.height = height
    return drawing.to_svg(TEXT_COLOR)


def rows_height(slots: int, pitch: float) -> float:
    """The height of a `rows` chart whose rows are `pitch` pixels apart."""
    return HEAD_ROOM + slots * pitch + AXIS_ROOM


def columns(chart: Chart, height: float, *, log: bool = False, label_every: int = 1) -> str:
    """Vertical bars: a column per label from the left (every `label_every`-th labelled),
    the value axis on the left, logarithmic when `log`."""
    drawing = Drawing(chart.width, chart.title)
    top = _heading(drawing, chart.title, chart.legend) + (14 if chart.notes else 0)
    bottom = height - PAD - (38 if chart.slot_label else 18)
    scale, ticks = _value_axis([bar.start + bar.value for bar in chart.bars], bottom, top, log)
    tick_labels = [f"{tick:,}" for tick in ticks]
    left = PAD + LABEL_SIZE + 12 + max(text_width(label, SMALL_SIZE) for label in tick_labels)
    right = chart.width - PAD
    for tick, label in zip(ticks, tick_labels, strict=True):
        y = scale(tick)
        drawing.line(left, y, right, y, GRID_COLOR)
        drawing.text(left - 6, _middle(y, SMALL_SIZE), label, size=SMALL_SIZE, anchor="end")
    drawing.line(left, bottom, right, bottom, AXIS_COLOR)
    width = (right - left) / len(chart.labels)
    _column_labels(drawing, chart.labels[::label_every], left, width, label_every, bottom)
    for bar in chart.bars:
        centre = left + (bar.slot + 0.5 + bar.offset) * width
        across = bar.thickness * width
        begin, end = scale(bar.start), scale(bar.start + bar.value)
        drawing.rect(centre - across / 2, end, across, begin - end, bar.color)
    for note in chart.notes:
        x = left + (note.slot + 0.5) * width
        drawing.text(x, scale(note.value) - 5, note.text, size=SMALL_SIZE, anchor="middle")
    middle = (top + bottom) / 2
    drawing.text(
        PAD + LABEL_SIZE, middle, chart.value_label, size=LABEL_SIZE, anchor="middle", upright=False
    )
    if chart.slot_label:
        drawing.text(
            (left + right) / 2, height - PAD, chart.slot_label, size=LABEL_SIZE, anchor="middle"
        )
    drawing.height = height
    return drawing.to_svg(TEXT_COLOR)


def _value_axis(
    values: Sequence[float], bottom: float, top: float, log: bool
) -> tuple[Scale, list[int]]:
    """The scale and ticks of a column chart's value axis: from 0 to the largest value, or
    on a log scale from half the decade below the smallest (so it shows) to past the largest."""
    high = max(values)
    if not log:
        return Scale(0, high, bottom, top), linear_ticks(high, bottom - top, SMALL_SIZE)
    low = 10 ** math.floor(math.log10(min(v for v in values if v > 0))) / 2
    high = high * 1.15
    return Scale(low, high, bottom, top, log=True), log_ticks(low, high)


def _column_labels(
    drawing: Drawing, labels: Sequence[str], left: float, width: float, every: int, bottom: float
) -> None:
    """The labels under every `every`-th column, shrunk (to MIN_TICK_SIZE) to fit."""
    room = width * every * 0.9
    widest = max(text_width(label, 1) for label in labels)
    size = min(SMALL_SIZE, max(MIN_TICK_SIZE, room / widest))
    for number, label in enumerate(labels):
        x = left + (number * every + 0.5) * width
        drawing.text(x, bottom + 4 + size, label, size=size, anchor="middle")


def _heading(drawing: Drawing, title: str, legend: Sequence[tuple[str, str]]) -> float:
    """The title, and the legend beside it when it fits, else in rows under it; returns
    where the plot may start."""
    baseline = PAD + TITLE_SIZE
    drawing.text(PAD, baseline, title, size=TITLE_SIZE, bold=True)
    entries = [
        (label, color, SWATCH + 5 + text_width(label, SMALL_SIZE)) for label, color in legend
    ]
    if not entries:
        return HEAD_ROOM
    total = sum(entry[2] for entry in entries) + LEGEND_GAP * (len(entries) - 1)
    room = drawing.width - 2 * PAD
    if text_width(title, TITLE_SIZE, bold=True) + 24 + total <= room:
        _legend_line(drawing, entries, drawing.width - PAD - total, baseline - 1)
        return HEAD_ROOM
    lines = _flow(entries, room)
    for number, line in enumerate(lines, 1):
        _legend_line(drawing, line, PAD, baseline + number * LEGEND_LINE)
    return HEAD_ROOM + len(lines) * LEGEND_LINE


def _flow(entries: list[tuple[str, str, float]], room: float) -> list[list[tuple[str, str, float]]]:
    """Legend entries in lines no wider than `room`."""
    lines: list[list[tuple[str, str, float]]] = [[]]
    used = 0.0
    for entry in entries:
        if lines[-1] and used + LEGEND_GAP + entry[2] > room:
            lines.append([])
            used = 0.0
        used += (LEGEND_GAP if lines[-1] else 0.0) + entry[2]
        lines[-1].append(entry)
    return lines


def _legend_line(
    drawing: Drawing, entries: list[tuple[str, str, float]], x: float, baseline: float
) -> None:
    """A colour swatch and a label per entry, left to right from `x`."""
    for label, color, width in entries:
        drawing.rect(x, baseline - SWATCH + 1, SWATCH, SWATCH, color)
        drawing.text(x + SWATCH + 5, baseline, label, size=SMALL_SIZE)
        x += width + LEGEND_GAP


def _middle(centre: float, size: float) -> float:
    """The baseline that centres a line of text of `size` on `centre`."""
    return centre + 0.35 * size
