"""The export job: threads read from any input (MMS JSONL by default) written in another
transcript format, Harmony so far: one transcript per thread, as JSON Lines of
`{"id", "text"}` (standard output, or a `.jsonl` file, compressed by suffix) or as one
`<id>.txt` file per thread in a folder. Both read back with `mms convert --from harmony`.

A thread the format cannot hold is left out, counted as dropped with the reason, and
listed in the result; records that do not read go to the quarantine file, as in convert.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import orjson

from pipeline.accounting import Account
from pipeline.formats.harmony.render import HarmonyRenderError, thread_to_harmony
from pipeline.jobs.convert import STDOUT, default_quarantine_path, output_stream
from pipeline.jobs.read import ReadSpec, files_to_read, read
from pipeline.mms import Thread
from pipeline.output.guard import OwnedFilesFolder, claim_file, claim_files_folder
from pipeline.quarantine import rejection_line

TARGETS: dict[str, Callable[[Thread], str]] = {"harmony": thread_to_harmony}
"""Each export format and how a thread is written in it."""
RENDER_ERRORS = (HarmonyRenderError,)
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.zstd")
DROPPED = "no {target} form"
"""The drop reason of a thread the export format cannot hold."""
FILE_SUFFIX = ".txt"
FOLDER_QUARANTINE = ".rejected.jsonl"
"""A folder export's quarantine, inside the folder (hidden: reading the folder back with
`mms convert DIR --from harmony` reads only the transcripts)."""
MAX_NAME = 120
"""Longest file name made from a thread id (before the suffix and a counter)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class ExportResult:
    """Where the transcripts went, the counts, and each thread left out with why."""

    output: Path
    quarantine: Path
    account: Account
    left_out: list[tuple[str, str]] = field(default_factory=list)


def writes_lines(output: str | Path) -> bool:
    """Whether an output is JSON Lines (standard output or a `.jsonl` name), not a folder."""
    name = str(output)
    return name == STDOUT or name.lower().endswith(JSONL_SUFFIXES)


def file_name(thread_id: str, taken: set[str]) -> str:
    """A file name for a thread: its id with anything but letters, digits, `.`, `_` and
    `-` replaced, made unique among `taken` with a counter (deterministic in order)."""
    stem = _UNSAFE.sub("_", thread_id)[:MAX_NAME].lstrip(".") or "thread"
    name, number = f"{stem}{FILE_SUFFIX}", 1
    while name.lower() in taken:
        number += 1
        name = f"{stem}-{number}{FILE_SUFFIX}"
    taken.add(name.lower())
    return name


class _LinesSink:
    """Transcripts as `{"id", "text"}` lines."""

    def __init__(self, out: BinaryIO):
        self.out = out

    def write(self, thread_id: str, text: str) -> None:
        self.out.write(
            orjson.dumps({"id": thread_id, "text": text}, option=orjson.OPT_APPEND_NEWLINE)
        )


class _FolderSink:
    """Transcripts as one file each, written atomically into the claimed folder."""

    def __init__(self, folder: OwnedFilesFolder):
        self.folder = folder
        self.taken: set[str] = set()

    def write(self, thread_id: str, text: str) -> None:
        with self.folder.file(file_name(thread_id, self.taken)).open() as out:
            out.write(text.encode())


def export(
    inputs: str | Sequence[str],
    output: str | Path,
    spec: ReadSpec | None = None,
    *,
    to: str = "harmony",
    quarantine: str | Path | None = None,
    overwrite: bool = False,
) -> ExportResult:
    """Write the threads of `inputs` (read as `spec` says; default: detected) in format
    `to` at `output`: standard output (`-`) or a `.jsonl` file as JSON Lines, anything
    else a folder of `.txt` files (its quarantine inside it). The places are claimed
    first (pipeline/output/guard.py; `overwrite` lets them replace files mms did not
    write). Raises KeyError for an unknown format, InputError and OutputPathError for
    unusable paths, before anything is read."""
    render = TARGETS[to]
    spec = spec or ReadSpec()
    output = Path(output)
    lines = writes_lines(output)
    if quarantine is not None:
        quarantine = Path(quarantine)
    else:
        quarantine = default_quarantine_path(output) if lines else output / FOLDER_QUARANTINE
    # unusable inputs, and outputs over inputs, fail here, before anything is written
    found = files_to_read(inputs, spec, outputs=(output, quarantine))
    folder = None
    if not lines:
        folder = claim_files_folder(output, inputs=found.files, overwrite=overwrite)
    lines_file = None
    if lines and str(output) != STDOUT:
        lines_file = claim_file(output, overwrite=overwrite)
    rejected_file = claim_file(quarantine, overwrite=overwrite)
    account = Account()
    result = ExportResult(output, quarantine, account)
    with rejected_file.open() as rejected:
        threads = read(
            inputs,
            spec,
            on_reject=lambda r: rejected.write(rejection_line(r)),
            stats=account,
            outputs=(output, quarantine),
        )
        if folder is not None:
            _write_all(threads, render, _FolderSink(folder), result, to)
        else:
            with output_stream(lines_file) as out:
                _write_all(threads, render, _LinesSink(out), result, to)
    if folder is not None:
        if quarantine.parent == output:
            folder.written.add(quarantine.name)
        folder.finish()
    rejected_file.discard_if_none(account.quarantined_total)
    return result


def _write_all(
    threads: Iterable[Thread],
    render: Callable[[Thread], str],
    sink: _LinesSink | _FolderSink,
    result: ExportResult,
    to: str,
) -> None:
    """Each thread rendered and written, or left out (counted as dropped) with why."""
    for thread in threads:
        try:
            text = render(thread)
        except RENDER_ERRORS as err:
            result.left_out.append((thread.id, str(err)))
            result.account.dropped[DROPPED.format(target=to)] += 1
            continue
        sink.write(thread.id, text)
        result.account.written[to] += 1
