"""The map side of `mms run`: one work unit's records are read, normalized and sampled,
then linted (thread rules, the dataset rules' per-thread facts, the profile) and tokenized,
all in the worker that reads them. The unit's directory holds what the ordered reduce
(pipeline/jobs/run/reduce.py) needs, and nothing it would have to recompute:

- `threads.arrow`: one row per thread in reading order (an Arrow IPC file: written and
  read back without encoding): the shard columns (tokenized or not), `settings`, and
  the side columns below;
- `rejected.jsonl`: the records that did not become threads;
- `stats.json`: the reading counts; `profile.json`: the lint profile's counters;
- `examples.json`: the example threads of the unit's first findings per rule;
- `tokenizer/`, in the unit `UnitJob.ships_tokenizer` names: the augmented tokenizer the
  output ships (its worker has the tokenizer loaded; the run's own process never loads it)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.accounting import ReadStats
from pipeline.dedup import content_key, split_group, thread_signature
from pipeline.jobs.run.config import RunConfig, TokenizeStage
from pipeline.jobs.run.keys import stable_fraction
from pipeline.lint import Linter
from pipeline.lint.profile import DatasetProfile
from pipeline.lint.report import example_thread
from pipeline.lint.thread_view import ThreadView
from pipeline.mms import THREAD_ARROW_SCHEMA, Thread, settings_to_arrow, threads_to_arrow
from pipeline.output.tokenizer import write_tokenizer
from pipeline.quarantine import rejection_line
from pipeline.sources import DEFAULT_SPLIT, is_hf_input
from pipeline.sources.parts import WorkUnit, iter_unit_records
from pipeline.sources.paths import HF_PREFIX
from pipeline.stages.normalize import read_items
from pipeline.tokenize import LoadedTokenizer, Renderer, load_tokenizer, tokenize_threads
from pipeline.tokenize.overlong import Drop
from pipeline.tokenize.stage import TOKENIZED_SCHEMA

UNIT_THREADS = "threads.arrow"
UNIT_REJECTED = "rejected.jsonl"
UNIT_STATS = "stats.json"
UNIT_PROFILE = "profile.json"
UNIT_EXAMPLES = "examples.json"
UNIT_TOKENIZER = "tokenizer"
BATCH = 1024
"""Threads per batch: one lint pass and one tokenizer call each."""

FINDINGS = "_findings"
"""The thread rules' findings (a JSON list of diagnostics), null when there are none."""
FACTS = "_facts"
"""JSON [source, locator, facts of each dataset rule]."""
KEY = "_key"
"""The content key (pipeline.dedup.content_key): exact dedup's and MMS501's."""
GROUP = "_group"
"""The split group (pipeline.dedup.split_group): what the sample and the split hash."""
NEAR = "_near"
"""The MinHash signature (pipeline.dedup.thread_signature) when near-dedup is on, else null."""
MESSAGES = "_messages"
"""The message count as read (before any truncation), for the message-count filters."""
DROP = "_drop"
"""Why the tokenize stage leaves the thread out (an overlong code), else null; token
columns are null then."""
ORIGINAL = "_original"
"""The thread as read (JSON), only for threads truncated by the tokenize stage."""
SIDE_FIELDS = [
    pa.field(FINDINGS, pa.binary()),
    pa.field(FACTS, pa.binary()),
    pa.field(KEY, pa.uint64()),
    pa.field(GROUP, pa.string()),
    pa.field(NEAR, pa.binary()),
    pa.field(MESSAGES, pa.int32()),
    pa.field(DROP, pa.string()),
    pa.field(ORIGINAL, pa.binary()),
]


def shard_schema(config: RunConfig) -> pa.Schema:
    """The columns of the run's shards."""
    return TOKENIZED_SCHEMA if config.stages.tokenize else THREAD_ARROW_SCHEMA


def unit_schema(config: RunConfig) -> pa.Schema:
    """The columns of a unit's threads file: the shard columns, settings, side columns."""
    schema = shard_schema(config)
    if "settings" not in schema.names:
        schema = schema.append(THREAD_ARROW_SCHEMA.field("settings"))
    for side in SIDE_FIELDS:
        schema = schema.append(side)
    return schema


class _Keyed(NamedTuple):
    """A thread read by the unit, with its content key and split group."""

    thread: Thread
    key: int
    group: str


_RENDERERS: dict[tuple[str, bool, str, str], tuple[Renderer, LoadedTokenizer]] = {}


