"""Outputs kept apart from inputs and from other outputs: no command writes over one of its
own inputs, into a folder another mms output manages, or into a folder whose managed
places hold its inputs. Checked before anything is read or written."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from pipeline.output.files import OutputPathError
from pipeline.output.folder import MANAGED_DIRS, MANAGED_FILES, WORK_DIR
from pipeline.output.marks import is_output_folder
from pipeline.sources import is_hf_input
from pipeline.sources.stdin import STDIN

MANAGED_PLACES = (*MANAGED_DIRS, *MANAGED_FILES, WORK_DIR)
"""What an output folder holds that mms writes and removes (everything else is left)."""


def refuse_outputs_over_inputs(input_files: Iterable[str], outputs: Iterable[str | Path]) -> None:
    """Raise OutputPathError when an output file is one of the input files (a folder or
    glob of inputs can name it): the input would be replaced by the output."""
    written = {os.path.realpath(path): str(path) for path in outputs if str(path) != STDIN}
    for path in input_files:
        if path != STDIN and os.path.realpath(path) in written:
            shown = written[os.path.realpath(path)]
            raise OutputPathError(
                f"{shown} is one of the inputs ({path}): mms never writes over an input; "
                "write the output elsewhere"
            )


def refuse_output_in_managed_place(output: str | Path) -> None:
    """Raise OutputPathError when `output` (a file or folder) lies in a place another mms
    output folder manages (its data/, tokenizer/ ... or work directory): that output would
    no longer match its manifest, and its next run would remove what was written there."""
    if str(output) == STDIN:
        return
    path = Path(os.path.realpath(output))
    for folder in path.parents:
        place = path.relative_to(folder).parts[0]
        if place in MANAGED_PLACES and is_output_folder(folder):
            raise OutputPathError(
                f"{output} is inside {folder / place}, which mms manages for the output "
                f"folder {folder}: write elsewhere"
            )


def refuse_inputs_in_managed_places(folder: str | Path, input_files: Iterable[str]) -> None:
    """Raise OutputPathError when an input file lies in a place the output `folder` manages
    (it could be replaced or removed by publishing the output)."""
    root = Path(os.path.realpath(folder))
    places = [root / place for place in MANAGED_PLACES]
    for path in input_files:
        if path == STDIN or is_hf_input(path):
            continue
        real = os.path.realpath(path)
        for place in places:
            if real == str(place) or real.startswith(f"{place}{os.sep}"):
                raise OutputPathError(
                    f"the input {path} is inside {place}, which the output folder {folder} "
                    "manages: write the output elsewhere"
                )


def refuse_inputs_inside(folder: str | Path, input_files: Iterable[str]) -> None:
    """Raise OutputPathError when an input file lies inside the output `folder` (a command
    that writes files of its own naming there could replace it)."""
    root = os.path.realpath(folder)
    for path in input_files:
        if path == STDIN or is_hf_input(path):
            continue
        if os.path.realpath(path).startswith(f"{root}{os.sep}"):
            raise OutputPathError(
                f"the input {path} is inside the output folder {folder}: write the output elsewhere"
            )
