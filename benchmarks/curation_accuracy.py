"""The curation stages' error rates on the labelled sets in the repository
(tests/data/curation/<stage>/, each with its PROVENANCE.txt): per PII kind recall and
precision and partial redactions, per language accuracy and code threads dropped, per
quality rule the share of sound threads flagged and the recall on planted defects, per
unknown shape whether the suggested mapping read the answer right.

Run from the repository root:

    python benchmarks/curation_accuracy.py            # every stage with a labelled set
    python benchmarks/curation_accuracy.py pii quality

The figures come from the same functions the tests hold floors on
(tests/curation_accuracy_<stage>.py): the table is what the suite checks, printed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from harness.table import print_aligned
from harness.trees import headline, measured_tree

STAGES = ("pii", "language", "quality", "mapping")
"""The stages with a labelled set, in the order a run meets them."""


def stage_figures(stage: str) -> list[dict[str, Any]] | None:
    """The rows `tests/curation_accuracy_<stage>.py` computes; None when it is missing."""
    tree = str(measured_tree())  # the tests of the tree measured
    if tree not in sys.path:
        sys.path.insert(0, tree)
    try:
        module = importlib.import_module(f"tests.curation_accuracy_{stage}")
    except ModuleNotFoundError:
        return None
    rows: list[dict[str, Any]] = module.figures()
    return rows


def cell(row: dict[str, Any]) -> str:
    """A figure as a reader wants it: shares as percentages, counts as they are."""
    value = row["value"]
    if row["measure"] in ("partial", "code_dropped") or not isinstance(value, float):
        return f"{value:,}" if isinstance(value, int) else f"{value:g}"
    return f"{value:.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stages", nargs="*", metavar="STAGE", help=f"of {', '.join(STAGES)}")
    stages = parser.parse_args().stages or STAGES
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        parser.error(f"no labelled set for {', '.join(unknown)}: choose from {', '.join(STAGES)}")
    lines = [["stage", "name", "measure", "value", "of"]]
    found: dict[str, float] = {}
    for stage in stages:
        rows = stage_figures(stage)
        if rows is None:
            print(f"{stage}: no labelled set (tests/curation_accuracy_{stage}.py)", file=sys.stderr)
            continue
        lines += [
            [row["stage"], str(row["name"]), row["measure"], cell(row), f"{row['count']:,}"]
            for row in rows
        ]
        found |= {
            f"{row['stage']} {row['name']} {row['measure']}": row["value"]
            for row in rows
            if isinstance(row["value"], float)
        }
    print_aligned(lines)
    headline(higher=found)


if __name__ == "__main__":
    main()
