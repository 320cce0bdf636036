"""A small SVG writer for the HTML report's charts: rectangles, lines and text in painting
order, coordinates rounded to a tenth, text escaped, no ids (several charts share a page)
and no metadata, so the same chart gives the same bytes. No font engine is loaded: text
widths are estimated, generously, to size the gutters labels sit in."""

from __future__ import annotations

from html import escape

FONT = "'DejaVu Sans', 'Liberation Sans', Arial, sans-serif"
"""The charts' font stack; `text_width` is an upper estimate for these fonts."""
NARROW = frozenset(" !'(),./:;I[]`fijlrt{|}")
WIDE = frozenset("%@MWmw")
"""Characters well below and well above the usual advance width."""


def text_width(text: str, size: float, *, bold: bool = False) -> float:
    """About how wide `text` is at `size` (an upper estimate, so a gutter sized by it fits)."""
    ems = sum(
        0.36 if c in NARROW else 0.95 if c in WIDE else 0.72 if c.isupper() else 0.63 for c in text
    )
    return ems * size * (1.1 if bold else 1.0)


def number(value: float) -> str:
    """A coordinate to one decimal, without a trailing `.0` or a negative zero."""
    text = f"{value:.1f}".removesuffix(".0")
    return "0" if text == "-0" else text


class Drawing:
    """An SVG image being drawn: its elements in painting order, its size set when done."""

    def __init__(self, width: float, label: str) -> None:
        self.width = width
        self.height = 0.0
        self.label = label
        self.parts: list[str] = []

    def rect(self, x: float, y: float, width: float, height: float, fill: str) -> None:
        """A filled rectangle (nothing when it has no area)."""
        if width > 0 and height > 0:
            self.parts.append(
                f'<rect x="{number(x)}" y="{number(y)}" width="{number(width)}" '
                f'height="{number(height)}" fill="{fill}"/>'
            )

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str) -> None:
        """A one-unit line."""
        self.parts.append(
            f'<line x1="{number(x1)}" y1="{number(y1)}" x2="{number(x2)}" y2="{number(y2)}" '
            f'stroke="{stroke}"/>'
        )

    def text(
        self,
        x: float,
        y: float,
        content: str,
        *,
        size: float,
        anchor: str = "start",
        bold: bool = False,
        upright: bool = True,
    ) -> None:
        """`content` with its baseline at `y`, anchored at `x` (start, middle or end);
        `upright=False` turns it to read bottom to top around its anchor."""
        attributes = [f'x="{number(x)}"', f'y="{number(y)}"', f'font-size="{number(size)}"']
        if anchor != "start":
            attributes.append(f'text-anchor="{anchor}"')
        if bold:
            attributes.append('font-weight="bold"')
        if not upright:
            attributes.append(f'transform="rotate(-90 {number(x)} {number(y)})"')
        self.parts.append(f"<text {' '.join(attributes)}>{escape(content)}</text>")

    def to_svg(self, color: str) -> str:
        """The inline `<svg>` element, sized by its viewBox (CSS gives the width)."""
        head = (
            f'<svg class="chart" role="img" aria-label="{escape(self.label)}" '
            f'xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {number(self.width)} '
            f'{number(self.height)}" font-family="{FONT}" fill="{color}" '
            'shape-rendering="crispEdges">'
        )
        return "\n".join([head, f"<title>{escape(self.label)}</title>", *self.parts, "</svg>"])
