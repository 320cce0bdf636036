"""Where a media's bytes are and how they are read: a `path` inside the folder of the input
file its record came from or, not there, inside one of the media roots in order (the
symlink rules of folder inputs, pipeline/sources/paths.py, within the folder it was found
in),
`data` decoded from base64, a `url` only when fetching is on (http(s) through urllib with a
timeout, object stores through pipeline.storage), each read no further than the size
limit. A media that cannot be read raises MediaProblem with its quarantine code; one that
is not read (a URL with fetching off) gives NotRead with why."""

from __future__ import annotations

import base64
import binascii
import os
import posixpath
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from pipeline import storage
from pipeline.media.settings import MediaRoot, MediaSettings
from pipeline.mms import Media
from pipeline.sources.paths import is_hf_input, leads_outside, refusal
from pipeline.sources.stdin import STDIN

CHUNK = 1 << 16
"""Bytes a fetch reads at a time, checking its deadline between reads."""
STORE_SCHEMES = ("s3", "gs", "gcs", "az", "abfs", "hf")
"""URL schemes fetched through the object stores (pipeline.storage)."""
WEB_SCHEMES = ("http", "https")


class MediaProblem(Exception):
    """A media that fails its check: the quarantine code and why (what was looked at)."""

    def __init__(self, code: str, why: str):
        super().__init__(why)
        self.code = code
        self.why = why


@dataclass(frozen=True, slots=True)
class NotRead:
    """A media left unread, and why (said in the thread's `meta.notes`)."""

    why: str


@dataclass(frozen=True, slots=True)
class Read:
    """A media's bytes, and the media root its path was found under (None: beside its
    input file, or not a path)."""

    data: bytes
    root: MediaRoot | None = None


def reference(media: Media) -> str:
    """How a message names the media: `path 'a.png'`, `url '...'`, `data (N base64 chars)`."""
    if media.path is not None:
        return f"path {media.path!r}"
    if media.url is not None:
        return f"url {media.url!r}"
    return f"data ({len(media.data or ''):,} base64 characters)"


def read_media(
    media: Media, input_path: str, settings: MediaSettings, roots: tuple[MediaRoot, ...] = ()
) -> Read | NotRead:
    """The bytes of `media`, a record of the input file `input_path` (as it is read: a
    local path, a store URL, an `hf:` dataset), or NotRead; raises MediaProblem. A local
    path not beside the input file is looked for under each of `roots` in order."""
    if media.data is not None:
        return Read(_decoded(media.data, settings.max_bytes))
    if media.path is not None:
        return _from_path(media.path, input_path, settings, roots)
    assert media.url is not None
    return _from_url(media.url, input_path, settings, roots)


def _decoded(data: str, limit: int) -> bytes:
    text = "".join(data.split())
    if len(text) // 4 * 3 > limit + 2:
        raise MediaProblem("media_too_large", f"about {len(text) // 4 * 3:,} bytes > {limit:,}")
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        try:  # the URL-safe alphabet
            decoded = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError) as err:
            raise MediaProblem("media_corrupt", f"the data is not base64 ({err})") from None
    if len(decoded) > limit:
        raise MediaProblem("media_too_large", f"{len(decoded):,} bytes > {limit:,}")
    return decoded


def _from_path(
    path: str, input_path: str, settings: MediaSettings, roots: tuple[MediaRoot, ...]
) -> Read | NotRead:
    if storage.is_url(input_path):
        return Read(_from_store_folder(path, input_path, settings))
    if input_path == STDIN or is_hf_input(input_path):
        if not roots:
            return NotRead("a path in a record of standard input or a Hub dataset has no folder")
        return _searched(path, None, roots, settings.max_bytes)
    return _searched(path, os.path.dirname(input_path) or ".", roots, settings.max_bytes)


def _searched(path: str, folder: str | None, roots: tuple[MediaRoot, ...], limit: int) -> Read:
    """A local file beside the input (`folder`) or, not there, under the first of `roots`
    that holds it; each place by its own containment rule, so a path that leads out of a
    folder (`..`, a symlink) is never taken from that folder."""
    if not roots:
        assert folder is not None
        return Read(_local(os.path.join(folder, path), folder, limit))
    places: list[tuple[str, MediaRoot | None]] = [] if folder is None else [(folder, None)]
    places += [(root.path, root) for root in roots]
    looked: list[str] = []
    escaped: list[str] = []
    for place, root in places:
        found = os.path.join(place, path)
        if leads_outside(found, place):
            if os.path.exists(found):
                escaped.append(found)
            continue
        looked.append(found)
        if os.path.lexists(found):
            return Read(_local(found, place, limit), root)
    if escaped or not looked:
        where = "the input's folder and every media root" if folder else "every media root"
        shown = escaped[0] if escaped else path
        raise MediaProblem("media_outside_input", f"{shown} lies outside {where}")
    raise MediaProblem("media_missing", "no file " + ", ".join(looked))


