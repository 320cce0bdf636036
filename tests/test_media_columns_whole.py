"""The shard's media columns and content parts are built as whole columns for the rows
without media and a row at a time for the others: for any rows (media or none, markers
or none, null messages and contents, sliced tables), the result is the row-by-row one."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.mms.arrow import MEDIA_ARROW_TYPE, MEDIA_COLUMN, MESSAGE_ARROW_TYPE
from pipeline.mms.media_columns import (
    _content_parts_row_by_row,
    _media_columns_row_by_row,
    with_content_parts,
    with_media_columns,
)
from pipeline.mms.validation import MEDIA_MARKER

PLACEHOLDERS = {"image": 900, "audio": 901, "video": 902}
KINDS = ("image", "audio", "video")
TEXT = st.text(alphabet=st.sampled_from(["a", "é", "。", " ", MEDIA_MARKER]), max_size=6)
MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]),
        "content": st.none() | TEXT,
        "format": st.none(),
        "end_turn": st.none() | st.booleans(),
        "name": st.none(),
        "weight": st.none() | st.just(1.0),
    }
)
MEDIA = st.fixed_dictionaries(
    {
        "message": st.integers(0, 3),
        "kind": st.sampled_from(KINDS),
        "path": st.sampled_from(["media/a.png", "media/b.wav"]),
        "url": st.none(),
        "data": st.none(),
        "mime": st.none(),
        "frames": st.none(),
    }
)
ROW = st.fixed_dictionaries(
    {
        "id": st.uuids().map(str),
        "messages": st.none() | st.lists(MESSAGE, max_size=4),
        "input_ids": st.lists(st.sampled_from([1, 2, 900, 901, 902]), max_size=8),
        MEDIA_COLUMN: st.none() | st.lists(MEDIA, max_size=3),
    }
)
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("messages", pa.list_(MESSAGE_ARROW_TYPE)),
        ("input_ids", pa.list_(pa.int32())),
        (MEDIA_COLUMN, pa.list_(MEDIA_ARROW_TYPE)),
    ]
)


def _table(rows: list[dict], cut: int) -> pa.Table:
    """`rows` as a table, sliced from `cut` (a slice's offsets do not start at 0)."""
    return pa.Table.from_pylist(rows, SCHEMA).slice(min(cut, len(rows)))


@settings(max_examples=150, deadline=None)
@given(st.lists(ROW, max_size=12), st.integers(0, 3))
def test_content_parts_are_the_row_by_row_ones(rows, cut):
    table = _table(rows, cut)
    assert with_content_parts(table, PLACEHOLDERS).to_pylist() == (
        _content_parts_row_by_row(table, PLACEHOLDERS).to_pylist()
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(ROW, max_size=12), st.integers(0, 3))
def test_media_columns_are_the_row_by_row_ones(rows, cut):
    table = _table(rows, cut)
    whole = with_media_columns(table, KINDS, PLACEHOLDERS)
    assert whole.schema == _media_columns_row_by_row(table, KINDS, PLACEHOLDERS).schema
    assert whole.to_pylist() == _media_columns_row_by_row(table, KINDS, PLACEHOLDERS).to_pylist()
