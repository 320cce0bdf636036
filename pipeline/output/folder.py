"""An output folder mms manages (DESIGN §7): claimed before any work, written through a
staging folder inside its work directory, and published at the end.

Only the folder's managed places (`data/`, `tokenizer/`, `quarantine/`, `reports/`,
`media/` (copy mode), `README.md`, `manifest.json`, and the work directory `.work/`) are
ever written; anything else in it is never touched. A folder is ours when an earlier mms
command left its manifest there (which lists every file it published, with its sha256) or
its work directory. Claiming a folder refuses, before anything is written:
- a symbolic link among the managed places or inside them (nothing is written or removed
  through a link);
- a non-empty folder that is not ours, and files in the managed places that mms did not
  write or that were changed since, unless the user passes --overwrite;
- a folder another mms command is writing (an exclusive lock on the folder itself).

Publishing moves the staged files into place, removes what the earlier output listed and
this one does not write, and moves the manifest last: the manifest is the commit marker.
An interrupted publication (a killed process) is finished by the next claim, so the folder
ends as the publication meant it whatever moment the kill came at."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.output.files import OutputPathError, file_sha256
from pipeline.output.manifest import CARD_FILE, MANIFEST_FILE, listed_files
from pipeline.own_outputs import WORK_DIR as WORK_DIR
from pipeline.own_outputs import WORK_MARKER as WORK_MARKER
from pipeline.own_outputs import is_output_folder, own_work_dir, read_own_manifest

STAGING_DIR = "publish"
"""The staging folder under the work directory: the output as it will be published."""
MANAGED_DIRS = ("data", "tokenizer", "quarantine", "reports", "media")
"""The folders mms publishes into (`media/`: the media a copy-mode run copied, DESIGN §3),
and so owns: what an earlier output listed there is replaced or removed, anything else
there is refused unless --overwrite, and readers of a stored output fetch from them."""
MANAGED_FILES = (CARD_FILE, MANIFEST_FILE)
MANAGED_PLACES = (*MANAGED_DIRS, *MANAGED_FILES, WORK_DIR)
"""What an output folder holds that mms writes and removes (everything else is left)."""
_REMOVING = re.compile(r"^\.work-removing-[0-9a-f]{32}$")
"""A work directory being removed: renamed first, so no half-removed one is ever read."""
SHOWN = 5
"""How many paths an error names before saying how many more there are."""

_held_locks: list[int] = []
"""Descriptors of the folders this process holds; a forked worker closes its copies."""


def _close_held_in_child() -> None:
    for descriptor in _held_locks:
        with suppress(OSError):
            os.close(descriptor)
    _held_locks.clear()


os.register_at_fork(after_in_child=_close_held_in_child)


class OutputFolderError(OutputPathError):
    """The output folder cannot be used as asked; the message names what and why."""


@dataclass
class Publication:
    """What publishing changed beside writing the new output: files of the earlier output
    it does not write (removed), and with --overwrite, files mms had not written."""

    removed: list[str] = field(default_factory=list)
    """Files an earlier mms output listed (unchanged since) that this one does not write."""
    taken_over: list[str] = field(default_factory=list)
    """Files mms did not write (or that were changed since), replaced or removed as
    --overwrite allowed."""


class OutputFolder:
    """A claimed output folder; use as a context manager (claim on enter, release on exit).

    Write the output under `staging` in its final layout, the manifest last, then call
    `publish()`; `finish()` removes the work directory."""

    def __init__(self, root: str | Path, *, overwrite: bool = False) -> None:
        self.root = Path(root)
        self.overwrite = overwrite
        self.work = self.root / WORK_DIR
        self.staging = self.work / STAGING_DIR
        self.earlier: dict[str, Any] | None = None
        """The manifest an earlier mms command left, if any (as published before this)."""
        self.unchanged: set[str] = set()
        """Files an earlier output listed that are still as it wrote them."""
        self.foreign: list[str] = []
        """Files in the managed places that mms did not write or that changed since (only
        with --overwrite: otherwise claiming refuses)."""
        self._lock: int | None = None
        self._made_root = False

    def __enter__(self) -> OutputFolder:
        self.claim()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        try:
            if exc_type is not None:
                self._abandon()
        finally:
            self.release()

    def _abandon(self) -> None:
        """After a failure: the staged files go; so do the work directory when nothing else
        is in it (a run's finished parts stay, to resume) and the folder if claiming made
        it. A staged output with its manifest stays: the next claim publishes it."""
        if read_own_manifest(self.staging) is None:
            shutil.rmtree(self.staging, ignore_errors=True)
        with suppress(OSError):
            if self.work.is_dir() and {p.name for p in self.work.iterdir()} <= {WORK_MARKER}:
                shutil.rmtree(self.work)
            if self._made_root:
                self.root.rmdir()

    # ----------------------------------------------------------------- claiming

    def claim(self) -> None:
        """Check and lock the folder (see the module docstring), finish an interrupted
        publication, and make an empty staging folder. Raises OutputFolderError."""
        if self.root.exists() and not self.root.is_dir():
            raise OutputFolderError(f"{self.root} is a file, not a folder")
        refuse_output_in_managed_place(self.root)
        self._made_root = not self.root.exists()
        self.root.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        try:
            _refuse_links(self.root)
            ours = self._ours()
            if not ours and any(self.root.iterdir()) and not self.overwrite:
                raise OutputFolderError(_not_ours_message(self.root))
            self._check_work_dir()
            if ours:
                self._remove_abandoned_work_dirs()
                self._finish_interrupted_publication()
            self._read_earlier()
            self.foreign = self._foreign()
            if self.foreign and not self.overwrite:
                raise OutputFolderError(_foreign_message(self.root, self.foreign, self.earlier))
            # the marker first: a work directory holding anything else is ours only by it
            self.work.mkdir(exist_ok=True)
            (self.work / WORK_MARKER).write_text("mms-pipeline work directory\n", encoding="utf-8")
            shutil.rmtree(self.staging, ignore_errors=True)
            self.staging.mkdir()
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Let other commands use the folder."""
        if self._lock is not None:
            with suppress(ValueError):
                _held_locks.remove(self._lock)
            os.close(self._lock)
            self._lock = None

    def _take_lock(self) -> None:
        descriptor = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise OutputFolderError(
                f"{self.root} is being written by another mms command; wait for it to end"
            ) from None
        self._lock = descriptor
        _held_locks.append(descriptor)

    def _ours(self) -> bool:
        """Whether an earlier mms command wrote here: its manifest, or its work directory."""
        return is_output_folder(self.root)

    def _check_work_dir(self) -> None:
        if self.work.exists() and not own_work_dir(self.work):
            raise OutputFolderError(
                f"{self.work} is not an mms work directory; mms keeps its work under that "
                "name: move it away, or choose another output folder"
            )

    def _remove_abandoned_work_dirs(self) -> None:
        """Work directories a killed cleanup had renamed but not yet removed."""
        for entry in self.root.iterdir():
            if _REMOVING.match(entry.name) and entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)

    def _finish_interrupted_publication(self) -> None:
        """A staging folder holding its manifest was being published when the process
        was stopped: move the rest of it into place (the same moves, in the same order)."""
        staged = read_own_manifest(self.staging)
        if staged is None:
            return
        self._read_earlier()
        self.unchanged |= _unchanged(self.root, staged)
        self.foreign = self._foreign(extra=staged)
        if self.foreign and not self.overwrite:
            raise OutputFolderError(_foreign_message(self.root, self.foreign, self.earlier))
        self.publish()

    def _read_earlier(self) -> None:
        self.earlier = read_own_manifest(self.root)
        self.unchanged = _unchanged(self.root, self.earlier) if self.earlier is not None else set()

    def _foreign(self, extra: dict[str, Any] | None = None) -> list[str]:
        """The files in the managed places that no manifest of ours lists as they are
        (`extra`: the manifest of a publication under way, whose files are ours too)."""
        ours = self.unchanged | (_unchanged(self.root, extra) if extra is not None else set())
        found = []
        for path in _managed_files(self.root):
            if path == MANIFEST_FILE and self.earlier is not None:
                continue
            if path not in ours:
                found.append(path)
        return found

    # ----------------------------------------------------------------- publishing

    def publish(self) -> Publication:
        """Move the staged output into place: every file but the manifest, then remove
        what the earlier output listed and this one does not write (and, with --overwrite,
        what mms did not write), then the manifest, the commit marker. Raises
        OutputFolderError when the staging folder holds no manifest."""
        staged_files = sorted(_files_under(self.staging))
        if MANIFEST_FILE not in staged_files:
            raise OutputFolderError(f"{self.staging} holds no {MANIFEST_FILE}: nothing to publish")
        new = set(staged_files)
        result = Publication(taken_over=list(self.foreign))
        for path in self.foreign:  # only with --overwrite: claiming refuses them otherwise
            (self.root / path).unlink(missing_ok=True)
        for path in staged_files:
            if path != MANIFEST_FILE:
                _move(self.staging / path, self.root / path)
        for path in sorted(self.unchanged - new):
            (self.root / path).unlink(missing_ok=True)
            result.removed.append(path)
        _remove_empty_managed_dirs(self.root)
        _move(self.staging / MANIFEST_FILE, self.root / MANIFEST_FILE)
        shutil.rmtree(self.staging, ignore_errors=True)
        self.earlier = read_own_manifest(self.root)
        self.unchanged, self.foreign = new, []
        return result

    def finish(self, remove: Callable[[Path], None] | None = None) -> None:
        """Remove the work directory: renamed first (one atomic step), then deleted (by
        `remove`: `mms run` deletes its parts on its engine's workers), so a kill while
        deleting leaves no half-removed work directory to be read again."""
        if not self.work.exists():
            return
        doomed = self.root / f".work-removing-{uuid.uuid4().hex}"
        os.rename(self.work, doomed)
        if remove is None:
            shutil.rmtree(doomed, ignore_errors=True)
        else:
            remove(doomed)