def renderer_for(stage: TokenizeStage) -> tuple[Renderer, LoadedTokenizer]:
    """The stage's renderer and base tokenizer, built once per process (a large
    vocabulary takes a second to load, and a worker runs many units)."""
    key = (stage.tokenizer, stage.bos, stage.encoder, stage.train_on)
    if key not in _RENDERERS:
        base = load_tokenizer(stage.tokenizer, allow_tiktoken=stage.encoder == "auto")
        _RENDERERS[key] = (Renderer(base, bos=stage.bos, policy=stage.train_on), base)
    return _RENDERERS[key]


@dataclass(frozen=True)
class UnitJob:
    """The map side for one work unit (picklable: the engine runs it in worker
    processes)."""

    config: RunConfig
    ships_tokenizer: str | None = None
    """The id of the unit that also writes the output's tokenizer/ (the first)."""

    def __call__(self, unit: WorkUnit, out: Path) -> None:
        # sources are recorded as the config writes them (a relative input relative to
        # the config's folder), so thread ids and meta depend on neither where the checkout
        # lives nor where the config does
        base = self.config.source.parent if self.config.source else None
        recorded = dataclasses.replace(unit, path=self.config.recorded_path(unit.path))
        out = out.resolve()  # before any change of working directory
        if base is None or not _relative_local(recorded.path):
            _UnitWriter(self.config, out).process(unit, recorded)
        else:
            with _working_directory(base):
                _UnitWriter(self.config, out).process(unit, recorded)
        stage = self.config.stages.tokenize
        if stage is not None and unit.id == self.ships_tokenizer:
            renderer, loaded = renderer_for(stage)
            shown = self.config.recorded_path(loaded.path)
            write_tokenizer(out / UNIT_TOKENIZER, renderer, loaded, base_path=shown)


def _relative_local(recorded: str) -> bool:
    """Whether a recorded input is a local path relative to the config's folder (a file,
    or an `hf:./dir` dataset), so that it is read from there; a Hub name is not."""
    if is_hf_input(recorded):
        return recorded.removeprefix(HF_PREFIX).startswith(("./", "../"))
    return not os.path.isabs(recorded)


@contextmanager
def _working_directory(path: Path) -> Iterator[None]:
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


