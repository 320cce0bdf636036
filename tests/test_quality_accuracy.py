"""The quality rules' measured accuracy on the labelled set (tests/curation_accuracy_quality.py)
held to floors a little below the figures measured: together they flag at most 2% of
sound real threads (GSM8K's included), and each finds most of the defects planted for it."""

from __future__ import annotations

import pytest

from tests.curation_accuracy_quality import figures

RECALL_FLOORS = {
    "empty_answer": 0.95,
    "repetition": 0.78,
    "refusal": 0.88,
    "copies_user": 0.84,
    "mojibake": 0.95,
    "cut_off": 0.82,
}
"""Each rule's recall on its planted defects, measured 1.0, 0.82, 0.68, 0.88, 1.0, 0.86."""


@pytest.fixture(scope="module")
def measured() -> dict[tuple[str, str], dict[str, object]]:
    """The figures by rule and measure."""
    return {(row["name"], row["measure"]): row for row in figures()}


def test_the_rules_flag_few_sound_threads(measured):
    assert measured["all", "flagged_sound"]["count"] >= 300
    assert measured["all", "flagged_sound"]["value"] <= 0.02


@pytest.mark.parametrize("rule", sorted(RECALL_FLOORS))
def test_each_rule_finds_its_planted_defects(measured, rule):
    row = measured[rule, "recall"]
    assert row["count"] >= 20
    assert row["value"] >= RECALL_FLOORS[rule]


def test_figures_have_one_shape():
    for row in figures():
        assert set(row) == {"stage", "name", "measure", "value", "count"}
        assert row["stage"] == "quality" and row["measure"] in {"flagged_sound", "recall"}
        assert 0.0 <= row["value"] <= 1.0
