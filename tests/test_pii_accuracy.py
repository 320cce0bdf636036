"""Floors on the pii stage's measures (tests/curation_accuracy_pii.py): every planted
secret redacted whole, no piece of one left readable, no decoy redacted, no thread left
contradicting itself; and every family's credential, generated inside random text,
redacted whole."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.curation.pii import SECRET, Redactor, find_pii, may_hold_pii
from tests.curation_accuracy_pii import contradicts_itself, figures, outcomes, partial
from tests.pii_families import FAMILIES


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return figures()


def test_every_planted_secret_is_redacted_whole(rows):
    secrets = {o.record["planted"][0]["family"] for o in outcomes() if o.record["planted"]}
    recalls = {r["name"]: r["value"] for r in rows if r["measure"] == "recall"}
    assert set(FAMILIES) <= secrets
    assert {name: recalls[name] for name in FAMILIES if recalls[name] < 1.0} == {}


def test_no_partial_redaction(rows):
    assert [r for r in rows if r["measure"] == "partial" and r["value"] > 0] == []


def test_personal_data_is_found(rows):
    recalls = {r["name"]: r["value"] for r in rows if r["measure"] == "recall"}
    kinds = ("EMAIL", "PHONE_US", "PHONE_GB", "PHONE_00", "PHONE_FR", "IP", "CREDIT_CARD")
    assert {kind: recalls[kind] for kind in kinds if recalls[kind] < 1.0} == {}


def test_no_decoy_and_nothing_unplanted_is_redacted(rows):
    precision = {r["name"]: r["value"] for r in rows if r["measure"] == "precision"}
    assert precision["decoys"] == 1.0
    assert {kind: value for kind, value in precision.items() if value < 1.0} == {}


def test_no_thread_contradicts_itself():
    assert [o.record["id"] for o in outcomes() if contradicts_itself(o)] == []


PROSE = st.text(
    st.sampled_from(list("abcdefghij KLMNOP0123456789.,:;=-_/\"'()[]{}\n")), max_size=30
)


@settings(max_examples=400, deadline=None)
@given(
    family=st.sampled_from(sorted(FAMILIES)),
    seed=st.integers(0, 2**32),
    before=PROSE,
    after=PROSE,
    gap=st.sampled_from([" ", "\n", ": ", " `", "\t", "(", "'", '"', "="]),
)
def test_a_credential_in_any_text_is_redacted_whole(family, seed, before, after, gap):
    """A credential of any family, written between random text, leaves no piece of its
    secret readable, and the scan that spares texts flags it."""
    text_value, secret = FAMILIES[family](random.Random(seed))
    text = f"{before}{gap}{text_value}{gap[::-1]}{after}"
    redacted = Redactor().redact(text)
    assert secret not in redacted
    assert not partial(secret, [text], [redacted]), (text, redacted)
    assert may_hold_pii([text]) == [True]


@settings(max_examples=100, deadline=None)
@given(family=st.sampled_from(sorted(FAMILIES)), seed=st.integers(0, 2**32))
def test_a_credential_is_one_secret_span(family, seed):
    """The credential alone is one span of kind SECRET covering all of its secret."""
    text_value, secret = FAMILIES[family](random.Random(seed))
    spans = [s for s in find_pii(text_value) if s.kind == SECRET]
    start = text_value.index(secret)
    assert any(s.start <= start and start + len(secret) <= s.end for s in spans), spans
