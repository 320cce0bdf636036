"""What is proven about a tokenizer file, remembered per sha256 of its bytes in the user's
cache: the checks a run makes of the same tokenizer every time (is it a tokenizer at all,
does tiktoken give exactly its ids, does the shipped tokenizer give the MMS tokens their
ids) take seconds on a 128k vocabulary and never change for the same bytes. An entry holds
for the library versions that proved it; it is written whole (a temporary file renamed),
so runs at the same time can share the cache. Beside the facts, a file made from a tokenizer
with some settings (the augmented tokenizer.json an output ships) is kept whole, its sha256
a fact of the entry. MMS_CACHE_DIR names the folder (`off`: none), else
$XDG_CACHE_HOME/mms-pipeline or ~/.cache/mms-pipeline."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from contextlib import suppress
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, TypeVar

import orjson

from pipeline.user_cache import cache_folder
from pipeline.version import __version__

PROOFS = "2"
"""What the checks prove; a change to them (2: the SentencePiece family of tiktoken recipes)
makes every entry proven again."""
Value = TypeVar("Value")


@cache
def proving_versions() -> dict[str, str]:
    """The versions whose code proved a fact: another version proves it again."""
    found = {"mms-pipeline": __version__, "proofs": PROOFS}
    for name in ("tokenizers", "tiktoken"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def remembered(sha256: str, fact: str, prove: Callable[[], Value]) -> Value:
    """The value of `fact` for the tokenizer file whose bytes hash to `sha256`: from the
    cache, or `prove()` (JSON data; an exception is not remembered) and kept."""
    folder = cache_folder()
    if folder is None:
        return prove()
    path = folder / "tokenizers" / f"{sha256}.json"
    facts = _facts(path)
    if fact in facts:
        return facts[fact]  # type: ignore[no-any-return]
    value = prove()
    _keep(path, {**_facts(path), fact: value})  # read again: another run may have added some
    return value


def kept_file(
    sha256: str, name: str, settings: Any, make: Callable[[], bytes]
) -> tuple[bytes, str]:
    """The bytes `make()` makes of the tokenizer file whose bytes hash to `sha256` with
    `settings` (JSON data naming everything else they depend on), and their sha256: from
    the cache, or made and kept. The entry of the file remembers the sha256 of what was
    kept, so kept bytes are used only when they are whole and these versions made them."""
    folder = cache_folder()
    if folder is None:
        data = make()
        return data, hashlib.sha256(data).hexdigest()
    key = hashlib.sha256(orjson.dumps([name, settings], option=orjson.OPT_SORT_KEYS))
    fact = f"{name}:{key.hexdigest()[:32]}"
    entry = folder / "tokenizers" / f"{sha256}.json"
    kept = folder / "tokenizers" / f"{sha256}.{key.hexdigest()[:32]}.{name}"
    expected = _facts(entry).get(fact)
    if isinstance(expected, str):
        try:
            data = kept.read_bytes()
        except OSError:
            pass
        else:
            if hashlib.sha256(data).hexdigest() == expected:
                return data, expected
    data = make()
    digest = hashlib.sha256(data).hexdigest()
    if _write_whole(kept, data):
        _keep(entry, {**_facts(entry), fact: digest})
    return data, digest


_read: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}
"""The facts of each entry this process read, with the entry's (mtime, size) then: a load
asks for several facts of one entry (megabytes of JSON for a large vocabulary)."""


def _facts(path: Path) -> dict[str, Any]:
    """The facts of a cache entry proven by these versions; none when there is no such
    entry, it is unreadable, or other versions proved it."""
    try:
        stat = path.stat()
        seen = _read.get(path)
        if seen is not None and seen[0] == (stat.st_mtime_ns, stat.st_size):
            return seen[1]
        entry = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if not isinstance(entry, dict) or entry.get("versions") != proving_versions():
        return {}
    facts = entry.get("facts")
    found = facts if isinstance(facts, dict) else {}
    _read[path] = ((stat.st_mtime_ns, stat.st_size), found)
    return found


def _keep(path: Path, facts: dict[str, Any]) -> None:
    """Write the entry whole."""
    _write_whole(path, orjson.dumps({"versions": proving_versions(), "facts": facts}))


def _write_whole(path: Path, data: bytes) -> bool:
    """Write `data` whole (a temporary file renamed); whether it was written. A cache that
    cannot be written is no cache (never an error)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temp, path)
    except OSError:
        with suppress(OSError):
            os.unlink(temp)
        return False
    return True
