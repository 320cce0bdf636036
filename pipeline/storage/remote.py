"""Files on object stores through fsspec (s3fs for `s3://`, gcsfs for `gs://`, adlfs for
`az://`, huggingface_hub for `hf://`): open for reading, publish a local file, list a
prefix, expand a glob. Every call is retried on transient errors (pipeline/storage/retry.py)
and a failure becomes a StorageError naming the URL, never a client's own exception.

Credentials are the clients' own: environment variables (`AWS_ACCESS_KEY_ID`,
`AWS_ENDPOINT_URL`, `GOOGLE_APPLICATION_CREDENTIALS`, `HF_TOKEN` ...), profiles and
instance roles, fsspec's configuration (`FSSPEC_S3_*` variables, ~/.config/fsspec), and the
run config's `storage_options` (set with `set_storage_options`, per scheme). Nothing here
stores or prints a secret.

An object appears whole or not at all: a write is one PUT (or one completed multipart
upload) of a finished local file, so a reader never sees half an object. Stores have no
rename; callers that publish several objects order them so that the last one written (a
manifest) commits the rest."""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO

import fsspec

from pipeline.storage.retry import (
    ATTEMPTS,
    StorageError,
    StorageUnavailable,
    add_retries,
    backoff,
    retried,
    transient,
)
from pipeline.storage.urls import is_url, join, scheme

MIB = 1024 * 1024
BLOCK_BYTES = 4 * MIB
"""How much one ranged GET fetches when a file is read: small enough that a part of a big
JSON Lines file reads little past its end, large enough that requests stay few."""
PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs"}
"""The fsspec implementation each scheme needs, for the message when it is missing."""

_options: dict[str, dict[str, Any]] = {}


def set_storage_options(options: Mapping[str, Mapping[str, Any]]) -> None:
    """Options per scheme (`{"s3": {"endpoint_url": ...}}`) passed to the fsspec filesystem
    of every later call in this process (and in workers forked after it)."""
    _options.clear()
    _options.update({key.lower(): dict(value) for key, value in options.items()})


def storage_options(url: str) -> dict[str, Any]:
    """The options set for the scheme of `url` (a copy)."""
    return dict(_options.get(scheme(url), {}))


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem of `url` and the path it names there. Raises StorageError
    when the scheme is unknown or its package is not installed."""
    try:
        fs, path = fsspec.core.url_to_fs(url, **storage_options(url))
    except ImportError as err:
        package = PACKAGES.get(scheme(url), "the fsspec implementation of this scheme")
        raise StorageError(
            f"{url}: reading {scheme(url)}:// needs {package} (pip install "
            f"'mms-pipeline[s3]' for s3://, or pip install {package}): {err}"
        ) from None
    except ValueError as err:
        raise StorageError(f"{url}: not a storage URL mms can open ({err})") from None
    return fs, str(path)


def _url_of(url: str, path: str) -> str:
    """The URL of `path` on the filesystem of `url`, with `url`'s own scheme."""
    return f"{scheme(url)}://{path.lstrip('/')}" if is_url(url) else path


# ----------------------------------------------------------------------- questions


def exists(url: str) -> bool:
    """Whether a file or a non-empty prefix is at `url`."""
    fs, path = filesystem(url)
    fs.invalidate_cache(path)
    return bool(retried(lambda: fs.exists(path), f"cannot look up {url}"))


def isfile(url: str) -> bool:
    """Whether a file (an object) is at `url`."""
    fs, path = filesystem(url)
    return bool(retried(lambda: fs.isfile(path), f"cannot look up {url}"))


def isdir(url: str) -> bool:
    """Whether `url` is a folder (a prefix with objects under it, or a bucket)."""
    fs, path = filesystem(url)
    fs.invalidate_cache(path)
    return bool(retried(lambda: fs.isdir(path), f"cannot look up {url}"))


def size(url: str) -> int:
    """The size of the file at `url`, in bytes."""
    fs, path = filesystem(url)
    return int(retried(lambda: fs.size(path), f"cannot look up {url}"))


def stamp(url: str) -> dict[str, Any]:
    """What tells a version of the file at `url` from another: its size and the store's
    tag of its content (an ETag, a generation, a checksum), else its modification time."""
    fs, path = filesystem(url)
    fs.invalidate_cache(path)
    info = retried(lambda: fs.info(path), f"cannot look up {url}")
    for key in ("ETag", "etag", "generation", "md5Hash", "crc32c", "blob_id", "last_commit"):
        if info.get(key) is not None:
            return {"size": int(info["size"]), "tag": str(info[key])}
    modified = info.get("LastModified") or info.get("mtime") or info.get("last_modified")
    return {"size": int(info["size"]), "modified": str(modified)}


def find(url: str) -> list[str]:
    """The URLs of every file under the prefix `url`, sorted."""
    fs, path = filesystem(url)
    fs.invalidate_cache()
    found = retried(lambda: fs.find(path), f"cannot list {url}")
    return sorted(_url_of(url, p) for p in found)


def find_sizes(url: str) -> dict[str, int]:
    """The size of every file under the prefix `url`, by URL, sorted by URL."""
    fs, path = filesystem(url)
    fs.invalidate_cache()
    found = retried(lambda: fs.find(path, detail=True), f"cannot list {url}")
    sizes = {_url_of(url, p): int(info.get("size") or 0) for p, info in found.items()}
    return dict(sorted(sizes.items()))


def listdir(url: str) -> list[str]:
    """The URLs of the files directly in the folder `url`, sorted."""
    fs, path = filesystem(url)
    fs.invalidate_cache(path)
    entries = retried(lambda: fs.ls(path, detail=True), f"cannot list {url}")
    return sorted(_url_of(url, e["name"]) for e in entries if e.get("type") == "file")