def _local(found: str, folder: str, limit: int) -> bytes:
    """A local file that must lie inside `folder` (symlinks followed to where they lead)."""
    if leads_outside(found, folder):
        raise MediaProblem("media_outside_input", f"{found} lies outside the input's folder")
    if not os.path.exists(found):
        raise MediaProblem("media_missing", f"no file {found}")
    refused = refusal(found, folder)
    if refused is not None:
        raise MediaProblem("media_unreadable", f"{found}: {refused}")
    size = os.path.getsize(found)
    if size > limit:
        raise MediaProblem("media_too_large", f"{found} holds {size:,} bytes > {limit:,}")
    try:
        with open(found, "rb") as handle:
            return handle.read(limit + 1)
    except OSError as err:
        raise MediaProblem("media_unreadable", f"{found}: {err.strerror or err}") from None


def _from_store_folder(path: str, input_url: str, settings: MediaSettings) -> bytes:
    """A relative path beside a stored input file: a key under its prefix, never above."""
    relative = posixpath.normpath(path)
    if path.startswith("/") or relative == ".." or relative.startswith("../"):
        raise MediaProblem("media_outside_input", f"{path} lies outside the input's folder")
    return _stored(storage.join(storage.parent(input_url), relative), settings)


def _stored(url: str, settings: MediaSettings) -> bytes:
    """An object's bytes, no more than max_bytes, read whole within the timeout (a single
    stalled request ends at the store client's own read timeout)."""
    limit, deadline = settings.max_bytes, time.monotonic() + settings.timeout
    try:
        if not storage.isfile(url):
            raise MediaProblem("media_missing", f"no object {url}")
        size = storage.size(url)
        if size > limit:
            raise MediaProblem("media_too_large", f"{url} holds {size:,} bytes > {limit:,}")
        with storage.open_read(url) as handle:
            return _read_within(handle.read, limit, deadline, url, settings.timeout)
    except MediaProblem:
        raise
    except Exception as err:  # the store's client errors
        raise MediaProblem("media_unreadable", f"{url}: {err}") from None


def _read_within(
    read: Callable[[int], bytes], limit: int, deadline: float, what: str, timeout: float
) -> bytes:
    """Up to limit + 1 bytes from `read`, a chunk at a time, given up once `deadline`
    passes (a server that sends a byte now and then never holds a worker longer)."""
    chunks: list[bytes] = []
    taken = 0
    while taken <= limit:
        chunk = read(min(CHUNK, limit + 1 - taken))
        if not chunk:
            break
        chunks.append(chunk)
        taken += len(chunk)
        if time.monotonic() > deadline:
            raise MediaProblem("media_unreadable", f"{what} took more than {timeout:g} s")
    return b"".join(chunks)


def _from_url(
    url: str, input_path: str, settings: MediaSettings, roots: tuple[MediaRoot, ...]
) -> Read | NotRead:
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme == "file":
        local = urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
        if storage.is_url(input_path) or is_hf_input(input_path) or input_path == STDIN:
            if not roots or storage.is_url(input_path):
                raise MediaProblem("media_outside_input", f"{url} is not beside the input")
            return _searched(local, None, roots, settings.max_bytes)
        return _searched(local, os.path.dirname(input_path) or ".", roots, settings.max_bytes)
    if scheme not in WEB_SCHEMES + STORE_SCHEMES:
        return NotRead(f"a {scheme or 'schemeless'} URL is never fetched")
    if not settings.fetch:
        return NotRead("a URL, and fetching is off (--fetch-media)")
    if scheme in STORE_SCHEMES:
        return Read(_stored(url, settings))
    return Read(_fetched(url, settings))


def _fetched(url: str, settings: MediaSettings) -> bytes:
    """An http(s) URL's body, no more than max_bytes, whole within the timeout (each
    socket operation, and the body read between chunks)."""
    limit, deadline = settings.max_bytes, time.monotonic() + settings.timeout
    request = urllib.request.Request(url, headers={"User-Agent": "mms-pipeline"})
    try:
        with urllib.request.urlopen(request, timeout=settings.timeout) as response:
            declared = response.headers.get("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                raise MediaProblem("media_too_large", f"{url} declares {int(declared):,} bytes")
            body = _read_within(response.read1, limit, deadline, url, settings.timeout)
    except MediaProblem:
        raise
    except urllib.error.HTTPError as err:
        code = "media_missing" if err.code in (404, 410) else "media_unreadable"
        raise MediaProblem(code, f"{url}: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise MediaProblem("media_unreadable", f"{url}: {err}") from None
    if len(body) > limit:
        raise MediaProblem("media_too_large", f"{url} sends more than {limit:,} bytes")
    return body
