"""How often `mms formats --suggest-mapping` takes the right field as the answer, over the
labelled shapes of tests/data/curation/mapping (labels.json): one row per file, then a
summary row of the share right and one of the shapes whose suggested answer is a label or
an assertion (which must stay 0).

    PYTHONPATH=. python -c "from tests.curation_accuracy_mapping import figures; print(figures())"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.formats.suggest import Suggestion, suggest_mapping
from pipeline.jobs.read import first_records

FOLDER = Path(__file__).parent / "data" / "curation" / "mapping"
NOT_ANSWERS = ("label", "assertion")
"""Roles a suggested answer must never have."""


def labels() -> dict[str, Any]:
    """The labelled set: `shapes` (each file's field roles and answer), `questions`."""
    data: dict[str, Any] = json.loads((FOLDER / "labels.json").read_text())
    return data


def suggestion(name: str) -> Suggestion:
    """The mapping suggested for the labelled file `name`, from its first records."""
    records = [record.value for record in first_records(str(FOLDER / name))]
    found = suggest_mapping(records)
    assert found is not None, name
    return found


def suggested_answer(found: Suggestion) -> str | None:
    """The field a suggestion takes as the answer (None: prompt-only threads)."""
    answer = found.mapping.get("response")
    return answer if isinstance(answer, str) else None


def figures() -> list[dict[str, Any]]:
    """A row per labelled shape (1.0 when the suggested answer is the labelled one, or
    none when none is), a summary of the share right, and the count of shapes whose
    suggested answer is labelled a label or an assertion."""
    rows = []
    label_taken = 0
    for name, truth in labels()["shapes"].items():
        answer = suggested_answer(suggestion(name))
        label_taken += truth["roles"].get(answer) in NOT_ANSWERS
        right = float(answer == truth["answer"])
        rows.append(
            {"stage": "mapping", "name": name, "measure": "correct", "value": right, "count": 1}
        )
    total = len(rows)
    share = sum(row["value"] for row in rows) / total
    rows.append(
        {
            "stage": "mapping",
            "name": "summary",
            "measure": "correct",
            "value": share,
            "count": total,
        }
    )
    rows.append(
        {
            "stage": "mapping",
            "name": "summary",
            "measure": "label_as_answer",
            "value": float(label_taken),
            "count": total,
        }
    )
    return rows