def refuse_output_in_managed_place(output: str | Path) -> None:
    """Raise OutputPathError when `output` (a file or folder) lies in a place another mms
    output folder manages (its data/, tokenizer/ ... or work directory): that output would
    no longer match its manifest, and its next run would remove what was written there."""
    path = Path(os.path.realpath(output))
    for folder in path.parents:
        place = path.relative_to(folder).parts[0]
        if place in MANAGED_PLACES and is_output_folder(folder):
            raise OutputPathError(
                f"{output} is inside {folder / place}, which mms manages for the output "
                f"folder {folder}: write elsewhere"
            )


def _unchanged(root: Path, manifest: dict[str, Any]) -> set[str]:
    """The files `manifest` lists in the managed places that are still as it says (a path
    outside them, or with `..`, is never taken as ours, whatever a manifest says)."""
    found = set()
    for path, digest in listed_files(manifest).items():
        parts = path.split("/")
        inside = (parts[0] in MANAGED_DIRS and len(parts) > 1) or path in MANAGED_FILES
        if inside and ".." not in parts and "" not in parts and _same_file(root / path, digest):
            found.add(path)
    return found


def _managed_files(root: Path) -> Iterator[str]:
    """The files in the managed places (not the work directory), relative to `root`."""
    for name in MANAGED_FILES:
        if (root / name).is_file():
            yield name
    for name in MANAGED_DIRS:
        folder = root / name
        if folder.is_dir():
            yield from (f"{name}/{path}" for path in _files_under(folder))
        elif folder.exists():
            yield name


