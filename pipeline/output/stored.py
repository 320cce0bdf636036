"""An output folder on an object store (`s3://bucket/prefix`, DESIGN §7): claimed as a local
one is, written locally, and published by uploading, the manifest last.

A store has no rename, so a publication cannot swap a staged folder into place. Instead:
1. `.work/publishing.json` records what is being published (the new files and the earlier
   output's, with their sizes): a claim during or after an interrupted publication knows
   they are ours;
2. the earlier `manifest.json` and card (`README.md`) are removed: from here on readers
   refuse the folder (they trust only what a manifest lists: `mms verify`, the loader,
   `stored_data_files` for `datasets.load_dataset`);
3. every new file but the card and the manifest is uploaded under its final name (each
   object whole or not at all), then the earlier files this output does not write are removed;
4. the card, then the manifest: the commit marker. Then `.work/publishing.json` goes.
A killed publication leaves no manifest; running the command again publishes in full (the
run's finished parts are still in `.work/`, so nothing is mapped again).

Claiming refuses, as locally, a non-empty prefix no mms command wrote (no manifest of ours,
no `.work/MMS_WORK_DIR`), and files in the managed places that mms did not write, unless
--overwrite. A stored file counts as the one a manifest lists when its size is the listed
one (hashing it again would read the whole output back; `mms verify` checks every sha256).
Stores have no locks: two runs must not write the same prefix at once.

The output is written in a local scratch folder (`OutputFolder`: staging, the local work
directory), one per prefix under the system's temp folder (TMPDIR/mms-stored-outputs; it
must hold the output once). It is locked while a run uses it (a second run of the same
prefix on this machine is refused), emptied when a run starts (the store holds what lasts:
a killed run leaves at most this one folder behind) and removed when it ends."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import Any

import orjson

from pipeline import storage
from pipeline.output.files import file_sha256
from pipeline.output.folder import (
    MANAGED_DIRS,
    MANAGED_FILES,
    WORK_DIR,
    WORK_MARKER,
    OutputFolder,
    OutputFolderError,
    Publication,
)
from pipeline.output.hub import OutputNotFound
from pipeline.output.manifest import CARD_FILE, MANIFEST_FILE, MANIFEST_FORMAT, listed_files

SCRATCH_DIR = "mms-stored-outputs"
"""Under the system's temp folder: one scratch folder per stored output being written."""
INTENT_FILE = "publishing.json"
"""Under `.work/`: the files a publication under way writes and replaces."""
SHOWN = 5

_held: list[int] = []
"""Scratch-folder locks this process holds; a forked worker closes its copies."""


def _close_held_in_child() -> None:
    for descriptor in _held:
        with suppress(OSError):
            os.close(descriptor)
    _held.clear()


os.register_at_fork(after_in_child=_close_held_in_child)


