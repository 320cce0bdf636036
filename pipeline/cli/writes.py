"""What each command writes, declared on the command itself: every option or argument
that names a place to write says which kind of place it is, and the write guard
(pipeline/output/guard.py, pipeline/output/folder.py) applies that kind's rules. The
tests enumerate the registered commands and run each declared place against files the
command must never touch, so a command that declares nothing cannot be registered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import click

Place = Literal["file", "output-folder", "file-or-folder"]
"""`file`: one file the user names (`-` for standard output where the option says so);
`output-folder`: an mms output folder (data/, reports/, manifest.json ...);
`file-or-folder`: a file, or a folder of files of the command's own naming."""
ATTRIBUTE = "mms_writes"


def writes(**places: Place) -> Callable[[click.Command], click.Command]:
    """Declare the parameters of a command that name places it writes (none: `writes()`)."""

    def declare(command: click.Command) -> click.Command:
        names = {param.name for param in command.params}
        unknown = set(places) - names
        if unknown:
            raise TypeError(f"{command.name}: no parameter named {sorted(unknown)}")
        setattr(command, ATTRIBUTE, dict(places))
        return command

    return declare


def declared_writes(command: click.Command) -> dict[str, Place] | None:
    """The places `command` declared it writes, or None when it declared nothing."""
    found: dict[str, Place] | None = getattr(command, ATTRIBUTE, None)
    return found
