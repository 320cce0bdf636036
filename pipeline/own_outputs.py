"""How an mms output folder is known: its manifest, or its work directory. Nothing else of
the output layer is needed for it, so the folder walks of the inputs
(pipeline/sources/paths.py) leave such folders out by the same rule that publishing uses
to take a folder as its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

MANIFEST_FORMAT = "mms-pipeline-manifest/1"
"""Names this layout, for readers that check what they were given."""
MANIFEST_FILE = "manifest.json"
"""The manifest's name in an output folder; published last, it commits the output."""
WORK_DIR = ".work"
"""The work directory inside an output folder: staging, and a run's parts."""
WORK_MARKER = "MMS_WORK_DIR"
"""The file that says a work directory is ours (written when the folder is claimed)."""


def read_own_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest mms wrote in `folder` (its `format` says so), None when there is none
    or the file there is not one of ours."""
    path = folder / MANIFEST_FILE
    if path.is_symlink() or not path.is_file():
        return None
    try:
        manifest = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        return None
    return manifest


def own_work_dir(work: Path) -> bool:
    """A work directory mms made: its marker, a run's plan, or nothing in it."""
    if not work.is_dir() or work.is_symlink():
        return False
    if (work / WORK_MARKER).is_file():
        return True
    try:
        plan = orjson.loads((work / "plan.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return not any(work.iterdir())
    return isinstance(plan, dict) and str(plan.get("version", "")).startswith("mms-")


def is_output_folder(folder: Path) -> bool:
    """Whether an mms command wrote `folder` as its output: its manifest, or its work
    directory, is there."""
    return read_own_manifest(folder) is not None or own_work_dir(folder / WORK_DIR)
