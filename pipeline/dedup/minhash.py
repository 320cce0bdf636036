"""Near-duplicate detection: MinHash signatures of a thread's word shingles, and an LSH
index that finds an earlier thread whose estimated Jaccard similarity reaches a threshold.

Everything is deterministic: words and shingles are hashed with blake2b and fixed
multipliers (never Python's per-process `hash`), the permutations come from a fixed seed,
and the index answers in reading order (the first thread of a cluster is kept).
Signatures are computed where the threads are read (in parallel); the index lives in the
pass over the rows whose keys repeat (a run's driver) and holds, per kept thread, its signature and one entry per band."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache

import numpy as np

from pipeline.dedup.keys import comparable_messages
from pipeline.mms import Thread

_WORD = re.compile(r"\w+")
_SEED = 0x6D6D_735F_6E65_6172  # "mms_near"
_CHUNK = 4096
"""Shingles hashed per step: bounds the temporary (chunk x permutations) matrix."""
_SHINGLE_BASE = np.uint64(0x9E37_79B9_7F4A_7C15)


@dataclass(frozen=True, slots=True)
class NearDedupSettings:
    """`threshold`: the estimated Jaccard similarity of word shingles from which a thread
    is a near-duplicate of an earlier one; `shingle`: words per shingle; `permutations`:
    MinHash signature length (more: finer estimates, more memory)."""

    threshold: float = 0.8
    shingle: int = 5
    permutations: int = 128


def thread_text(thread: Thread) -> str:
    """The text near-dedup compares: every message's role and content (the converter's
    declaration message by what it declares), and the settings' format names."""
    parts = []
    for message in comparable_messages(thread):
        parts.append(str(message.get("role", "")))
        parts.append(str(message.get("content", message.get("declares", ""))))
    if thread.settings is not None:
        parts.extend(f.name for f in thread.settings.formats)
    return "\n".join(parts)


@cache
def _permutations(count: int) -> tuple[np.ndarray, np.ndarray]:
    """Multipliers (odd) and offsets of the multiply-add-shift hash family, one per
    signature slot, from the fixed seed."""
    generator = np.random.Generator(np.random.PCG64(_SEED))
    multipliers = generator.integers(1, 2**63, size=count, dtype=np.uint64) * np.uint64(2) + 1
    offsets = generator.integers(0, 2**63, size=count, dtype=np.uint64)
    return multipliers.astype(np.uint64), offsets


def _word_hashes(text: str) -> np.ndarray:
    words = _WORD.findall(text.lower())
    distinct = {word: i for i, word in enumerate(dict.fromkeys(words))}
    table = np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "big")
            for w in distinct
        ),
        dtype=np.uint64,
        count=len(distinct),
    )
    return table[np.fromiter((distinct[w] for w in words), dtype=np.int64, count=len(words))]


def shingle_hashes(text: str, shingle: int) -> np.ndarray:
    """The distinct 64-bit hashes of the text's `shingle`-word windows (lowercased `\\w+`
    words); a text shorter than one window is one shingle of all its words."""
    words = _word_hashes(text)
    if len(words) == 0:
        return np.zeros(1, dtype=np.uint64)
    width = min(shingle, len(words))
    count = len(words) - width + 1
    hashes = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for offset in range(width):
            hashes = hashes * _SHINGLE_BASE + words[offset : offset + count]
    return np.unique(hashes)


def signature(text: str, settings: NearDedupSettings) -> np.ndarray:
    """The MinHash signature (uint32, one per permutation) of the text's shingles."""
    multipliers, offsets = _permutations(settings.permutations)
    minimum = np.full(settings.permutations, np.iinfo(np.uint32).max, dtype=np.uint64)
    hashes = shingle_hashes(text, settings.shingle)
    with np.errstate(over="ignore"):
        for start in range(0, len(hashes), _CHUNK):
            chunk = hashes[start : start + _CHUNK, None]
            permuted = (chunk * multipliers + offsets) >> np.uint64(32)
            np.minimum(minimum, permuted.min(axis=0), out=minimum)
    return minimum.astype(np.uint32)


def thread_signature(thread: Thread, settings: NearDedupSettings) -> bytes:
    """A thread's signature as bytes (little-endian uint32s), to store beside the thread."""
    return signature(thread_text(thread), settings).astype("<u4").tobytes()


def group_signature(signatures: list[bytes]) -> bytes:
    """The signature of a group of threads, compared as one text: the slot-wise minimum of
    its members' signatures is the MinHash of the union of their shingles, so a pair is
    near another pair when their texts together are, and never near one of its own sides."""
    stacked = np.stack([np.frombuffer(sig, dtype="<u4") for sig in signatures])
    minimum: np.ndarray = stacked.min(axis=0)
    return minimum.astype("<u4").tobytes()


def lsh_bands(permutations: int, threshold: float) -> tuple[int, int]:
    """(bands, rows per band) for `permutations` slots whose LSH candidate curve
    1 - (1 - s^rows)^bands best separates similarities below and above `threshold`
    (the least false-positive plus false-negative area)."""
    grid = np.linspace(0.0, 1.0, 201)
    best: tuple[float, int, int] | None = None
    for rows in range(1, permutations + 1):
        bands = permutations // rows
        candidate = 1 - (1 - grid**rows) ** bands
        below, above = grid < threshold, grid >= threshold
        error = float(np.mean(candidate * below) + np.mean((1 - candidate) * above))
        if best is None or error < best[0]:
            best = (error, bands, rows)
    assert best is not None
    return best[1], best[2]


class NearDuplicateIndex:
    """The kept threads' signatures, banded for lookup. `check(sig)` answers with the
    ordinal of an earlier kept thread whose estimated similarity reaches the threshold
    (checking the first thread of every band bucket the signature falls in), or None
    after adding the signature as a new kept thread."""

    def __init__(self, settings: NearDedupSettings):
        self.settings = settings
        self.bands, self.rows = lsh_bands(settings.permutations, settings.threshold)
        self.buckets: list[dict[bytes, int]] = [{} for _ in range(self.bands)]
        self.signatures: list[np.ndarray] = []

    def band_keys(self, packed: bytes) -> list[bytes]:
        """The signature's slots, band by band: two signatures are compared only when they
        share one (in the same band)."""
        width = self.rows * 4
        return [packed[band * width : (band + 1) * width] for band in range(self.bands)]

    def check(self, packed: bytes) -> int | None:
        sig = np.frombuffer(packed, dtype="<u4")
        if len(sig) != self.settings.permutations:
            raise ValueError(
                f"a signature of {len(sig)} slots does not fit an index of "
                f"{self.settings.permutations}"
            )
        band_keys = self.band_keys(packed)
        needed = self.settings.threshold * len(sig)
        for band, key in enumerate(band_keys):
            earlier = self.buckets[band].get(key)
            if earlier is not None and np.count_nonzero(self.signatures[earlier] == sig) >= needed:
                return earlier
        ordinal = len(self.signatures)
        self.signatures.append(sig)
        for band, key in enumerate(band_keys):
            self.buckets[band].setdefault(key, ordinal)
        return None
