"""The media columns of a run's shards (DESIGN §7): beside `input_ids`, a row
whose thread holds media has its media in order, one list per kind, as TRL's VLM trainers
and LLaMA-Factory read them (`images`, `audios`, `videos`), each cell a Hugging Face
`Image`/`Audio`/`Video` cell, `{bytes, path}`; and the thread's `media` column (DESIGN §3:
each media's message, kind, source and mime), from which a row reads back to its thread.
A video given as its frame images has its frames in `video_frames` beside `videos`.
Only the shards of a run whose rows hold media have them, so text-only shards keep their
schema and bytes."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.mms.arrow import MEDIA_COLUMN, MESSAGE_ARROW_TYPE, THREAD_MEDIA_ARROW_SCHEMA
from pipeline.mms.validation import FRAMES, MEDIA_MARKER

MEDIA_CELL = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
"""A media as `datasets`' Image, Audio and Video features store one: its bytes (a run
embeds each media it checked, `stages.media.embed`; base64 `data` always), and its path
(as the thread holds it: the content address `media/<sha256>.<ext>` once a run has read
it) or its URL."""
MEDIA_SHARD_COLUMNS: dict[str, str] = {"image": "images", "audio": "audios", "video": "videos"}
"""Each media kind's shard column, named as TRL and LLaMA-Factory name theirs."""
FRAMES_COLUMN = "video_frames"
"""The sibling of `videos` for videos given as their frame images: one entry per video
placeholder, as `videos` has, the video's frames in order (`List(Image())` cells) where
the video is a frame list (its `videos` entry null), null where it is one file."""
FRAMES_CELL = pa.list_(MEDIA_CELL)
"""A `video_frames` entry: a video's frames, each an Image cell `{bytes, path}`."""
COLUMN_KINDS: dict[str, str] = {
    **{c: k for k, c in MEDIA_SHARD_COLUMNS.items()},
    FRAMES_COLUMN: "video",
}
"""Each media list column -> the kind whose placeholders its entries stand at, in column
order (`video_frames` right after `videos`)."""
FEATURE_TYPES: dict[str, str] = {"image": "Image", "audio": "Audio", "video": "Video"}
"""Each kind's Hugging Face `datasets` feature type (the card declares a list of it)."""


def media_fields(kinds: Iterable[str]) -> list[pa.Field]:
    """The shard fields of a run whose rows of threads hold media of `kinds`: the
    thread's `media` column, then `kind_fields`."""
    return [THREAD_MEDIA_ARROW_SCHEMA.field(MEDIA_COLUMN), *kind_fields(kinds)]


def kind_fields(kinds: Iterable[str]) -> list[pa.Field]:
    """One list column per kind of `kinds`, in MEDIA_SHARD_COLUMNS order: the media
    columns of every row kind (an objective's rows and packed sequences have no thread,
    so no `media` column)."""
    held = set(kinds)
    return [
        pa.field(column, column_type(column))
        for column, kind in COLUMN_KINDS.items()
        if kind in held
    ]


def column_type(column: str) -> pa.DataType:
    """The Arrow type of a media list column: a list of cells (`video_frames`: of frame
    lists)."""
    return pa.list_(FRAMES_CELL if column == FRAMES_COLUMN else MEDIA_CELL)


def kind_columns(names: Iterable[str]) -> list[str]:
    """The media list columns among the column `names`, in COLUMN_KINDS order."""
    present = set(names)
    return [column for column in COLUMN_KINDS if column in present]


def media_cell(reference: dict[str, object]) -> dict[str, bytes | str | None] | None:
    """One media (a `media` column entry) as a `{bytes, path}` cell; None for a video
    given as frames (its cells are in `video_frames`: `frames_cell`)."""
    if reference.get(FRAMES):
        return None
    data = reference.get("data")
    if isinstance(data, str):
        return {"bytes": base64.b64decode(data), "path": None}
    path = reference.get("path") or reference.get("url")
    return {"bytes": None, "path": path if isinstance(path, str) else None}


def frames_cell(reference: dict[str, object]) -> list[dict[str, bytes | str | None]] | None:
    """A video given as frames (a `media` column entry) as its `video_frames` entry, one
    Image cell per frame in order; None for a media that is one file."""
    frames = reference.get(FRAMES)
    if not isinstance(frames, list) or not frames:
        return None
    return [cell for frame in frames if (cell := media_cell(frame)) is not None]


