"""Object storage (`s3://`, `gs://`, `az://`, `hf://`) through fsspec: what inputs, outputs
and the work directory need of a store, as small functions that the driver and the workers
call alike. Below sources, output and engine; imports none of them."""

from __future__ import annotations

from pipeline.storage.remote import (
    download,
    exists,
    filesystem,
    find,
    glob,
    isdir,
    isfile,
    listdir,
    open_raw,
    open_read,
    open_write,
    read_bytes,
    remove,
    remove_tree,
    set_storage_options,
    sha256,
    size,
    stamp,
    storage_options,
    upload,
    upload_tree,
    write_bytes,
)
from pipeline.storage.retry import (
    StorageError,
    StorageUnavailable,
    add_retries,
    reset_retry_count,
    retry_count,
)
from pipeline.storage.urls import is_url, join, name, parent, relative, scheme

__all__ = [
    "StorageError",
    "StorageUnavailable",
    "add_retries",
    "download",
    "exists",
    "filesystem",
    "find",
    "glob",
    "is_url",
    "isdir",
    "isfile",
    "join",
    "listdir",
    "name",
    "open_raw",
    "open_read",
    "open_write",
    "parent",
    "read_bytes",
    "relative",
    "remove",
    "remove_tree",
    "reset_retry_count",
    "retry_count",
    "scheme",
    "set_storage_options",
    "sha256",
    "size",
    "stamp",
    "storage_options",
    "upload",
    "upload_tree",
    "write_bytes",
]
