"""`read()`: inputs -> threads, the source and normalize stage every job starts with:
files, directories, globs and `hf:` datasets streamed in input order, each file's
records normalized, every record that fails handed on with file, position and reason."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.accounting import Account
from pipeline.formats import AUTO, ConvertOptions, get_format
from pipeline.formats.detect import Detection, detect
from pipeline.media import MediaChecker, MediaRoot, MediaSettings
from pipeline.mms import Thread
from pipeline.output.overlap import refuse_outputs_over_inputs
from pipeline.quarantine import Rejection
from pipeline.sources import (
    DEFAULT_SPLIT,
    InputFiles,
    ReadLimits,
    Record,
    expand_inputs,
    iter_file,
)
from pipeline.stages.normalize import SNIFF_RECORDS, read_items


@dataclass(frozen=True)
class ReadSpec:
    """How a job reads its inputs: the format (a name from `pipeline.formats.FORMATS`, or
    `auto`: detected per file from its first records, record by record in a mixed file),
    the options of the lossy mappings (parallel calls, reasoning, media, OASST paths), the
    limits that guard against hostile files, and which `split` (and config `hf_config`)
    an `hf:` dataset input streams. `media`: how the media of kept threads are checked
    (pipeline/media; None: not read, as the library reads by default; `mms convert` and
    `mms run` check them), `media_store` the folder copies go to in copy mode, and
    `media_roots` the folders a media path not beside its input file is looked for in."""

    format: str = AUTO
    options: ConvertOptions = field(default_factory=ConvertOptions)
    limits: ReadLimits = field(default_factory=ReadLimits)
    split: str = DEFAULT_SPLIT
    hf_config: str | None = None
    media: MediaSettings | None = None
    media_store: str | None = None
    media_roots: tuple[MediaRoot, ...] = ()

    def media_checker(self) -> MediaChecker | None:
        """The checker of the media kept threads hold (None: media are not read)."""
        return media_checker(
            self.media, self.options.multimodal, self.media_store, self.media_roots
        )


def media_checker(
    settings: MediaSettings | None,
    multimodal: str,
    store: str | os.PathLike[str] | None,
    roots: tuple[MediaRoot, ...] = (),
) -> MediaChecker | None:
    """The checker `settings` ask for, when media are kept (`multimodal: keep`)."""
    if settings is None or multimodal != "keep" or not settings.reads:
        return None
    if settings.copy and store is None:
        raise ValueError("copying media needs a folder to copy them to")
    return MediaChecker(settings, Path(store) if store is not None else None, roots)


def read(
    inputs: str | Iterable[str],
    spec: ReadSpec | None = None,
    *,
    on_reject: Callable[[Rejection], object] | None = None,
    stats: Account | None = None,
    outputs: Iterable[str | os.PathLike[str]] = (),
) -> Iterator[Thread]:
    """Yield MMS threads from files, directories, globs and `hf:` datasets, in input order,
    read as `spec` says (default: every format detected, default limits).

    Each record that cannot become a thread goes to `on_reject` and is counted in
    `stats.quarantined`; the reading goes on. `outputs` are the files the caller writes:
    one of them among the inputs raises OutputPathError, as unusable paths and datasets
    that cannot be opened raise InputError, before anything is read.
    """
    spec = spec or ReadSpec()
    stats = stats if stats is not None else Account()
    found = files_to_read(inputs, spec, outputs)
    count_files(stats, found)
    media = spec.media_checker()
    for path in found.files:
        name = found.names.get(path)
        items = iter_file(path, spec.limits, split=spec.split, config=spec.hf_config, name=name)
        yield from read_items(
            path,
            items,
            format=spec.format,
            on_reject=on_reject,
            stats=stats,
            options=spec.options,
            media=media,
        )


def files_to_read(
    inputs: str | Iterable[str], spec: ReadSpec, outputs: Iterable[str | os.PathLike[str]] = ()
) -> InputFiles:
    """The files `read` reads, in its order: the inputs expanded. Raises InputError for
    unusable paths and an unknown format name, and OutputPathError when one of the files
    the command writes (`outputs`) is among them, before any file is read."""
    if spec.format != AUTO:
        get_format(spec.format)
    found = expand_inputs([inputs] if isinstance(inputs, str) else list(inputs))
    refuse_outputs_over_inputs(found.files, [os.fspath(path) for path in outputs])
    return found


def count_files(stats: Account, found: InputFiles) -> None:
    """Record in `stats` the files read, skipped, read as companions and refused."""
    stats.files.extend(found.files)
    stats.skipped_files.extend(found.skipped)
    stats.companion_files.update(found.companions)
    stats.refused_files.update(found.refused)


def detect_file(path: str, limits: ReadLimits | None = None) -> Detection:
    """How auto-detection reads the file at `path` (its first SNIFF_RECORDS records)."""
    return detect(record.value for record in first_records(path, limits))


def first_records(path: str, limits: ReadLimits | None = None) -> list[Record]:
    """The first SNIFF_RECORDS records of the file at `path` that parse (what detection
    looks at)."""
    items = iter_file(path, limits or ReadLimits())
    return list(itertools.islice((i for i in items if isinstance(i, Record)), SNIFF_RECORDS))
