"""The dataset card (`README.md`) of an output against its manifest: its YAML front matter
names exactly the manifest's splits, each split's path glob matches exactly that split's
shards, and its dataset_info gives each split's row count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pipeline.jobs.verify.base import Problem, Verification


def lists_a_card(manifest: dict[str, Any]) -> bool:
    """Whether the manifest lists a dataset card (a run's or a pack's; `mms tokenize`
    writes none)."""
    return manifest.get("card") is not None


def _front_matter(card: Path) -> dict[str, Any] | None:
    text = card.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return None
    head = text[4 : text.find("\n---", 4)]
    loaded = yaml.safe_load(head)
    return loaded if isinstance(loaded, dict) else None


def check_card(out: Path, manifest: dict[str, Any], result: Verification) -> None:
    """The card's configs name exactly the manifest's splits, each path glob matches that
    split's shards, and dataset_info.splits gives their row counts."""
    front = _card_front(out / "README.md", result)
    if front is None:
        return
    splits = manifest["splits"]
    result.problems.extend(_card_file_problems(out, front, splits))
    result.problems.extend(_card_row_problems(front, splits))
    result.count("card")


def _card_front(card: Path, result: Verification) -> dict[str, Any] | None:
    """The card's YAML front matter; None (a problem in `result`) when there is none."""
    if not card.is_file():
        result.problems.append(Problem("README.md", "no dataset card"))
        return None
    try:
        front = _front_matter(card)
    except yaml.YAMLError as err:
        result.problems.append(Problem("README.md", f"front matter is not YAML: {err}"))
        return None
    if front is None:
        result.problems.append(Problem("README.md", "no YAML front matter"))
    return front


def _card_file_problems(out: Path, front: dict[str, Any], splits: dict[str, Any]) -> list[Problem]:
    """Where the card's configs do not name the manifest's splits, or a split's path glob
    does not match exactly its shards."""
    problems: list[Problem] = []
    files = [f for config in front.get("configs") or [] for f in config.get("data_files") or []]
    declared = {f.get("split"): f.get("path") for f in files if isinstance(f, dict)}
    if set(declared) != set(splits):
        problems.append(
            Problem(
                "README.md",
                f"declares splits {sorted(map(str, declared))}, the files hold {sorted(splits)}",
            )
        )
    for split, pattern in declared.items():
        if split not in splits or not isinstance(pattern, str):
            continue
        matched = {f"data/{p.name}" for p in out.glob(pattern)}
        wanted = {shard["path"] for shard in splits[split]["shards"]}
        if matched != wanted:
            problems.append(
                Problem(
                    "README.md",
                    f"split {split}: {pattern} matches {sorted(matched)}, not {sorted(wanted)}",
                )
            )
    return problems


def _card_row_problems(front: dict[str, Any], splits: dict[str, Any]) -> list[Problem]:
    """Where the card's dataset_info.splits does not give a split's row count."""
    info = front.get("dataset_info") or {}
    examples = {s.get("name"): s.get("num_examples") for s in info.get("splits") or []}
    return [
        Problem(
            "README.md",
            f"split {split}: num_examples {examples.get(split)}, the shards hold {entry['rows']}",
        )
        for split, entry in splits.items()
        if examples.get(split) != entry["rows"]
    ]