class StoredOutput:
    """A claimed output folder on an object store; use as a context manager.

    `local` is the local OutputFolder the run writes (its `staging` and `work`); `publish()`
    uploads what was staged there; `finish()` removes the store's work directory."""

    def __init__(self, url: str, *, overwrite: bool = False) -> None:
        self.url = url.rstrip("/")
        self.root = storage.StoredPath(self.url)
        self.overwrite = overwrite
        self.work_url = storage.join(self.url, WORK_DIR)
        self.earlier: dict[str, Any] | None = None
        """The manifest an earlier mms command published here, if any."""
        self.unchanged: set[str] = set()
        """Files an earlier output (or an interrupted publication) listed, still in place."""
        self.foreign: list[str] = []
        """Files in the managed places mms did not write (only with --overwrite)."""
        self._sizes: dict[str, int] = {}
        """The size of every file in the managed places when the prefix was claimed."""
        key = hashlib.sha256(self.url.encode("utf-8")).hexdigest()[:24]
        self._scratch = Path(tempfile.gettempdir()) / SCRATCH_DIR / key
        self.local = OutputFolder(self._scratch / "output")
        self._lock: int | None = None

    def __enter__(self) -> StoredOutput:
        self._take_scratch()
        try:
            self.claim()
            self.local.__enter__()
        except BaseException:
            self._drop_scratch()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        try:
            self.local.__exit__(exc_type, *rest)
        finally:
            self._drop_scratch()

    def _take_scratch(self) -> None:
        """Lock this prefix's scratch folder and empty it (what a killed run left)."""
        self._scratch.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self._scratch.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise OutputFolderError(
                f"{self.url} is being written by another mms command; wait for it to end"
            ) from None
        self._lock = descriptor
        _held.append(descriptor)
        shutil.rmtree(self._scratch, ignore_errors=True)

    def _drop_scratch(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)
        if self._lock is not None:
            with suppress(ValueError):
                _held.remove(self._lock)
            os.close(self._lock)
            self._lock = None

    # ----------------------------------------------------------------- claiming

    def claim(self) -> None:
        """Check the prefix (see the module docstring) and mark its work directory ours.
        Raises OutputFolderError, or StorageUnavailable when the store keeps failing."""
        try:
            found = storage.find_sizes(self.url)
        except FileNotFoundError as err:  # the bucket itself: mms never creates one
            raise OutputFolderError(f"{self.url}: {err} (create it first)") from None
        except storage.StorageUnavailable:
            raise  # the store, not the prefix: the command stops and is run again
        except storage.StorageError as err:
            raise OutputFolderError(f"{self.url} cannot be used: {err}") from None
        sizes = {storage.relative(url, self.url): size for url, size in found.items()}
        self.earlier = _own_manifest(self.url) if MANIFEST_FILE in sizes else None
        ours = self.earlier is not None or f"{WORK_DIR}/{WORK_MARKER}" in sizes
        if not ours and sizes and not self.overwrite:
            raise OutputFolderError(_not_ours_message(self.url, sorted(sizes)))
        listed = [_listed_sizes(self.earlier)] if self.earlier is not None else []
        intent_name = f"{WORK_DIR}/{INTENT_FILE}"
        if ours and intent_name in sizes:  # a publication was interrupted: its files and
            intent = orjson.loads(storage.read_bytes(storage.join(self.url, intent_name)))
            listed += [intent.get("files", {}), intent.get("earlier", {})]  # those it replaced
        managed = {path: size for path, size in sizes.items() if _managed(path)}
        self.unchanged = {
            path for path, size in managed.items() if any(each.get(path) == size for each in listed)
        }
        self._sizes = managed
        self.foreign = [
            path
            for path in managed
            if path not in self.unchanged and not (path == MANIFEST_FILE and self.earlier)
        ]
        if self.foreign and not self.overwrite:
            raise OutputFolderError(
                f"{self.url} holds files not written by mms, or changed since: "
                f"{_shown(self.foreign)}; mms would replace or remove them. Move them away, "
                "or pass --overwrite to let it"
            )
        storage.write_bytes(
            storage.join(self.work_url, WORK_MARKER), b"mms-pipeline work directory\n"
        )

    # ----------------------------------------------------------------- publishing

    def publish(self) -> Publication:
        """Publish the staged output (see the module docstring): files under their final
        names, the earlier output's leftovers removed, the card and the manifest last."""
        self.local.publish()  # staging -> the local folder (new and empty: nothing removed)
        root = self.local.root
        new = {
            path.relative_to(root).as_posix(): path.stat().st_size
            for path in sorted(root.rglob("*"))
            if path.is_file() and path.relative_to(root).parts[0] != WORK_DIR
        }
        # the earlier files still in place: those of the earlier manifest, and those an
        # interrupted publication had listed (a manifest may be gone by now)
        intent = {"files": new, "earlier": {path: self._sizes[path] for path in self.unchanged}}
        intent_url = storage.join(self.work_url, INTENT_FILE)
        storage.write_bytes(intent_url, orjson.dumps(intent, option=orjson.OPT_SORT_KEYS))
        storage.remove(storage.join(self.url, MANIFEST_FILE))  # readers refuse from here
        storage.remove(storage.join(self.url, CARD_FILE))
        result = Publication(taken_over=list(self.foreign))
        for path in self.foreign:
            storage.remove(storage.join(self.url, path))
        last = (CARD_FILE, MANIFEST_FILE)
        for path in new:
            if path not in last:
                storage.upload(root / path, storage.join(self.url, path))
        for path in sorted(self.unchanged - set(new)):
            storage.remove(storage.join(self.url, path))
            result.removed.append(path)
        for path in last:
            if path in new:
                storage.upload(root / path, storage.join(self.url, path))
        storage.remove(intent_url)
        self.earlier = _own_manifest(self.url)
        self.unchanged, self.foreign, self._sizes = set(new), [], dict(new)
        return result

    def finish(self) -> None:
        """Remove the store's work directory (the output is complete)."""
        storage.remove_tree(self.work_url)


