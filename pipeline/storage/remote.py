"""Files on object stores through fsspec (s3fs for `s3://`, gcsfs for `gs://`, adlfs for
`az://`, huggingface_hub for `hf://`): open for reading, publish a local file, list a
prefix, expand a glob. Every call goes through `_on_store`: its filesystem made with the
timeouts of pipeline/storage/retry.py (`filesystem`, pipeline/storage/clients.py), retried
on transient errors, and a failure becomes a StorageError naming the URL and what happened
(a store that stops answering: "no answer within N s, M tries"), never a client's own
exception.

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
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from pipeline.storage.clients import try_once, with_client_options
from pipeline.storage.retry import StorageError, limits, retried
from pipeline.storage.urls import is_url, join, scheme

T = TypeVar("T")

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
    """The fsspec filesystem of `url` (its requests bounded by the storage limits, tried
    once each: pipeline/storage/clients.py) and the path it names there. Raises
    StorageError when the scheme is unknown or its package is not installed."""
    import fsspec  # only where a URL is opened: a local run never loads it (nor asyncio)

    try:
        options = with_client_options(scheme(url), limits(), storage_options(url))
        fs, path = fsspec.core.url_to_fs(url, **options)
    except ImportError as err:
        package = PACKAGES.get(scheme(url), "the fsspec implementation of this scheme")
        raise StorageError(
            f"{url}: reading {scheme(url)}:// needs {package} (pip install "
            f"'mms-pipeline[s3]' for s3://, or pip install {package}): {err}"
        ) from None
    except ValueError as err:
        raise StorageError(f"{url}: not a storage URL mms can open ({err})") from None
    try_once(fs)
    return fs, str(path)


def _on_store(what: str, url: str, action: Callable[[Any, str], T]) -> T:
    """`action(filesystem, path)` for `url`, retried: the way every call reaches a store,
    so that each has the timeouts, the tries and an error naming `url` (`what` it did)."""
    fs, path = filesystem(url)
    return retried(lambda: action(fs, path), f"{what} {url}")


def _fresh(fs: Any, path: str | None = None) -> Any:
    """`fs` with what it listed before forgotten (of `path`, or all): a listing must see
    what other processes wrote since."""
    fs.invalidate_cache(path)
    return fs


def _url_of(url: str, path: str) -> str:
    """The URL of `path` on the filesystem of `url`, with `url`'s own scheme."""
    return f"{scheme(url)}://{path.lstrip('/')}" if is_url(url) else path


# ----------------------------------------------------------------------- questions


def exists(url: str) -> bool:
    """Whether a file or a non-empty prefix is at `url`."""
    return bool(_on_store("cannot look up", url, lambda fs, path: _fresh(fs, path).exists(path)))


def isfile(url: str) -> bool:
    """Whether a file (an object) is at `url`."""
    return bool(_on_store("cannot look up", url, lambda fs, path: fs.isfile(path)))


def isdir(url: str) -> bool:
    """Whether `url` is a folder (a prefix with objects under it, or a bucket)."""
    return bool(_on_store("cannot look up", url, lambda fs, path: _fresh(fs, path).isdir(path)))


def size(url: str) -> int:
    """The size of the file at `url`, in bytes."""
    return int(_on_store("cannot look up", url, lambda fs, path: fs.size(path)))


def stamp(url: str) -> dict[str, Any]:
    """What tells a version of the file at `url` from another: its size and the store's
    tag of its content (an ETag, a generation, a checksum), else its modification time."""
    info = _on_store("cannot look up", url, lambda fs, path: _fresh(fs, path).info(path))
    for key in ("ETag", "etag", "generation", "md5Hash", "crc32c", "blob_id", "last_commit"):
        if info.get(key) is not None:
            return {"size": int(info["size"]), "tag": str(info[key])}
    modified = info.get("LastModified") or info.get("mtime") or info.get("last_modified")
    return {"size": int(info["size"]), "modified": str(modified)}


def find(url: str) -> list[str]:
    """The URLs of every file under the prefix `url`, sorted."""
    found = _on_store("cannot list", url, lambda fs, path: _fresh(fs).find(path))
    return sorted(_url_of(url, p) for p in found)


def find_sizes(url: str) -> dict[str, int]:
    """The size of every file under the prefix `url`, by URL, sorted by URL."""
    found = _on_store("cannot list", url, lambda fs, path: _fresh(fs).find(path, detail=True))
    sizes = {_url_of(url, p): int(info.get("size") or 0) for p, info in found.items()}
    return dict(sorted(sizes.items()))


def listdir(url: str) -> list[str]:
    """The URLs of the files directly in the folder `url`, sorted."""
    entries = _on_store("cannot list", url, lambda fs, path: _fresh(fs, path).ls(path, detail=True))
    return sorted(_url_of(url, e["name"]) for e in entries if e.get("type") == "file")


def glob(pattern: str) -> list[tuple[str, bool]]:
    """The (URL, is a folder) of every match of `pattern` (`*`, `?`, `[...]`, `**`
    recursing), sorted by URL."""
    found = _on_store("cannot list", pattern, lambda fs, path: _fresh(fs).glob(path, detail=True))
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
        self._block_size = block_size
        self._position = 0
        self._file: Any = None
        self._size: int | None = None
        _on_store("cannot open", url, self._opened)

    def _opened(self, fs: Any, path: str) -> Any:
        """The file open at the current position (opened again after a failed read)."""
        if self._file is None:
            handle = fs.open(path, "rb", block_size=self._block_size, cache_type="readahead")
            handle.seek(self._position)
            self._file = handle
        return self._file

    def _read(self, fs: Any, path: str, count: int) -> bytes:
        """Up to `count` bytes at the current position; a failed read closes the file."""
        try:
            return bytes(self._opened(fs, path).read(count))
        except BaseException:
            self._drop()
            raise

    def _drop(self) -> None:
        """Close the open file, if any, so that the next read opens it again."""
        if self._file is not None:
            with suppress(Exception):
                self._file.close()
            self._file = None

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
                self._size = int(_on_store("cannot look up", self._url, lambda fs, p: fs.size(p)))
            offset += self._size
        self._position = max(0, offset)
        if self._file is not None:
            self._file.seek(self._position)
        return self._position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        data = _on_store("cannot read", self._url, lambda fs, p: self._read(fs, p, len(view)))
        view[: len(data)] = data
        self._position += len(data)
        return len(data)

    def close(self) -> None:
        self._drop()
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
    return bytes(_on_store("cannot read", url, lambda fs, path: fs.cat_file(path)))


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
    temp = target.with_name(f".{target.name}.{os.getpid()}.download.tmp")
    try:
        _on_store("cannot download", url, lambda fs, path: fs.get_file(path, str(temp)))
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


# ----------------------------------------------------------------------- writing


def upload(local: str | os.PathLike[str], url: str) -> None:
    """Publish the local file `local` at `url`: one object, whole or not at all."""
    _on_store(f"cannot upload {local} to", url, lambda fs, path: fs.put_file(str(local), path))


def write_bytes(url: str, data: bytes) -> None:
    """Write `data` as the file at `url` (one object, whole or not at all)."""
    _on_store("cannot write", url, lambda fs, path: fs.pipe_file(path, data))


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

    def removed(fs: Any, path: str) -> None:
        with suppress(FileNotFoundError):
            fs.rm_file(path)

    _on_store("cannot remove", url, removed)


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