def with_media_columns(
    rows: pa.Table, kinds: Sequence[str], placeholder_ids: dict[str, int]
) -> pa.Table:
    """`rows` (with their `media` column) with one list column per kind of `kinds`: each
    row's media of that kind in order, as many as its `input_ids` hold placeholders (a
    truncated row keeps the media whose placeholders it kept, so a processor finds one
    media per placeholder). Only the rows that hold media are built one by one: the
    others get empty lists at once, so a shard with a few media rows costs no more than
    those rows."""
    names = [column for column, kind in COLUMN_KINDS.items() if kind in kinds]
    held = pc.fill_null(pc.list_value_length(rows[MEDIA_COLUMN]), 0).to_numpy()
    with_media = np.flatnonzero(held > 0)
    if len(with_media) == rows.num_rows:
        return _media_columns_row_by_row(rows, kinds, placeholder_ids)
    built = _media_columns_row_by_row(rows.take(pa.array(with_media)), kinds, placeholder_ids)
    for column in names:
        empty = _empty_lists(rows.num_rows, column_type(column))
        rows = rows.append_column(column, _spliced(empty, built[column], with_media))
    return rows


def _media_columns_row_by_row(
    rows: pa.Table, kinds: Sequence[str], placeholder_ids: dict[str, int]
) -> pa.Table:
    """`with_media_columns`, built a row at a time (for rows that hold media)."""
    media = rows[MEDIA_COLUMN].to_pylist()
    ids = rows["input_ids"].to_pylist() if "input_ids" in rows.column_names else None
    kind_of = {number: kind for kind, number in placeholder_ids.items()}
    names = [column for column, kind in COLUMN_KINDS.items() if kind in kinds]
    cell_of = {column: frames_cell if column == FRAMES_COLUMN else media_cell for column in names}
    columns: dict[str, list[Sequence[object]]] = {column: [] for column in names}
    for row, entries in enumerate(media):
        kept: dict[str, int] | None = None
        if ids is not None and ids[row] is not None:
            kept = {kind: 0 for kind in kinds}
            for number in ids[row]:
                if number in kind_of and kind_of[number] in kept:
                    kept[kind_of[number]] += 1
        for column in names:
            kind = COLUMN_KINDS[column]
            cells = [cell_of[column](e) for e in entries or () if e["kind"] == kind]
            columns[column].append(cells if kept is None else cells[: kept[kind]])
    for column in names:
        rows = rows.append_column(column, pa.array(columns[column], column_type(column)))
    return rows


def with_embedded_bytes(rows: pa.Table, read: Callable[[str], bytes | None]) -> pa.Table:
    """`rows` whose media cells without bytes carry `read(path)` (None: left a reference),
    each media column rebuilt; a table without media columns is returned as it is. Called
    on a row group's rows at a time, so a shard's media are never all in memory; a media
    many of them hold (the sides of a pair) is read once."""
    read_once: dict[str, bytes | None] = {}

    def embedded(cell: dict[str, bytes | str | None]) -> dict[str, bytes | str | None]:
        path = cell["path"]
        if cell["bytes"] is not None or not isinstance(path, str):
            return cell
        if path not in read_once:
            read_once[path] = read(path)
        return {"bytes": read_once[path], "path": path}

    def entry(cell: object) -> object:
        if cell is None:
            return None
        if isinstance(cell, list):  # a video's frames
            return [embedded(frame) for frame in cell]
        assert isinstance(cell, dict)
        return embedded(cell)

    for kind_column in kind_columns(rows.column_names):
        cells = [
            None if row is None else [entry(cell) for cell in row]
            for row in rows[kind_column].to_pylist()
        ]
        index = rows.schema.get_field_index(kind_column)
        rows = rows.set_column(index, kind_column, pa.array(cells, column_type(kind_column)))
    return rows


