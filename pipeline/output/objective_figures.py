"""The figures of an objective's rows (pairs, labelled completions, prompts) as lines of
text, for `mms stats` and the stats page: each part's length, and for pairs the share
whose chosen side is the longer, pointed out when far from half."""

from __future__ import annotations

from typing import Any

from pipeline.objectives import OBJECTIVE_PARTS

LENGTH_BIAS_MARGIN = 0.15
LENGTH_BIAS_NOTE = " (far from half: a model may learn length for quality)"
NOUNS = {"preference": "pair", "unpaired_preference": "completion", "prompt": "prompt"}


def objective_lines(found: dict[str, Any]) -> list[str]:
    """The figures as the lines of `mms stats`' text output."""
    lines = []
    for part in OBJECTIVE_PARTS[found["objective"]]:
        figures = found[f"{part}_tokens"]
        percentiles = ", ".join(
            f"{key.removeprefix('length_')} {value:,}"
            for key, value in figures.items()
            if key.startswith("length_")
        )
        lines.append(f"{part} tokens: mean {figures['mean']:g}, {percentiles}")
    if "chosen_longer_share" in found:
        longer = found["chosen_longer_share"]
        bias = LENGTH_BIAS_NOTE if abs(longer - 0.5) > LENGTH_BIAS_MARGIN else ""
        lines.append(
            f"chosen side longer in {longer:.1%} of pairs, as long in "
            f"{found['equal_length_share']:.1%}{bias}"
        )
    if "desirable_share" in found:
        lines.append(f"desirable: {found['desirable_share']:.1%}")
    if "with_reference_share" in found:
        lines.append(f"with a reference for a reward function: {found['with_reference_share']:.1%}")
    return lines
