"""Hugging Face Hub repository ids, checked by the Hub's own rules before one is handed to
`datasets` or `huggingface_hub`: `ORG/NAME` (or a bare `NAME`, the Hub's older datasets),
each part of letters, digits, `-`, `_` and `.`, not starting or ending with `-` or `.`,
without `--` or `..`, at most 96 characters, and the id not ending in `.git`. So a name
like `org/../outside` is refused as an id, never read as a path on this machine."""

from __future__ import annotations

import re

from pipeline.wording import visible

MAX_PART = 96
"""Most characters in the owner or in the name (huggingface_hub's validate_repo_id)."""
_OUTSIDE_ALPHABET = re.compile(r"[^A-Za-z0-9._-]")


def repo_id_problem(repo_id: str, *, owner: bool = False) -> str | None:
    """What makes `repo_id` no Hub repository id, in a few words, or None when it is one.
    `owner`: the id must name its owner (ORG/NAME), as a repository pushed to does."""
    parts = repo_id.split("/")
    if ".." in repo_id:
        return "`..` is not allowed"
    if len(parts) > 2:
        return f"a Hub id is ORG/NAME, this has {len(parts)} parts"
    if owner and len(parts) == 1:
        return "a Hub id is ORG/NAME, this names no ORG"
    for part in parts:
        if not part:
            return "the owner or the name is empty"
        outside = sorted(set(_OUTSIDE_ALPHABET.findall(part)))
        if outside:
            shown = " ".join(f"`{visible(char)}`" for char in outside)
            return f"{shown} not allowed (only letters, digits, `-`, `_` and `.`)"
        if part[0] in "-." or part[-1] in "-.":
            return f"`{part}` starts or ends with `-` or `.`"
        if "--" in part:
            return "`--` is not allowed"
        if len(part) > MAX_PART:
            return f"`{part[:12]}…` is longer than {MAX_PART} characters"
    if repo_id.endswith(".git"):
        return "it ends with `.git`"
    return None
