"""Hugging Face datasets as input: `hf:ORG/NAME` (the Hub) or `hf:./dir` (a local dataset
directory), streamed with `datasets.load_dataset(..., streaming=True)`, one record per row.

The source names the dataset, its config when it is not the default one, and the split:
`hf:ORG/NAME[train]` or `hf:ORG/NAME[main/train]` (config names cannot hold `/`); the locator
adds the row number, `hf:ORG/NAME[train]#12`. Rows come in Arrow batches, in the dataset's
file order, so the same dataset and split always give the same records in the same order."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
import pyarrow as pa

from pipeline.hub_ids import repo_id_problem
from pipeline.quarantine import Rejection
from pipeline.sources.jsonable import NotTextError, TooLargeError, to_jsonable
from pipeline.sources.limits import ReadLimits
from pipeline.sources.paths import HF_PREFIX, InputError
from pipeline.sources.record import Record

DEFAULT_SPLIT = "train"
HF_BATCH_ROWS = 1024
"""Rows per Arrow batch taken from the stream: memory holds one batch at a time."""

_LOCAL_PREFIXES = ("/", "./", "../", "~")
_CONVERSION_ERRORS = (pa.ArrowException, ValueError, OverflowError)
_STREAM_ERRORS = (pa.ArrowException, OSError, ValueError)


def dataset_name(spec: str) -> str:
    """The name or directory after `hf:`; raises InputError when it names nothing usable.
    A name starting with `/`, `./`, `../` or `~` is a local directory; any other is a Hub
    id, checked by the Hub's rules (pipeline/hub_ids.py) before `datasets` sees it (one that
    is also a directory here is read from there, as `datasets` does)."""
    name = spec.removeprefix(HF_PREFIX)
    if not name.strip():
        raise InputError(f"{spec}: give a dataset after hf:, e.g. hf:ORG/NAME or hf:./local/dir")
    local = os.path.expanduser(name)
    if os.path.isfile(local):
        raise InputError(f"{spec}: is a file; give it without hf: (files are read directly)")
    if name.startswith(_LOCAL_PREFIXES):
        if not os.path.isdir(local):
            raise InputError(f"{spec}: no such directory")
        return local
    problem = repo_id_problem(name)
    if problem is not None:
        raise InputError(
            f"{spec}: not a Hub dataset id: {problem}; name a Hub dataset hf:ORG/NAME, "
            "a local directory hf:./DIR"
        )
    return local if os.path.isdir(local) else name


def source_label(spec: str, config: str | None, split: str) -> str:
    """`hf:ORG/NAME[split]`, or `hf:ORG/NAME[config/split]` for a config other than default."""
    where = split if config in (None, "default") else f"{config}/{split}"
    return f"{spec}[{where}]"


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _load_problem(spec: str, split: str, config: str | None, err: BaseException) -> InputError:
    """An InputError naming the dataset, config and split, what went wrong, and a way out."""
    from datasets.exceptions import DatasetsError

    chosen = f"split {split!r}" + (f", config {config!r}" if config else "")
    hint = ""
    if isinstance(err, ConnectionError):
        hint = "; the Hub cannot be reached: check the network, or use a local copy (hf:./dir)"
    elif "[" in split:
        hint = "; slices such as train[:10%] cannot be streamed, give a whole split"
    elif config is None and "config" in str(err).lower():
        hint = "; choose a config with --hf-config NAME"
    # datasets' own errors and a missing file say what is wrong; any other is named
    plain = isinstance(err, (DatasetsError, FileNotFoundError, ConnectionError))
    kind = "" if plain else f"{type(err).__name__}: "
    return InputError(f"{spec} ({chosen}): {kind}{_one_line(err)}{hint}")


def _open(spec: str, split: str, config: str | None) -> Any:
    """The streaming dataset for one split; every failure to open it becomes an InputError."""
    import datasets  # imported here: it takes a second and only hf: inputs need it
    from datasets.exceptions import DatasetsError

    name = dataset_name(spec)
    try:
        return datasets.load_dataset(name, name=config, split=split, streaming=True)
    except (OSError, ValueError, RuntimeError, ImportError, DatasetsError) as err:
        raise _load_problem(spec, split, config, err) from None


def _row_or_reason(table: pa.Table, index: int) -> dict[str, Any] | str:
    """One row as Python values, or why a column's value has no Python form."""
    row: dict[str, Any] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        try:
            row[name] = column[index].as_py()
        except _CONVERSION_ERRORS as err:
            return (
                f"column {name!r} ({column.type}) holds a value with no JSON form: "
                f"{type(err).__name__}: {_one_line(err)}"
            )
    return row