def fetch_stored_output(url: str, cache: Path | None = None) -> Path:
    """A local copy of the output published under `url`: its manifest and exactly the files
    it lists, each checked against its sha256, in a folder named by the manifest's own hash
    under `cache` (default: `outputs/` of the mms cache, MMS_CACHE_DIR, else a temp
    folder), so a copy is fetched once and never mixes two publications. Raises
    OutputNotFound when the prefix holds no manifest of ours (nothing published, or a
    publication under way or interrupted) or a listed file is not as listed."""
    url = url.rstrip("/")
    try:
        data = storage.read_bytes(storage.join(url, MANIFEST_FILE))
    except FileNotFoundError:
        raise OutputNotFound(
            f"{url} holds no {MANIFEST_FILE}: nothing is published there (or a publication "
            "is under way, or was interrupted: run it again to finish it)"
        ) from None
    except storage.StorageError as err:
        raise OutputNotFound(str(err)) from None
    try:
        manifest = orjson.loads(data)
    except orjson.JSONDecodeError:
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise OutputNotFound(f"{url}/{MANIFEST_FILE} is not the manifest of an mms output")
    folder = (cache or _cache_root()) / hashlib.sha256(data).hexdigest()[:32]
    target = folder / MANIFEST_FILE
    if target.is_file() and target.read_bytes() == data:
        return folder
    for path, digest in listed_files(manifest).items():
        pieces = path.split("/")
        if not _managed(path) or ".." in pieces or "" in pieces:
            raise OutputNotFound(f"{url}/{MANIFEST_FILE} lists {path}, outside an output")
        local = folder / path
        if local.is_file() and file_sha256(local) == digest:
            continue
        try:
            storage.download(storage.join(url, path), local)
        except (FileNotFoundError, storage.StorageError) as err:
            reason = f"{url}/{path}, which its manifest lists, cannot be read: {err}"
            raise OutputNotFound(reason) from None
        if file_sha256(local) != digest:
            local.unlink()
            raise OutputNotFound(
                f"{url}/{path} is not the file its manifest lists (changed since it was "
                "published, or a publication is under way)"
            )
    temp = folder / f".{MANIFEST_FILE}.{os.getpid()}.tmp"
    temp.write_bytes(data)
    os.replace(temp, target)  # last: a copy with its manifest is whole
    return folder


def published_data_files(url: str) -> dict[str, list[str]]:
    """The shard URLs of each split that the manifest under `url` lists, for
    `datasets.load_dataset("parquet", data_files=..., storage_options=...)`: exactly the
    published files, never a shard of a publication under way. Raises OutputNotFound
    when the prefix holds no manifest of ours."""
    url = url.rstrip("/")
    try:
        manifest = orjson.loads(storage.read_bytes(storage.join(url, MANIFEST_FILE)))
    except (FileNotFoundError, orjson.JSONDecodeError):
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise OutputNotFound(
            f"{url} holds no {MANIFEST_FILE} of an mms output: nothing is published there "
            "(or a publication is under way, or was interrupted: run it again to finish it)"
        )
    return {
        split: [storage.join(url, str(shard["path"])) for shard in entry.get("shards") or []]
        for split, entry in (manifest.get("splits") or {}).items()
    }


def _cache_root() -> Path:
    from pipeline.user_cache import cache_folder

    base = cache_folder()
    return (base if base is not None else Path(tempfile.gettempdir()) / "mms-cache") / "outputs"


def _managed(path: str) -> bool:
    parts = path.split("/")
    return path in MANAGED_FILES or (parts[0] in MANAGED_DIRS and len(parts) > 1)


def _own_manifest(url: str) -> dict[str, Any] | None:
    """The manifest mms published under `url`, None when there is none or it is not ours."""
    try:
        manifest = orjson.loads(storage.read_bytes(storage.join(url, MANIFEST_FILE)))
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        return None
    return manifest


def _listed_sizes(manifest: dict[str, Any]) -> dict[str, int]:
    """Every file a manifest publishes besides itself, with its size in bytes."""
    listed: dict[str, int] = {}
    for split in (manifest.get("splits") or {}).values():
        for shard in split.get("shards") or []:
            listed[str(shard.get("path"))] = int(shard.get("bytes", -1))
    for entry in [*(manifest.get("files") or []), manifest.get("card") or {}]:
        if entry:
            listed[str(entry.get("path"))] = int(entry.get("bytes", -1))
    return listed


def _shown(paths: list[str]) -> str:
    head = ", ".join(paths[:SHOWN])
    return head + (f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else "")


def _not_ours_message(url: str, entries: list[str]) -> str:
    return (
        f"{url} is not empty ({_shown(entries)}) and no mms command wrote it (it holds no "
        f"mms {MANIFEST_FILE}); mms writes only into an empty prefix or its own output: "
        "choose another, or pass --overwrite to let mms replace and remove what is in its "
        f"places there ({', '.join((*MANAGED_DIRS, *MANAGED_FILES))}; anything else is kept)"
    )
