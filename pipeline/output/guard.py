"""The write guard for the files a command writes outside an output folder (DESIGN §7): a
file the user named (`-o threads.jsonl`, a report, a quarantine beside it) and a folder of
files of the command's own naming (`mms export -o DIR`). Output folders have theirs in
pipeline/output/folder.py; both apply the same rules, checked before any work starts:

- never an input of the command, and never inside a place another mms output manages;
- never through a symbolic link, never over a device or a pipe;
- never over a file mms did not write (or that changed since) without --overwrite: a file
  mms writes carries a mark (an extended attribute holding its size and modification
  time), so running a command again replaces its own earlier file and nothing else; where
  the file system keeps no marks, an existing file needs --overwrite;
- temporary files are named after the file they become (`.NAME.PID.tmp`, `.NAME.PID.parts-*`),
  so a killed command's leftovers are known as its own and removed by the next claim;
- a file appears only whole (written to a temporary file, renamed into place)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, TextIO

from pipeline.output.files import (
    OutputPathError,
    atomic_output,
    atomic_text_output,
    check_writable,
    discard_if_none,
    mark_written,
    written_by_mms,
)
from pipeline.output.folder import refuse_output_in_managed_place
from pipeline.output.overlap import refuse_inputs_inside, refuse_outputs_over_inputs

PARTS = "parts-"
"""What follows `.NAME.PID.` in the name of a command's scratch folder beside a file."""


@dataclass(frozen=True)
class OwnedFile:
    """A file a command may write (claimed by `claim_file`): written whole, and marked."""

    path: Path

    @contextmanager
    def open(self) -> Iterator[BinaryIO]:
        """A binary stream to the file (compressed by suffix); the file appears, marked as
        written by mms, only if the block completes."""
        with atomic_output(self.path, before_publish=mark_written) as stream:
            yield stream

    @contextmanager
    def open_text(self) -> Iterator[TextIO]:
        """A UTF-8 text stream to the file, as `open`."""
        with atomic_text_output(self.path, before_publish=mark_written) as text:
            yield text

    @contextmanager
    def scratch(self) -> Iterator[Path]:
        """A scratch folder beside the file, named after it, removed at the end."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        prefix = f".{self.path.name}.{os.getpid()}.{PARTS}"
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=self.path.parent))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def discard_if_none(self, entries: int) -> None:
        """Remove the file (just written) when it holds no entry, as an empty quarantine."""
        discard_if_none(self.path, entries)


def check_output_folder(path: str | Path) -> None:
    """What an mms output folder (claimed later by OutputFolder) is checked for before any
    work: not inside a place another output manages, and writable there. Raises
    OutputPathError naming the path."""
    refuse_output_in_managed_place(path)
    check_writable(path, directory=True)


def claim_file(
    path: str | os.PathLike[str], *, inputs: Iterable[str] = (), overwrite: bool = False
) -> OwnedFile:
    """Check that a command may write the file at `path` (the module's rules), remove what
    a killed command left for it, and return it. Raises OutputPathError naming the path."""
    target = Path(path)
    _refuse_link(target, "file")
    if target.exists() and not target.is_file():
        kind = "a folder" if target.is_dir() else "not a regular file (a device or pipe)"
        raise OutputPathError(f"cannot write {target}: it is {kind}")
    refuse_outputs_over_inputs(inputs, [target])
    refuse_output_in_managed_place(target)
    if target.exists() and not overwrite and not written_by_mms(target):
        raise OutputPathError(
            f"{target} exists and mms did not write it (or it was changed since): choose "
            "another name, or pass --overwrite to replace it"
        )
    check_writable(target)
    remove_leftovers(target.parent, target.name)
    return OwnedFile(target)


def _refuse_link(path: Path, kind: str) -> None:
    """Refuse a `path` that is a symbolic link: mms writes only where it was told, never
    where a link leads."""
    if os.path.islink(path):
        raise OutputPathError(
            f"cannot write {path}: it is a symbolic link (to {os.readlink(path)}); mms never "
            f"writes through a link: name the {kind} itself"
        )


def remove_leftovers(folder: Path, name: str | None = None) -> int:
    """Delete the temporary files and scratch folders in `folder` that commands no longer
    running left (for the file `name` only, when given); returns how many."""
    named = re.escape(name) if name is not None else ".+"
    pattern = re.compile(rf"^\.{named}\.(\d+)\.(tmp|{PARTS}.+)$")
    removed = 0
    with suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            found = pattern.match(entry.name)
            if found is None or _running(int(found.group(1))):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                Path(entry.path).unlink(missing_ok=True)
            removed += 1
    return removed


def _running(pid: int) -> bool:
    """Whether a process `pid` is running (this one is)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


@dataclass
class OwnedFilesFolder:
    """A folder of files of the command's own naming (claimed by `claim_files_folder`)."""

    root: Path
    written: set[str] = field(default_factory=set)

    def file(self, name: str) -> OwnedFile:
        """One of its files (a plain name, not a path), to write."""
        self.written.add(name)
        return OwnedFile(self.root / name)

    def finish(self) -> list[str]:
        """Remove the files an earlier run wrote here (unchanged since) that this one did
        not write, so the folder holds this run's files; returns their names."""
        stale = []
        for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
            path = Path(entry.path)
            ours = entry.is_file(follow_symlinks=False) and written_by_mms(path)
            if ours and entry.name not in self.written:
                path.unlink()
                stale.append(entry.name)
        return stale


def claim_files_folder(
    path: str | os.PathLike[str], *, inputs: Iterable[str] = (), overwrite: bool = False
) -> OwnedFilesFolder:
    """Check that a command may write files of its own naming into the folder at `path`:
    new, empty, or holding only files mms wrote (the module's rules; --overwrite lets it
    write among others' files, replacing those of the same names). Raises
    OutputPathError naming the path."""
    root = Path(path)
    _refuse_link(root, "folder")
    if root.exists() and not root.is_dir():
        raise OutputPathError(f"cannot write into {root}: it is a file, not a folder")
    refuse_output_in_managed_place(root)
    refuse_inputs_inside(root, inputs)
    check_writable(root, directory=True)
    if root.is_dir():
        foreign = sorted(_not_ours(root))
        if foreign and not overwrite:
            shown = ", ".join(foreign[:5]) + (
                f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
            )
            raise OutputPathError(
                f"{root} holds files mms did not write (or that were changed since): {shown}; "
                "choose another folder, or pass --overwrite to write among them (files of the "
                "same names are replaced)"
            )
        remove_leftovers(root)
    root.mkdir(parents=True, exist_ok=True)
    return OwnedFilesFolder(root)


def _not_ours(root: Path) -> Iterator[str]:
    """The entries of `root` mms did not write: folders, links, unmarked or changed files
    (a temporary file of mms's own is not counted)."""
    leftover = re.compile(rf"^\..+\.\d+\.(tmp|{PARTS}.+)$")
    for entry in os.scandir(root):
        if leftover.match(entry.name):
            continue
        mode = entry.stat(follow_symlinks=False).st_mode
        if not stat.S_ISREG(mode) or not written_by_mms(Path(entry.path)):
            yield entry.name
