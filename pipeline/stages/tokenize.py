"""The tokenize stage, configured by the `tokenize` slice. Map side: every thread rendered
(DESIGN §4) into the shard rows with their token columns, an overlong thread truncated or
tagged with why it is left out. Dataset side: the tagged threads still kept are dropped
with that reason, or, under `overlong: error`, end the run."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.config_slice import ConfigSlice, SliceReader, plain_settings
from pipeline.mms import Thread, settings_to_arrow, threads_to_arrow
from pipeline.stages.contract import ORIGINAL_THREAD, TOKENS_CUT, Batch, Stage, thread_as_read
from pipeline.tokenize import LoadedTokenizer, Renderer, load_tokenizer, tokenize_threads
from pipeline.tokenize.loading import (
    TokenizerLoadError,
    check_tokenizer,
    hub_cache_folder,
    hub_name,
)
from pipeline.tokenize.overlong import Drop, OverlongPolicy, OverlongThreadError
from pipeline.tokenize.tables import PROMPT_MESSAGES, PROMPT_TOKENS, TOKENIZED_SCHEMA

DROP_REASON = "tokenize_drop"
"""Why the stage leaves the thread out (an overlong code), else null; token columns are
null then."""


@dataclass(frozen=True, slots=True)
class TokenizeSettings:
    """The base tokenizer (an absolute path, or a Hub name in the local cache) and limits."""

    tokenizer: str
    max_tokens: int = 4096
    overlong: Literal["drop", "truncate", "error"] = "truncate"
    bos: bool = False
    encoder: Literal["auto", "tokenizers"] = "auto"
    train_on: Literal["assistant", "last_assistant"] = "assistant"
    objective: str = "sft"
    """What a shard row is (pipeline/objectives)."""


_RENDERERS: dict[TokenizeSettings, tuple[Renderer, LoadedTokenizer]] = {}


def renderer_for(settings: TokenizeSettings) -> tuple[Renderer, LoadedTokenizer]:
    """The renderer and base tokenizer of `settings`, built once per process (a large
    vocabulary takes a second to load, and a worker maps many parts)."""
    key = TokenizeSettings(
        settings.tokenizer, bos=settings.bos, encoder=settings.encoder, train_on=settings.train_on
    )
    if key not in _RENDERERS:
        base = load_tokenizer(settings.tokenizer, allow_tiktoken=settings.encoder == "auto")
        _RENDERERS[key] = (Renderer(base, bos=settings.bos, policy=settings.train_on), base)
    return _RENDERERS[key]


def _read(raw: dict[str, Any], reader: SliceReader) -> TokenizeSettings:
    """The settings, the tokenizer a local path (against the config's folder) or a Hub name
    in the local cache, loaded as every part loads it."""
    raw = _objective_defaults(raw, reader)
    spec = raw["tokenizer"]
    local = reader.local(spec)
    if os.path.isdir(local) and not os.path.isfile(os.path.join(local, "tokenizer.json")):
        raise reader.error(["tokenizer"], f"{local} has no tokenizer.json")
    if os.path.exists(local):
        return _check_tokenizer(TokenizeSettings(**{**raw, "tokenizer": local}), reader)
    if hub_name(spec):
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(spec, "tokenizer.json"), str):
            return _check_tokenizer(TokenizeSettings(**raw), reader)
        reason = (
            f"no such file or directory {local}, and {spec} is not in the local Hugging "
            f"Face cache (looked in {hub_cache_folder()}; mms never downloads: fetch it "
            f"once with `huggingface-cli download {spec} tokenizer.json "
            "tokenizer_config.json`)"
        )
        raise reader.error(["tokenizer"], reason)
    raise reader.error(["tokenizer"], f"no such file or directory: {local}")


def _objective_defaults(raw: dict[str, Any], reader: SliceReader) -> dict[str, Any]:
    """The slice with what an objective other than sft implies (the final turn trained,
    overlong threads dropped), or an error where it says otherwise."""
    objective = raw.get("objective", "sft")
    if objective == "sft":
        return raw
    if raw.get("train_on", "last_assistant") != "last_assistant":
        raise reader.error(
            ["train_on"],
            f"objective {objective} trains the final turn only: "
            "train_on must be last_assistant (its default)",
        )
    if raw.get("overlong") == "truncate":
        raise reader.error(
            ["overlong"],
            f"truncate cuts the final turn a {objective} row is made "
            "of: use drop (its default) or error",
        )
    return {"train_on": "last_assistant", "overlong": "drop", **raw}


def _check_tokenizer(settings: TokenizeSettings, reader: SliceReader) -> TokenizeSettings:
    """`settings`, once the tokenizer they name is loaded as every part loads it: a
    tokenizer no part could load, or a `bos` it has no token for, is refused before any
    part starts (a part that fails on it cannot be fixed by running again). The structure
    is checked first (remembered per file), for the clearer message; the loaded renderer
    is kept for this process's parts."""
    try:
        check_tokenizer(settings.tokenizer)
        renderer_for(settings)
    except (TokenizerLoadError, OSError) as err:
        raise reader.error(["tokenizer"], f"not a usable tokenizer: {err}") from None
    except ValueError as err:  # the renderer refuses it: a bos it names no token for
        where = "bos" if settings.bos and "bos" in str(err) else "tokenizer"
        raise reader.error([where], str(err)) from None
    return settings


CONFIG = ConfigSlice(
    "tokenize",
    TokenizeSettings,
    on_by_default=False,
    read=_read,
    plain=lambda settings, recorded: {
        **plain_settings(settings),
        "tokenizer": recorded(settings.tokenizer),
    },
    resolved_off=None,
)
"""Off when omitted: the shards then hold the thread columns."""


class Tokenize(Stage):
    """See the module docstring."""

    name = "tokenize"
    columns: ClassVar[tuple[pa.Field, ...]] = (
        pa.field(DROP_REASON, pa.string()),
        pa.field(ORIGINAL_THREAD, pa.binary()),
        pa.field(TOKENS_CUT, pa.int32()),
    )

    def __init__(
        self,
        renderer: Callable[[], Renderer],
        max_tokens: int | None,
        overlong: OverlongPolicy,
        *,
        prompt_lengths: bool = False,
    ):
        """`renderer` gives the renderer when the map side first needs it (the dataset
        side never loads the tokenizer). With `prompt_lengths` the rows also say where
        their prompt ends (for an objective other than sft: pipeline/objectives)."""
        self.renderer, self.max_tokens, self.overlong = renderer, max_tokens, overlong
        self.prompt_lengths = prompt_lengths

    @classmethod
    def from_settings(cls, settings: TokenizeSettings) -> Tokenize:
        """The stage of a run's `tokenize` slice."""
        return cls(
            lambda: renderer_for(settings)[0],
            settings.max_tokens,
            settings.overlong,
            prompt_lengths=settings.objective != "sft",
        )

    def map(self, batch: Batch) -> Batch:
        """Token columns for every thread: null where the overlong policy drops it (its
        code in DROP_REASON). Under `overlong: error` an overlong thread is only tagged
        here; `decide` raises if it is still kept by then (a thread the gate, filters or
        dedup leave out does not stop the run)."""
        threads = batch.threads
        policy = "drop" if self.overlong == "error" else self.overlong
        dropped: dict[int, Drop] = {}
        cut: dict[int, int] = {}
        tables = list(
            tokenize_threads(
                threads,
                self.renderer(),
                max_tokens=self.max_tokens,
                overlong=policy,
                batch_size=max(len(threads), 1),
                on_drop=lambda drop: dropped.__setitem__(id(drop.thread), drop),
                on_truncate=lambda thread, tokens: cut.__setitem__(id(thread), tokens),
                prompt_lengths=self.prompt_lengths,
            )
        )
        kept = pa.concat_tables(tables) if tables else self._empty()
        drops = [dropped.get(id(thread)) for thread in threads]
        rows = _with_dropped(kept, drops) if dropped else kept
        batch.rows = rows.append_column("settings", settings_to_arrow(threads))
        counts = pc.list_value_length(rows["messages"]).to_pylist()
        batch.columns[DROP_REASON] = pa.array(
            [drop.code if drop else None for drop in drops], pa.string()
        )
        batch.columns[ORIGINAL_THREAD] = pa.array(
            [
                _as_read(thread) if drop is None and len(thread.messages) != count else None
                for thread, drop, count in zip(threads, drops, counts, strict=True)
            ],
            pa.binary(),
        )
        batch.columns[TOKENS_CUT] = pa.array(
            [cut.get(id(thread)) for thread in threads], pa.int32()
        )
        return batch

    def _empty(self) -> pa.Table:
        if not self.prompt_lengths:
            return TOKENIZED_SCHEMA.empty_table()
        extra = [pa.field(PROMPT_TOKENS, pa.int32()), pa.field(PROMPT_MESSAGES, pa.int32())]
        return pa.schema([*TOKENIZED_SCHEMA, *extra]).empty_table()

    def decide(self, rows: pa.Table, kept: list[bool]) -> list[str | None]:
        reasons = [
            code if keep else None
            for code, keep in zip(rows[DROP_REASON].to_pylist(), kept, strict=True)
        ]
        if self.overlong == "error" and "overlong" in reasons:
            row = reasons.index("overlong")
            tokens = rows["num_tokens"][row].as_py()
            assert self.max_tokens is not None  # only a limit tags threads overlong
            raise OverlongThreadError(thread_as_read(rows, row), tokens, self.max_tokens)
        return reasons


def _as_read(thread: Thread) -> bytes:
    return orjson.dumps(thread.to_dict())


def _with_dropped(kept: pa.Table, drops: list[Drop | None]) -> pa.Table:
    """The tokenized rows with the dropped threads put back in their places: thread
    columns as read, `num_tokens` the whole thread's, the other token columns null."""
    dropped = [drop for drop in drops if drop is not None]
    arrow = threads_to_arrow([drop.thread for drop in dropped])
    arrow = arrow.append_column(
        "num_tokens", pa.array([drop.num_tokens for drop in dropped], pa.int32())
    )
    columns = [
        arrow[name] if name in arrow.column_names else pa.nulls(len(dropped), field.type)
        for name, field in zip(kept.schema.names, kept.schema, strict=True)
    ]
    both = pa.concat_tables([kept, pa.Table.from_arrays(columns, schema=kept.schema)])
    order, next_kept, next_dropped = [], 0, kept.num_rows
    for drop in drops:
        if drop is None:
            order.append(next_kept)
            next_kept += 1
        else:
            order.append(next_dropped)
            next_dropped += 1
    return both.take(pa.array(order, pa.int64()))