PART_ARROW_TYPE = pa.struct([("type", pa.string()), ("text", pa.string())])
"""A content part as a shard holding media stores it: `{"type": "text", "text"}` or a
media part `{"type": KIND, "text": null}` (its source is in the row's media columns)."""
PARTS_MESSAGE_ARROW_TYPE = pa.struct(
    [
        (field.name, pa.list_(PART_ARROW_TYPE)) if field.name == "content" else field
        for field in MESSAGE_ARROW_TYPE
    ]
)
"""A message of a shard whose rows hold media: its content always a list of parts."""
SPLICED_SLICES = 16
"""A message column whose rows with media are one in this many or fewer is spliced from
slices (the others' content parts are not copied)."""
MESSAGE_COLUMNS = ("messages", "prompt", "chosen", "rejected", "completion")
"""The message columns of the rows of any kind, in the order of their token columns."""
_TOKEN_COLUMNS = ("input_ids", "prompt_ids", "chosen_ids", "rejected_ids", "completion_ids")


def parts_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` with each message column's content as a list of parts (DESIGN §7)."""
    for name in MESSAGE_COLUMNS:
        if name in schema.names:
            index = schema.get_field_index(name)
            schema = schema.set(index, pa.field(name, pa.list_(PARTS_MESSAGE_ARROW_TYPE)))
    return schema


def with_content_parts(rows: pa.Table, placeholder_ids: dict[str, int]) -> pa.Table:
    """`rows` with every message column's content as its list of parts, as chat templates
    and processors read a message (DESIGN §7): text parts, and a media part (its kind) at
    each U+FFFC marker of a message that holds media. Which messages hold which kinds: the
    row's `media` column (rows of threads), else its token columns' placeholders in order
    (an objective's rows, whose message columns follow its token columns). A message
    without media, and a row whose markers and media differ in number, keeps its text as
    one text part (U+FFFC included). Rows without a marker are rewritten as whole
    columns; only those with one are built a row at a time."""
    columns = [name for name in MESSAGE_COLUMNS if name in rows.column_names]
    if not columns:
        return rows
    marked = np.unique(np.concatenate([_rows_with_marker(rows[name]) for name in columns]))
    if len(marked) == rows.num_rows:
        return _content_parts_row_by_row(rows, placeholder_ids)
    built = _content_parts_row_by_row(rows.take(pa.array(marked)), placeholder_ids)
    for name in columns:
        whole = _one_text_part_each(rows[name])
        index = rows.schema.get_field_index(name)
        rows = rows.set_column(index, name, _spliced(whole, built[name], marked))
    return rows


def _rows_with_marker(column: pa.ChunkedArray) -> np.ndarray:
    """The rows of a message column whose messages hold a U+FFFC marker."""
    lists = column.combine_chunks()
    content = pc.struct_field(lists.flatten(), "content")
    found = pc.fill_null(pc.match_substring(content, MEDIA_MARKER), False).to_numpy(
        zero_copy_only=False
    )
    parents = pc.list_parent_indices(lists).to_numpy()
    return np.unique(parents[found]).astype(np.int64)


def _one_text_part_each(column: pa.ChunkedArray) -> pa.Array:
    """A message column with each content as one text part (none: an empty text)."""
    lists = column.combine_chunks()
    messages = lists.flatten()
    count = len(messages)
    text = pc.fill_null(pc.struct_field(messages, "content"), "")
    kind = pa.array(["text"], pa.string()).take(pa.array(np.zeros(count, dtype=np.int64)))
    parts = pa.StructArray.from_arrays([kind, text], fields=list(PART_ARROW_TYPE))
    single = pa.ListArray.from_arrays(pa.array(np.arange(count + 1, dtype=np.int32)), parts)
    fields = list(PARTS_MESSAGE_ARROW_TYPE)
    arrays = [
        single if field.name == "content" else pc.struct_field(messages, field.name)
        for field in fields
    ]
    rebuilt = pa.StructArray.from_arrays(arrays, fields=fields, mask=messages.is_null())
    offsets = pc.subtract(lists.offsets, lists.offsets[0])
    whole = pa.ListArray.from_arrays(offsets, rebuilt, mask=lists.is_null())
    return whole.cast(pa.list_(PARTS_MESSAGE_ARROW_TYPE))


def _content_parts_row_by_row(rows: pa.Table, placeholder_ids: dict[str, int]) -> pa.Table:
    """`with_content_parts`, built a row at a time (for rows whose messages hold a
    marker)."""
    columns = [name for name in MESSAGE_COLUMNS if name in rows.column_names]
    kind_of = {number: kind for kind, number in placeholder_ids.items()}
    tokens = [name for name in _TOKEN_COLUMNS if name in rows.column_names]
    media = rows[MEDIA_COLUMN].to_pylist() if MEDIA_COLUMN in rows.column_names else None
    values = {name: rows[name].to_pylist() for name in columns}
    ids = {name: rows[name].to_pylist() for name in tokens}
    out: dict[str, list[list[dict[str, object]] | None]] = {name: [] for name in columns}
    for row in range(rows.num_rows):
        held = [values[name][row] or [] for name in columns]
        messages = [message for column in held for message in column]
        if media is not None:
            kinds = _kinds_from_media(media[row] or [], len(messages))
        else:
            placed = [kind_of[i] for name in tokens for i in ids[name][row] or [] if i in kind_of]
            kinds = _kinds_from_markers(messages, placed)
        start = 0
        for name, column in zip(columns, held, strict=True):
            if values[name][row] is None:
                out[name].append(None)
            else:
                out[name].append(
                    [
                        _with_parts(message, kinds[start + index])
                        for index, message in enumerate(column)
                    ]
                )
            start += len(column)
    for name in columns:
        index = rows.schema.get_field_index(name)
        array = pa.array(out[name], pa.list_(PARTS_MESSAGE_ARROW_TYPE))
        rows = rows.set_column(index, name, array)
    return rows


def _empty_lists(count: int, kind: pa.DataType) -> pa.Array:
    """`count` empty lists of the list type `kind`."""
    values = pa.array([], kind.value_type)
    return pa.ListArray.from_arrays(pa.array(np.zeros(count + 1, dtype=np.int32)), values).cast(
        kind
    )


def _spliced(
    whole: pa.Array, built: pa.ChunkedArray | pa.Array, rows: np.ndarray
) -> pa.Array | pa.ChunkedArray:
    """`whole` with its entries at `rows` replaced by `built`'s, in order: a few rows as
    chunks between slices of `whole` (nothing copied), many in one take."""
    if isinstance(built, pa.ChunkedArray):
        built = built.combine_chunks()
    built = built.cast(whole.type)
    if len(rows) * SPLICED_SLICES <= len(whole):
        pieces, start = [], 0
        for number, row in enumerate(rows.tolist()):
            pieces += [whole.slice(start, row - start), built.slice(number, 1)]
            start = row + 1
        pieces.append(whole.slice(start))
        return pa.chunked_array([piece for piece in pieces if len(piece)], whole.type)
    order = np.arange(len(whole), dtype=np.int64)
    order[rows] = len(whole) + np.arange(len(rows), dtype=np.int64)
    return pa.concat_arrays([whole, built]).take(pa.array(order))


def _kinds_from_media(entries: list[dict[str, object]], count: int) -> list[list[str]]:
    """Each message's media kinds in order, from a `media` column's entries."""
    kinds: list[list[str]] = [[] for _ in range(count)]
    for entry in entries:
        index = entry["message"]
        if isinstance(index, int) and 0 <= index < count:
            kinds[index].append(str(entry["kind"]))
    return kinds


def _kinds_from_markers(messages: list[dict[str, object]], placed: list[str]) -> list[list[str]]:
    """Each message's media kinds, the `placed` kinds dealt out to the markers in order
    (none when markers and placeholders differ in number)."""
    counts = [_text(message).count(MEDIA_MARKER) for message in messages]
    if sum(counts) != len(placed):
        return [[] for _ in messages]
    kinds: list[list[str]] = []
    for count in counts:
        kinds.append(placed[:count])
        placed = placed[count:]
    return kinds


def _text(message: dict[str, object]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _with_parts(message: dict[str, object], kinds: list[str]) -> dict[str, object]:
    """`message` with its content as parts: one per media kind at its markers (when they
    match in number), text between them; else its text as one part."""
    text = _text(message)
    if not kinds or text.count(MEDIA_MARKER) != len(kinds):
        return {**message, "content": [{"type": "text", "text": text}]}
    pieces = text.split(MEDIA_MARKER)
    parts: list[dict[str, str | None]] = []
    for piece, kind in zip(pieces[:-1], kinds, strict=True):
        if piece:
            parts.append({"type": "text", "text": piece})
        parts.append({"type": kind, "text": None})
    if pieces[-1]:
        parts.append({"type": "text", "text": pieces[-1]})
    return {**message, "content": parts}
