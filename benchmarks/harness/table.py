"""Print benchmark figures as an aligned text table (first column left, others right)."""

from __future__ import annotations

from collections.abc import Sequence


def print_aligned(lines: Sequence[Sequence[str]]) -> None:
    """Print rows of cells, the first row being the header."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    for line in lines:
        cells = [line[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True)
        ]
        print("  ".join(cells))
