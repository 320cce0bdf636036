"""Write output files atomically (a temp file renamed into place on success), compressed
by suffix (.gz, .zst): a failed run never leaves a half-written file that looks whole;
and hash the files a run wrote or read."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO, TextIO

import zstandard

MARK = "user.mms-pipeline.written"
"""The extended attribute on a file mms wrote: `SIZE:MTIME_NS` as it was published."""


def mark_written(path: Path) -> None:
    """Mark the file at `path` as written by mms, as it is now (no-op where unsupported)."""
    with suppress(OSError, AttributeError):
        status = os.stat(path)
        os.setxattr(path, MARK, f"{status.st_size}:{status.st_mtime_ns}".encode())


def written_by_mms(path: Path) -> bool:
    """Whether the file at `path` is one mms wrote and nobody changed since."""
    try:
        mark = os.getxattr(path, MARK, follow_symlinks=False).decode()
        status = os.stat(path, follow_symlinks=False)
    except (OSError, AttributeError, UnicodeDecodeError):
        return False
    return mark == f"{status.st_size}:{status.st_mtime_ns}"


class OutputPathError(ValueError):
    """An output path that cannot be written: under a file, in a read-only place."""


def check_writable(path: str | Path, *, directory: bool = False) -> None:
    """Make sure a file (or, with `directory`, a folder) can be written at `path` before
    any work starts, leaving nothing behind: a probe file is written and removed in the
    nearest folder that exists. Raises OutputPathError saying why not."""
    target = Path(path)
    folder = target if directory else target.parent
    if target.exists() and target.is_dir() != directory:
        kind = "a directory" if target.is_dir() else "a file"
        raise OutputPathError(f"{path} is {kind}; expected {'a folder' if directory else 'a file'}")
    existing = next((p for p in (folder, *folder.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        raise OutputPathError(f"cannot write {path}: {existing} is a file, not a folder")
    try:
        probe = existing / f".mms-write-probe.{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise OutputPathError(
            f"cannot write {path}: cannot create files in {existing} "
            f"({err.strerror or type(err).__name__})"
        ) from None


@contextmanager
def atomic_output(
    path: str | os.PathLike[str], before_publish: Callable[[Path], None] | None = None
) -> Iterator[BinaryIO]:
    """A binary stream to `path`; the file appears only if the block completes
    (`before_publish` is called on the complete temporary file before it is renamed)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    raw = open(temp, "wb")  # noqa: SIM115 - closed below, after the compressor
    stream: BinaryIO = raw
    if target.suffix == ".gz":
        # mtime=0 and no file name keep the bytes identical from run to run.
        stream = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)  # type: ignore[assignment]
    elif target.suffix in (".zst", ".zstd"):
        stream = zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False)
    try:
        yield stream
        if stream is not raw:
            stream.close()
        raw.close()
        if before_publish is not None:
            before_publish(temp)
        os.replace(temp, target)
    except BaseException as err:
        raw.close()
        temp.unlink(missing_ok=True)
        if isinstance(err, OSError):
            name_file(err, target)
        raise


def name_file(error: OSError, path: Path) -> None:
    """Give `error` the file `path` when it names none (a full disk fails a write, which
    knows no file name), so whoever tells it can say which file."""
    if error.filename is None:
        error.filename = str(path)


@contextmanager
def atomic_text_output(
    path: str | Path, before_publish: Callable[[Path], None] | None = None
) -> Iterator[TextIO]:
    """A UTF-8 text stream to `path` (compressed by suffix), written atomically."""
    with atomic_output(path, before_publish) as binary:
        text = io.TextIOWrapper(binary, encoding="utf-8", newline="\n", write_through=True)
        yield text
        text.flush()
        text.detach()


def remove_stale_temps(directory: Path, skip: Iterable[str] = ()) -> int:
    """Delete the temp files (`.NAME.PID[.parquet].tmp`) of writers that are gone, under
    `directory` but not in its subfolders named in `skip`: what a killed run leaves. Only
    a caller that knows no other writer uses `directory` may call it (a run holding its
    work directory's lock); this process's own temp files are kept. Returns the count."""
    if not directory.is_dir():
        return 0
    own = f".{os.getpid()}."
    removed = 0
    for folder, subfolders, files in os.walk(directory):
        subfolders[:] = sorted(d for d in subfolders if d not in skip)
        for name in files:
            if name.startswith(".") and name.endswith(".tmp") and own not in name:
                Path(folder, name).unlink(missing_ok=True)
                removed += 1
    return removed


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 hex digest of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def discard_if_none(path: Path, entries: int) -> None:
    """Remove the output at `path` (written atomically just before) when it holds no entry:
    an empty quarantine file says nothing. Its folder goes too, once empty."""
    if entries:
        return
    path.unlink(missing_ok=True)
    with suppress(OSError):
        path.parent.rmdir()
