"""What a run's driver remembers of every thread (pipeline/dedup/first_seen.py): the same
answers as a dict, whether the keys were prefetched, recent or settled into the sorted
arrays, in about 16 bytes a settled key; and the duplicates dedup and MMS501 find do not
depend on when keys settle."""

from __future__ import annotations

import tracemalloc
from unittest.mock import patch

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pipeline.dedup import first_seen
from pipeline.dedup.first_seen import CompactTexts, FirstSeen
from pipeline.lint.config import LintConfig
from pipeline.lint.diagnostic import ThreadRef
from pipeline.lint.linter import Linter

KEYS = st.one_of(st.integers(0, 40), st.integers(0, (1 << 64) - 1), st.just((1 << 64) - 1))
BATCHES = st.lists(st.lists(st.tuples(KEYS, st.booleans()), max_size=12), max_size=25)


@given(BATCHES)
def test_first_seen_answers_as_a_dict_does(batches):
    """Batches of keys, some prefetched (the batch's lookup at once) and some not (searched
    alone), keys settling every 3: each key's first value, and None for a new one."""
    model: dict[int, int] = {}
    with patch.object(first_seen, "SETTLE_KEYS", 3):
        seen = FirstSeen()
        for batch in batches:
            seen.prefetch(key for key, prefetched in batch if prefetched)
            for key, _ in batch:
                assert seen.get(key) == model.get(key)
                if key not in model:
                    model[key] = len(model)
                    seen.add(key, model[key])
        assert len(seen) == len(model)


@given(st.lists(st.one_of(st.none(), st.text(), st.just("\ud800 lone surrogate"))))
def test_compact_texts_give_back_what_they_kept(texts):
    kept = CompactTexts()
    numbers = [kept.add(text) for text in texts]
    assert [kept.get(number) for number in numbers] == texts


def test_a_settled_key_costs_about_sixteen_bytes():
    """200,000 keys in batches, as a run's driver adds them: what the structure holds,
    traced, against a dict's ~100 bytes a key (entry, key and value objects)."""
    keys = np.random.default_rng(7).integers(0, 1 << 63, 200_000, dtype=np.int64).tolist()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        seen = FirstSeen()
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]
            seen.prefetch(batch)
            for value, key in enumerate(batch, start):
                if seen.get(key) is None:
                    seen.add(key, value)
        seen.prefetch([])
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(seen) == len(set(keys))
    assert held / len(keys) < 24, held / len(keys)


def _duplicate_findings(keys: list[int], batch: int | None) -> list[str]:
    """MMS501's findings over threads with these content keys, fed in batches of `batch`
    rows (each prefetched first) or one by one without prefetching."""
    linter = Linter(LintConfig(select=("MMS501",)))
    found = []
    step = batch or len(keys) or 1
    for start in range(0, len(keys), step):
        rows = keys[start : start + step]
        if batch is not None:
            linter.prefetch([[key] for key in rows])
        for number, key in enumerate(rows, start):
            ref = ThreadRef(f"t{number}", "data.jsonl", f"data.jsonl:{number + 1}")
            found += [d.message for d in linter.observe([key], ref)]
    return found


@given(st.lists(st.integers(0, 12), max_size=60), st.integers(1, 9))
def test_mms501_finds_the_same_duplicates_however_its_keys_settle(keys, batch):
    with patch.object(first_seen, "SETTLE_KEYS", 2):
        assert _duplicate_findings(keys, batch) == _duplicate_findings(keys, None)


def test_mms501_places_fit_the_arrays_however_many_files():
    """A place is a file's number and a line in one integer, while the files fit 63 bits
    with the line (past that, and for any other locator, its text): every place reads back
    as its locator."""
    from pipeline.lint.rules import dataset

    refs = [
        ThreadRef("t", f"f{number}.jsonl", f"f{number}.jsonl:{line}")
        for number in range(5)
        for line in (1, (1 << 40) - 1, 1 << 40)
    ] + [ThreadRef("t", "x.jsonl", "x.jsonl:²"), ThreadRef("t", None, None)]
    with patch.object(dataset._Places, "_FILE_BITS", 1):
        places = dataset._Places()
        kept = [places.keep(ref) for ref in refs]
    assert all(-(1 << 63) <= place < 1 << 63 for place in kept)
    assert [places.where(place) for place in kept] == [ref.locator or "thread t" for ref in refs]
    assert sum(place >= 0 for place in kept) == 2 * 2  # two files numbered, two lines each
