"""Tell object-store URLs (`s3://bucket/key`, `gs://`, `az://`, `hf://` ...) from local
paths, and join and split them as strings, without touching any store.

A URL is `scheme://rest`; everything else is a local path. `hf:ORG/NAME` (one colon, no
slashes) names a Hugging Face dataset read through `datasets` (pipeline/sources/hf.py),
while `hf://datasets/ORG/NAME/file.jsonl` is a file of a Hub repository read as any URL.

>>> is_url("s3://bucket/data/a.jsonl"), is_url("data/a.jsonl"), is_url("hf:org/name")
(True, False, False)
>>> join("s3://bucket/out/", "data", "train.parquet")
's3://bucket/out/data/train.parquet'
>>> name("s3://bucket/out/data/train.parquet"), parent("s3://bucket/out/data/x")
('train.parquet', 's3://bucket/out/data')
"""

from __future__ import annotations

import os
import re

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path: str | object) -> bool:
    """Whether `path` is a URL (`scheme://...`) rather than a local path."""
    return isinstance(path, str) and _URL.match(path) is not None


def scheme(url: str) -> str:
    """The scheme of a URL (`s3`), lower-cased."""
    return url.split("://", 1)[0].lower()


def join(url: str, *names: str) -> str:
    """`url` with `names` appended, one slash between each (names may hold slashes)."""
    joined = url.rstrip("/")
    for piece in names:
        piece = piece.strip("/")
        if piece:
            joined = f"{joined}/{piece}"
    return joined


def name(url: str) -> str:
    """The last component of a URL (a file's name)."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def parent(url: str) -> str:
    """The URL of the folder (prefix) holding `url`."""
    head, tail = url.rstrip("/").rsplit("/", 1)
    return head if not head.endswith(":/") else f"{head}/{tail}"


def relative(url: str, root: str) -> str:
    """`url` relative to the prefix `root` (which it must lie under)."""
    base = root.rstrip("/") + "/"
    if not url.startswith(base):
        raise ValueError(f"{url} is not under {root}")
    return url[len(base) :]


class StoredPath(str):
    """A URL that names places below it as a Path does (`out / "data" / name`), so that
    code naming the files of an output folder serves a stored one too.

    >>> out = StoredPath("s3://bucket/out")
    >>> out / "reports" / "lint.md", out.name
    ('s3://bucket/out/reports/lint.md', 'out')
    """

    __slots__ = ()

    def __truediv__(self, other: str | os.PathLike[str]) -> StoredPath:
        return StoredPath(join(self, os.fspath(other)))

    @property
    def name(self) -> str:
        """The last component (the folder's name)."""
        return name(self)

    @property
    def parent(self) -> StoredPath:
        """The prefix holding this one."""
        return StoredPath(parent(self))

    def relative_to(self, other: str | os.PathLike[str]) -> StoredPath:
        """This URL relative to the URL `other`; ValueError when it is not under it (as
        Path.relative_to: never under a local path)."""
        return StoredPath(relative(self, os.fspath(other)))