def glob(pattern: str) -> list[tuple[str, bool]]:
    """The (URL, is a folder) of every match of `pattern` (`*`, `?`, `[...]`, `**`
    recursing), sorted by URL."""
    fs, path = filesystem(pattern)
    fs.invalidate_cache()
    found = retried(lambda: fs.glob(path, detail=True), f"cannot list {pattern}")
    return sorted(
        (_url_of(pattern, name), info.get("type") == "directory") for name, info in found.items()
    )


# ----------------------------------------------------------------------- reading


class _RetryingReader(io.RawIOBase):
    """A file of a store as a raw, seekable stream whose reads are retried on transient
    errors (the file is opened again and read from where the failed read began)."""

    def __init__(self, url: str, *, block_size: int = BLOCK_BYTES) -> None:
        super().__init__()
        self._url = url
        self._fs, self._path = filesystem(url)
        self._block_size = block_size
        self._position = 0
        self._file: Any = None
        self._size: int | None = None
        self._reopen()

    def _reopen(self) -> None:
        if self._file is not None:
            with suppress(Exception):
                self._file.close()

        def opened() -> Any:
            handle = self._fs.open(
                self._path, "rb", block_size=self._block_size, cache_type="readahead"
            )
            handle.seek(self._position)
            return handle

        self._file = retried(opened, f"cannot open {self._url}")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._position
        elif whence == io.SEEK_END:
            if self._size is None:
                self._size = int(retried(lambda: self._fs.size(self._path), self._url))
            offset += self._size
        self._position = max(0, offset)
        self._file.seek(self._position)
        return self._position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        attempt = 0
        while True:
            try:
                data = self._file.read(len(view))
                break
            except FileNotFoundError:
                raise
            except Exception as err:
                if not transient(err):
                    raise StorageError(f"cannot read {self._url}: {err}") from err
                if attempt + 1 >= ATTEMPTS:
                    raise StorageUnavailable(
                        f"cannot read {self._url}: the store kept failing ({err}) after "
                        f"{ATTEMPTS} tries; run the command again to resume"
                    ) from err
                add_retries(1)
                time.sleep(backoff(attempt))
                attempt += 1
                self._reopen()
        view[: len(data)] = data
        self._position += len(data)
        return len(data)

    def close(self) -> None:
        if self._file is not None:
            with suppress(Exception):
                self._file.close()
        super().close()


def open_raw(url: str) -> io.RawIOBase:
    """The file at `url` as a raw seekable binary stream, reads retried."""
    return _RetryingReader(url)


def open_read(url: str, buffer_bytes: int = MIB) -> BinaryIO:
    """The file at `url` as a buffered binary stream (seekable), reads retried. Raises
    FileNotFoundError when there is none, StorageError when it cannot be opened."""
    return io.BufferedReader(_RetryingReader(url), buffer_bytes)


def read_bytes(url: str) -> bytes:
    """The whole file at `url`."""
    fs, path = filesystem(url)
    return bytes(retried(lambda: fs.cat_file(path), f"cannot read {url}"))


def sha256(url: str) -> str:
    """The sha256 hex digest of the file at `url`, streamed."""
    digest = hashlib.sha256()
    with open_read(url) as stream:
        while block := stream.read(MIB):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, local: str | os.PathLike[str]) -> None:
    """Copy the file at `url` to the local path `local` (its folder made), atomically: the
    local file appears only once whole."""
    target = Path(local)
    target.parent.mkdir(parents=True, exist_ok=True)
    fs, path = filesystem(url)
    temp = target.with_name(f".{target.name}.{os.getpid()}.download.tmp")
    try:
        retried(lambda: fs.get_file(path, str(temp)), f"cannot download {url}")
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


# ----------------------------------------------------------------------- writing


def upload(local: str | os.PathLike[str], url: str) -> None:
    """Publish the local file `local` at `url`: one object, whole or not at all."""
    fs, path = filesystem(url)
    retried(lambda: fs.put_file(str(local), path), f"cannot upload {local} to {url}")


def write_bytes(url: str, data: bytes) -> None:
    """Write `data` as the file at `url` (one object, whole or not at all)."""
    fs, path = filesystem(url)
    retried(lambda: fs.pipe_file(path, data), f"cannot write {url}")


@contextmanager
def open_write(url: str) -> Iterator[BinaryIO]:
    """A binary stream whose bytes become the file at `url` when the block completes
    (written to a local temp file, then uploaded whole, retried); nothing appears when
    the block raises."""
    with tempfile.NamedTemporaryFile(prefix="mms-upload-", suffix=".tmp") as temp:
        yield temp  # type: ignore[misc]
        temp.flush()
        upload(temp.name, url)


def remove(url: str) -> None:
    """Remove the file at `url`; a missing one is no error."""
    fs, path = filesystem(url)

    def removed() -> None:
        with suppress(FileNotFoundError):
            fs.rm_file(path)

    retried(removed, f"cannot remove {url}")


def remove_tree(url: str) -> None:
    """Remove every file under the prefix `url`."""
    for found in find(url):
        remove(found)


def upload_tree(folder: str | os.PathLike[str], url: str, last: Callable[[str], bool]) -> None:
    """Upload every file under the local `folder` to the same places under `url`, those
    for which `last(relative path)` holds after all the others."""
    root = Path(folder)
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    for relative in [f for f in files if not last(f)] + [f for f in files if last(f)]:
        upload(root / relative, join(url, relative))
