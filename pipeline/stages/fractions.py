"""Stable fractions: which sample and split a thread lands in. They depend on the key
alone (pipeline.dedup.split_group), never on order or the number of workers."""

from __future__ import annotations

import hashlib

_HASH_SPACE = float(2**64)


def stable_fraction(key: str, seed: int = 0) -> float:
    """A number in [0, 1) from a hash of `key` and `seed`: the same key always lands in
    the same sample and split, whatever the order or the number of workers."""
    digest = hashlib.blake2b(f"{seed}\n{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _HASH_SPACE