def _files_under(folder: Path) -> Iterator[str]:
    """Every file under `folder` (never through a link), as POSIX paths relative to it."""
    for directory, subfolders, files in os.walk(folder):
        subfolders.sort()
        base = Path(directory).relative_to(folder)
        for name in sorted(files):
            yield (base / name).as_posix()


def _refuse_links(root: Path) -> None:
    """Refuse a symbolic link among the managed places or anywhere inside them."""
    for name in (*MANAGED_DIRS, *MANAGED_FILES, WORK_DIR):
        path = root / name
        if path.is_symlink():
            raise _link_error(path)
        if path.is_dir():
            for directory, subfolders, files in os.walk(path):
                for entry in (*subfolders, *files):
                    if os.path.islink(os.path.join(directory, entry)):
                        raise _link_error(Path(directory, entry))


def _link_error(path: Path) -> OutputFolderError:
    return OutputFolderError(
        f"{path} is a symbolic link (to {os.readlink(path)}); mms never writes or removes "
        "anything through a link inside its output folder: remove the link, or choose "
        "another output folder"
    )


def _same_file(path: Path, digest: str | None) -> bool:
    """Whether `path` is a file (not a link) holding the bytes of sha256 `digest`."""
    if digest is None or path.is_symlink() or not path.is_file():
        return False
    return file_sha256(path) == digest


def _move(source: Path, target: Path) -> None:
    """Move a staged file into place, unless an earlier attempt already did."""
    if not source.exists():
        if target.is_file():
            return
        raise OutputFolderError(f"{source} is missing: the staged output is incomplete")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.parent.is_symlink():
        raise _link_error(target.parent)
    os.replace(source, target)


def _remove_empty_managed_dirs(root: Path) -> None:
    for name in MANAGED_DIRS:
        folder = root / name
        if not folder.is_dir() or folder.is_symlink():
            continue
        for directory, _, _ in sorted(os.walk(folder), reverse=True):
            with suppress(OSError):
                os.rmdir(directory)


def _shown(paths: list[str]) -> str:
    head = ", ".join(paths[:SHOWN])
    return head + (f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else "")


def _not_ours_message(root: Path) -> str:
    entries = sorted(entry.name for entry in root.iterdir())
    return (
        f"{root} is not empty ({_shown(entries)}) and no mms command wrote it (it holds no "
        f"mms {MANIFEST_FILE}); mms writes only into an empty folder or its own output: "
        "choose another folder, or pass --overwrite to let mms replace and remove what is "
        f"in its places there ({', '.join((*MANAGED_DIRS, *MANAGED_FILES))}; anything else "
        "is kept)"
    )


def _foreign_message(root: Path, foreign: list[str], earlier: dict[str, Any] | None) -> str:
    what = (
        "changed since mms wrote them, or not written by mms"
        if earlier is not None
        else "not written by mms"
    )
    return (
        f"{root} holds files {what}: {_shown(foreign)}; mms would replace or remove them. "
        "Move them away, or pass --overwrite to let it"
    )