class _UnitWriter:
    """Writes one unit's directory (see the module docstring)."""

    def __init__(self, config: RunConfig, out: Path):
        self.config = config
        self.out = out
        stages = config.stages
        self.linter = Linter(
            stages.lint.to_lint_config(str(config.source) if config.source else None)
        )
        self.max_examples = self.linter.config.max_examples
        self.profile = DatasetProfile()
        self.examples: dict[str, dict[str, Any]] = {}
        self.example_counts: dict[str, int] = {}
        self.renderer = renderer_for(stages.tokenize)[0] if stages.tokenize else None
        self.schema = unit_schema(config)
        self.rows = 0

    def process(self, unit: WorkUnit, read_as: WorkUnit) -> None:
        spec = self.config.inputs[unit.input_index]
        options = self.config.stages.normalize.to_convert_options()
        stats = ReadStats()
        sampled_out = 0
        with (self.out / UNIT_REJECTED).open("wb") as rejected:
            items = iter_unit_records(
                read_as, split=spec.split or DEFAULT_SPLIT, hf_config=spec.hf_config
            )
            threads = read_items(
                read_as.path,
                items,
                format=unit.format,
                on_reject=lambda rejection: rejected.write(rejection_line(rejection)),
                stats=stats,
                options=options,
            )
            with pa.ipc.new_file(self.out / UNIT_THREADS, self.schema) as writer:
                batch: list[_Keyed] = []
                for thread in threads:
                    key = content_key(thread)
                    group = split_group(thread, key)
                    if spec.sample < 1.0 and stable_fraction(group) >= spec.sample:
                        sampled_out += 1
                        continue
                    batch.append(_Keyed(thread, key, group))
                    if len(batch) == BATCH:
                        writer.write_table(self._table(batch))
                        batch = []
                writer.write_table(self._table(batch))
        counts = {
            "records_read": stats.records_read,
            "records_converted": stats.records_converted,
            "threads": stats.threads,
            "quarantined": dict(sorted(stats.quarantined.items())),
            "formats": stats.formats,
            "sampled_out": sampled_out,
        }
        self._write_json(UNIT_STATS, counts)
        self._write_json(UNIT_PROFILE, self.profile.state())
        self._write_json(UNIT_EXAMPLES, self.examples)

    def _write_json(self, name: str, data: Any) -> None:
        (self.out / name).write_bytes(orjson.dumps(data, option=orjson.OPT_SORT_KEYS))

    def _table(self, keyed: list[_Keyed]) -> pa.Table:
        """The batch's rows: linted, keyed, tokenized."""
        batch = [item.thread for item in keyed]
        findings, facts = [], []
        for thread in batch:
            view = ThreadView(thread)
            found = self.linter.thread_findings(view)
            self._keep_examples(thread, found)
            findings.append(orjson.dumps([d.to_dict() for d in found]) if found else None)
            facts.append(
                orjson.dumps([view.source, view.locator, *self.linter.dataset_facts(view)])
            )
            self.profile.observe(view)
            self.rows += 1
        near = self.config.stages.dedup.near
        side = {
            FINDINGS: pa.array(findings, pa.binary()),
            FACTS: pa.array(facts, pa.binary()),
            KEY: pa.array([item.key for item in keyed], pa.uint64()),
            GROUP: pa.array([item.group for item in keyed], pa.string()),
            NEAR: pa.array(
                [thread_signature(t, near) for t in batch] if near else [None] * len(batch),
                pa.binary(),
            ),
            MESSAGES: pa.array([len(t.messages) for t in batch], pa.int32()),
        }
        table = self._tokenized(batch) if self.renderer else _untokenized(batch)
        for name, column in side.items():
            table = table.append_column(name, column)
        return table.select(self.schema.names).cast(self.schema)

    def _keep_examples(self, thread: Thread, found: list[Any]) -> None:
        """The example threads of the unit's first `max_examples` findings per rule, keyed
        `row:position`: the reduce keeps the dataset's first ones, a subset of these."""
        for position, diagnostic in enumerate(found):
            seen = self.example_counts.get(diagnostic.code, 0)
            if seen < self.max_examples:
                self.example_counts[diagnostic.code] = seen + 1
                self.examples[f"{self.rows}:{position}"] = example_thread(
                    thread, diagnostic.message_index
                )

    def _tokenized(self, batch: list[Thread]) -> pa.Table:
        """Token columns for every thread of the batch: null where the overlong policy
        drops the thread (its code in DROP). Under `overlong: error` an overlong thread is
        recorded as dropped here; the reduce raises if it reaches the tokenize stage (a
        thread the lint gate, filters or dedup leave out does not stop the run)."""
        stage = self.config.stages.tokenize
        assert stage is not None and self.renderer is not None
        policy = "drop" if stage.overlong == "error" else stage.overlong
        dropped: dict[int, Drop] = {}
        tables = list(
            tokenize_threads(
                batch,
                self.renderer,
                max_tokens=stage.max_tokens,
                overlong=policy,
                batch_size=max(len(batch), 1),
                on_drop=lambda drop: dropped.__setitem__(id(drop.thread), drop),
            )
        )
        kept = pa.concat_tables(tables) if tables else TOKENIZED_SCHEMA.empty_table()
        drops = [dropped.get(id(thread)) for thread in batch]
        table = _with_dropped(batch, kept, drops) if dropped else kept
        table = table.append_column("settings", settings_to_arrow(batch))
        truncated = [
            orjson.dumps(thread.to_dict())
            if drop is None and len(thread.messages) != count
            else None
            for thread, drop, count in zip(batch, drops, _message_counts(table), strict=True)
        ]
        codes = [drop.code if drop else None for drop in drops]
        table = table.append_column(DROP, pa.array(codes, pa.string()))
        return table.append_column(ORIGINAL, pa.array(truncated, pa.binary()))


def _message_counts(table: pa.Table) -> list[int]:
    return pc.list_value_length(table["messages"]).to_pylist()


def _with_dropped(batch: list[Thread], kept: pa.Table, drops: list[Drop | None]) -> pa.Table:
    """The tokenized rows with the dropped threads put back in their places: thread
    columns as read, `num_tokens` the whole thread's, the other token columns null."""
    dropped = [drop for drop in drops if drop is not None]
    arrow = threads_to_arrow([drop.thread for drop in dropped])
    arrow = arrow.append_column(
        "num_tokens", pa.array([drop.num_tokens for drop in dropped], pa.int32())
    )
    columns = [
        arrow[name] if name in arrow.column_names else pa.nulls(len(dropped), field.type)
        for name, field in zip(TOKENIZED_SCHEMA.names, TOKENIZED_SCHEMA, strict=True)
    ]
    both = pa.concat_tables([kept, pa.Table.from_arrays(columns, schema=TOKENIZED_SCHEMA)])
    order, next_kept, next_dropped = [], 0, kept.num_rows
    for drop in drops:
        if drop is None:
            order.append(next_kept)
            next_kept += 1
        else:
            order.append(next_dropped)
            next_dropped += 1
    return both.take(pa.array(order, pa.int64()))


def _untokenized(batch: list[Thread]) -> pa.Table:
    table = threads_to_arrow(batch)
    table = table.append_column(DROP, pa.nulls(len(batch), pa.string()))
    return table.append_column(ORIGINAL, pa.nulls(len(batch), pa.binary()))