def _has_json(type_: pa.DataType) -> bool:
    """Whether the type is, or nests, Arrow's JSON extension type (JSON kept as text)."""
    if isinstance(type_, pa.JsonType):
        return True
    return any(_has_json(type_.field(i).type) for i in range(type_.num_fields))


def _parse_json(value: Any, type_: pa.DataType) -> Any:
    """`value` with the JSON text under every JSON-typed position parsed."""
    if value is None:
        return None
    if isinstance(type_, pa.JsonType):
        return orjson.loads(value)
    if pa.types.is_struct(type_):
        return {key: _parse_json(item, type_.field(key).type) for key, item in value.items()}
    if pa.types.is_map(type_):
        return [(key, _parse_json(item, type_.item_type)) for key, item in value]
    if type_.num_fields == 1:  # list, large list, fixed-size list, list view
        return [_parse_json(item, type_.value_type) for item in value]
    return value


def _with_json_parsed(
    row: dict[str, Any], columns: list[tuple[str, pa.DataType]]
) -> dict[str, Any] | str:
    """The row with its JSON columns parsed (the `datasets` Json feature stores objects of
    mixed shapes as JSON text), or why one of them is not JSON."""
    for name, type_ in columns:
        try:
            row[name] = _parse_json(row[name], type_)
        except orjson.JSONDecodeError as err:
            return f"column {name!r} ({type_}) holds text that is not JSON: {err}"
    return row


def _rows(table: pa.Table) -> Iterator[dict[str, Any] | str]:
    """The batch's rows as plain Python values, or for a row that has none, the reason.
    When the batch as a whole fails to convert, it goes row by row, so only the rows at
    fault are lost."""
    json_columns = [(field.name, field.type) for field in table.schema if _has_json(field.type)]
    rows: Iterable[dict[str, Any] | str]
    try:
        rows = table.to_pylist()
    except _CONVERSION_ERRORS:
        rows = (_row_or_reason(table, index) for index in range(table.num_rows))
    for row in rows:
        yield _with_json_parsed(row, json_columns) if isinstance(row, dict) else row


def _record(
    source: str, locator: str, row: dict[str, Any] | str, budget: int
) -> Record | Rejection:
    """The row as a record of JSON values, or its rejection (`budget` bounds its size)."""
    if isinstance(row, str):
        return Rejection(source, locator, "invalid_json", row)
    try:
        return Record(source, locator, to_jsonable(row, budget))
    except NotTextError as err:
        return Rejection(source, locator, "invalid_utf8", f"the row is not Unicode text: {err}")
    except TooLargeError:
        return Rejection(
            source,
            locator,
            "oversize_record",
            f"the row holds more than {budget} values, so its JSON is over the limit of "
            f"{budget} bytes (raise --max-record-bytes)",
        )


def _stream(source: str, dataset: Any, limits: ReadLimits) -> Iterator[Record | Rejection]:
    """Rows numbered from 0 across the split's files; a failing stream ends in a rejection."""
    from datasets.exceptions import DatasetsError

    row = 0
    try:
        for table in dataset.with_format("arrow").iter(batch_size=HF_BATCH_ROWS):
            for value in _rows(table):
                yield _record(source, f"{source}#{row}", value, limits.max_record_bytes)
                row += 1
    except (*_STREAM_ERRORS, DatasetsError) as err:
        yield Rejection(
            source,
            f"{source}#{row}",
            "unreadable_file",
            f"cannot read {source} at row {row}: {type(err).__name__}: {_one_line(err)}; "
            "the rest of the split is lost",
        )


def iter_hf(
    spec: str,
    limits: ReadLimits | None = None,
    *,
    split: str = DEFAULT_SPLIT,
    config: str | None = None,
) -> Iterator[Record | Rejection]:
    """Records of one split of a Hugging Face dataset, in row order. Opening the dataset
    happens now, so a missing dataset, config or split raises InputError right away; a
    stream that breaks later ends in one `unreadable_file` rejection."""
    dataset = _open(spec, split, config)
    source = source_label(spec, dataset.info.config_name, split)
    return _stream(source, dataset, limits or ReadLimits())
