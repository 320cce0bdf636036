"""The `features` of a dataset card's YAML (card.py): each Arrow column of the shards as
the Hugging Face `datasets` feature it loads as (Value dtypes, lists, structs)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pipeline.mms.media_columns import (
    FEATURE_TYPES,
    FRAMES_COLUMN,
    MEDIA_SHARD_COLUMNS,
    column_type,
)

_MEDIA_KINDS = {column: kind for kind, column in MEDIA_SHARD_COLUMNS.items()}
_DTYPES = {
    pa.string(): "string",
    pa.large_string(): "large_string",
    pa.bool_(): "bool",
    pa.int8(): "int8",
    pa.int16(): "int16",
    pa.int32(): "int32",
    pa.int64(): "int64",
    pa.uint8(): "uint8",
    pa.uint16(): "uint16",
    pa.uint32(): "uint32",
    pa.uint64(): "uint64",
    pa.float16(): "float16",
    pa.float32(): "float32",
    pa.float64(): "float64",
    pa.binary(): "binary",
    pa.large_binary(): "large_binary",
}
"""Arrow types and the `datasets` Value dtype each one is declared as."""


def hf_features(schema: pa.Schema) -> list[dict[str, Any]]:
    """The `dataset_info.features` YAML list for `schema`, as `datasets` reads it: lists of
    structs as `list: [fields]`, other lists as `sequence:`, structs as `struct: [fields]`."""
    return _fields(list(schema), "")


def _fields(fields: list[pa.Field], where: str) -> list[dict[str, Any]]:
    return [{"name": f.name, **_media_or_feature(f, where)} for f in fields]


def _media_or_feature(field: pa.Field, where: str) -> dict[str, Any]:
    """A shard's media column (`images`, `audios`, `videos`: pipeline/mms/media_columns.py)
    as a list of `datasets` Image, Audio or Video (decoded on access, as TRL reads them),
    `video_frames` as a list of lists of Image (each video's frames); any other column as
    its Arrow type."""
    kind = _MEDIA_KINDS.get(field.name) if not where else None
    if kind is not None and field.type == column_type(field.name):
        return {"list": FEATURE_TYPES[kind].lower()}
    if not where and field.name == FRAMES_COLUMN and field.type == column_type(FRAMES_COLUMN):
        return {"list": {"list": FEATURE_TYPES["image"].lower()}}
    return _feature(field.type, f"{where}{field.name}")


def _feature(arrow_type: pa.DataType, where: str) -> dict[str, Any]:
    if arrow_type in _DTYPES:
        return {"dtype": _DTYPES[arrow_type]}
    if pa.types.is_struct(arrow_type):
        return {"struct": _fields(_children(arrow_type), f"{where}.")}
    if pa.types.is_list(arrow_type):
        item = arrow_type.value_type
        if pa.types.is_struct(item):
            # `sequence:` of a struct means a struct of lists to `datasets`; `list:` keeps
            # the Arrow layout, a list of structs
            return {"list": _fields(_children(item), f"{where}[].")}
        inner = _feature(item, f"{where}[]")
        return {"sequence": inner["dtype"] if list(inner) == ["dtype"] else inner}
    raise ValueError(f"column {where}: Arrow type {arrow_type} has no dataset card feature")


def _children(struct: pa.StructType) -> list[pa.Field]:
    return [struct.field(i) for i in range(struct.num_fields)]
