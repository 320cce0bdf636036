"""Stable hashes of threads: which sample and split a thread lands in, and the key exact
dedup compares. They depend on the thread alone, never on order or the number of workers."""

from __future__ import annotations

import hashlib

import orjson

from pipeline.mms import Thread

_HASH_SPACE = float(2**64)


def stable_fraction(key: str, seed: int = 0) -> float:
    """A number in [0, 1) from a hash of `key` and `seed`: the same thread always lands in
    the same sample and split, whatever the order or the number of workers."""
    digest = hashlib.blake2b(f"{seed}\n{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _HASH_SPACE


def content_key(thread: Thread) -> int:
    """The dedup key: a 64-bit hash of the normalized messages and settings (id and meta
    aside)."""
    body = [m.to_dict() for m in thread.messages]
    settings = thread.settings.to_dict() if thread.settings else None
    digest = hashlib.blake2b(orjson.dumps([body, settings]), digest_size=8).digest()
    return int.from_bytes(digest, "big")
