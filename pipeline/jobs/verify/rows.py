"""Every row of an output rendered again from its stored messages with the shipped
tokenizer's renderer (`check_rows`): its input_ids, labels and counts (a row of another
objective than sft: each thread it was cut from), and its media columns against its
placeholders and content addresses. The shards' rows are read here (`read_rows`) for the
other row checks too, an older row's media placed back from its ids."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow.parquet as pq

from pipeline.jobs.verify.base import ROW_BATCH, TOKEN_COLUMNS, Problem, Verification
from pipeline.media.check import content_address
from pipeline.mms import MEDIA_COLUMN, Thread, normalize_thread_dict
from pipeline.mms.media_columns import COLUMN_KINDS, FRAMES_COLUMN, kind_columns
from pipeline.objectives.views import SftView, placed_media, sft_views
from pipeline.output.tokenizer import shipped_renderer
from pipeline.tokenize import TokenizerLoadError
from pipeline.tokenize.renderer import EncodedThread

if TYPE_CHECKING:
    import numpy as np


def read_rows(
    shards: list[tuple[str, Path]], placeholders: dict[int, str] | None = None
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Every shard's rows, batch by batch; with `placeholders` (id to media kind, of an
    output whose tokenizer ships them), a row of threads without a `media` column gets one
    from its ids (`with_placed_media`)."""
    for split, path in shards:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=ROW_BATCH):
            rows = batch.to_pylist()
            if placeholders:
                rows = [with_placed_media(row, placeholders) for row in rows]
            yield split, rows


def shipped_placeholders(out: Path) -> dict[int, str] | None:
    """Each media placeholder id of the output's tokenizer and its kind (None: it ships
    none, a text-only output)."""
    try:
        record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    media = record.get("media_tokens") or {}
    return {entry["id"]: kind for kind, entry in media.items()} or None


def with_placed_media(row: dict[str, Any], placeholders: dict[int, str]) -> dict[str, Any]:
    """A row of threads whose shard has no `media` column (an `mms tokenize` output written
    before shards carried media columns): its media rebuilt from its markers and its ids' placeholders
    (`placed_media`), so its messages render again; unchanged when there are none."""
    if MEDIA_COLUMN in row or "messages" not in row:
        return row
    media = placed_media(row["messages"], row["input_ids"], placeholders)
    return row if media is None else {**row, MEDIA_COLUMN: media}


def view_thread(view: SftView) -> Thread:
    """The thread a view renders as: its name and its messages, normalized."""
    return Thread.from_dict(normalize_thread_dict({"id": view.name, "messages": view.messages}))


def check_rows(
    out: Path,
    shards: list[tuple[str, Path]],
    result: Verification,
    progress: Callable[[str, int], None] | None,
) -> None:
    """Every row's input_ids, labels and counts rendered again from its messages (a row of
    another objective than sft: each thread it was cut from, `sft_views`)."""
    try:
        renderer = shipped_renderer(out / "tokenizer")
    except TokenizerLoadError as err:
        result.problems.append(Problem("tokenizer/", str(err)))
        return
    placeholders = shipped_placeholders(out)
    for split, rows in read_rows(shards, placeholders):
        views = [(row, view) for row in rows for view in sft_views(row, placeholders)]
        threads = [view_thread(view) for _, view in views]
        encoded = renderer.encode_batch(threads)
        prompts: np.ndarray | list[int] = (
            renderer.prompt_lengths(threads, encoded) if threads else []
        )
        for index, (row, view) in enumerate(views):
            what = _render_problem(row, view, encoded[index], renderer.generation_prompt_ids)
            if not what and view.prompt_tokens not in (None, prompts[index]):
                what = "the prompt's end (prompt_ids)"
            if what:
                result.problems.append(
                    Problem(
                        f"{split} row {view.name}",
                        f"{what} differ from its messages rendered again",
                    )
                )
        for row in rows:
            what = _count_problem(row) or media_problem(row, placeholders)
            if what:
                result.problems.append(Problem(f"{split} row {row['id']}", what))
        result.count("rows rendered again", len(rows))
        if progress is not None:
            progress("rendered again", result.checked["rows rendered again"])


def _render_problem(
    row: dict[str, Any], view: SftView, ours: EncodedThread, generation_prompt: list[int]
) -> str | None:
    """Which stored field of `view` its rendering contradicts, if one does."""
    ids = list(ours.input_ids) + (generation_prompt if view.generation_prompt else [])
    if ids != view.input_ids:
        return "input_ids"
    if view.labels is not None and list(ours.labels) != view.labels:
        return "labels"
    if "num_tokens" in row and row["num_tokens"] != len(ids):
        return "num_tokens"
    if "num_trained" in row and row["num_trained"] != ours.num_trained:
        return "num_trained"
    return None


def _count_problem(row: dict[str, Any]) -> str | None:
    """An objective row's `num_X_tokens` that is not the length of its `X_ids`."""
    for key, value in row.items():
        part = key.removeprefix("num_").removesuffix("_tokens")
        counted = key.startswith("num_") and key.endswith("_tokens") and f"{part}_ids" in row
        if counted and value != len(row[f"{part}_ids"]):
            return f"{key} is not the length of {part}_ids"
    return None


def media_problem(row: dict[str, Any], placeholders: dict[int, str] | None) -> str | None:
    """A media column (`images` ...) of a row whose media are not one per placeholder of
    their kind in its token columns, in number, or whose embedded bytes are not the media
    their content address (`media/<sha256>.<ext>`) names; a video that is neither one
    file (`videos`) nor a frame list (`video_frames`), or both."""
    ids = [i for name in TOKEN_COLUMNS if row.get(name) for i in row[name]]
    for column in kind_columns(row):
        cells = row[column] or ()
        wanted = sum(1 for i in ids if (placeholders or {}).get(i) == COLUMN_KINDS[column])
        if len(cells) != wanted:
            return f"{column} holds {len(cells)} media for {wanted} placeholder(s)"
        for position, cell in enumerate(cells):
            frames = cell if column == FRAMES_COLUMN and isinstance(cell, list) else None
            for number, each in enumerate(frames if frames is not None else [cell]):
                if each is None:
                    continue
                where = f"{column}[{position}]" + (f"[{number}]" if frames is not None else "")
                if frames is not None and not isinstance(each, dict):
                    return f"{where} is not an image cell"
                named = content_address(each.get("path"))
                data = each.get("bytes")
                if (
                    data is not None
                    and named is not None
                    and hashlib.sha256(data).hexdigest() != named[1]
                ):
                    return f"{where}'s bytes are not the media {each['path']} names"
    videos, frames = row.get("videos"), row.get(FRAMES_COLUMN)
    if videos is not None and frames is not None:
        for position, (video, listed) in enumerate(zip(videos, frames, strict=False)):
            if (video is None) == (listed is None):
                held = "neither" if video is None else "both"
                return f"video {position + 1} is {held} a file (videos) and a frame list ({FRAMES_COLUMN})"
            if listed is not None and not listed:
                return f"{FRAMES_COLUMN}[{position}] holds no frame"
    return None
