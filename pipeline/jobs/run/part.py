"""The map side of `mms run`: one part's records are read and normalized, then every map
stage of the run (pipeline/jobs/run/stages.py) tags them, batch by batch, in the worker that
read them. The part's directory holds what the dataset side (pipeline/jobs/run/repeated_pass.py,
decisions.py, shard_tasks.py) needs, and nothing it would have to recompute:

- `threads.arrow`: one row per thread in reading order (an Arrow IPC file: written and
  read back without encoding): the shard columns, `settings`, and every stage's columns;
- `rejected.jsonl`: the records that did not become threads;
- `dropped.jsonl`: the threads map stages left out (sampling), one line each;
- `stats.json`: the reading counts and the threads map stages left out, per reason;
- `{stage}.json`: what a stage kept of the part (the lint profile and examples);
- `media/`, when the run copies media (`stages.media.copy`): every media the part's threads
  point at, under its content address (`<sha256>.<ext>`), for the shard tasks to publish;
- `input.json`, in a file's first part: the manifest's record of the input file (its
  sha256 and size: hashing every input is work that grows with the data, so the workers
  do it, a file split into byte ranges hashed whole by its first part);
- `tokenizer/`, in the part `PartJob.ships_tokenizer` names: the augmented tokenizer the
  output ships (its worker has the tokenizer loaded; the run's own process never loads it)."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.accounting import Account
from pipeline.jobs.batch_steps import batch_rows, map_batches
from pipeline.jobs.read import media_checker
from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.stages import Side, part_schema, run_stages
from pipeline.mms import MEDIA_COLUMN, media_to_arrow, settings_to_arrow
from pipeline.mms.groups import group_column
from pipeline.output.manifest import input_record
from pipeline.output.tokenizer import write_tokenizer
from pipeline.quarantine import dropped_line, rejection_line
from pipeline.sources import DEFAULT_SPLIT, is_hf_input
from pipeline.sources.parts import InputPart, iter_part_records
from pipeline.sources.paths import HF_PREFIX
from pipeline.stages.contract import Batch
from pipeline.stages.lint import Lint
from pipeline.stages.normalize import read_items
from pipeline.stages.tokenize import renderer_for

PART_THREADS = "threads.arrow"
PART_REJECTED = "rejected.jsonl"
PART_STATS = "stats.json"
PART_DROPPED = "dropped.jsonl"
PART_TOKENIZER = "tokenizer"
PART_INPUT = "input.json"
PART_MEDIA = "media"
PART_FORMAT = "mms-run-part-9"
"""The layout of a part's directory: a work directory of another layout is not resumed."""


def stage_file(name: str) -> str:
    """The file of a part's directory holding what the stage `name` kept of the part."""
    return f"{name}.json"


@dataclass(frozen=True)
class PartJob:
    """The map side for one part (picklable: the engine runs it in worker
    processes)."""

    config: RunConfig
    ships_tokenizer: str | None = None
    """The id of the part that also writes the output's tokenizer/ (the first)."""

    def __call__(self, part: InputPart, out: Path) -> None:
        # sources are recorded as the config writes them (a relative input relative to
        # the config's folder), so thread ids and meta depend on neither where the checkout
        # lives nor where the config does
        base = self.config.source.parent if self.config.source else None
        recorded = dataclasses.replace(part, path=self.config.recorded_path(part.path))
        out = out.resolve()  # before any change of working directory
        if base is None or not _relative_local(recorded.path):
            _PartWriter(self.config, out, part.input_index).process(part, recorded)
        else:
            with _working_directory(base):
                _PartWriter(self.config, out, part.input_index).process(part, recorded)
        stage = self.config.stages.tokenize
        if stage is not None and part.id == self.ships_tokenizer:
            renderer, loaded = renderer_for(stage)
            shown = self.config.recorded_path(loaded.path)
            write_tokenizer(out / PART_TOKENIZER, renderer, loaded, base_path=shown)


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


class _PartWriter:
    """Writes one part's directory (see the module docstring)."""

    def __init__(self, config: RunConfig, out: Path, input_index: int):
        self.config = config
        self.out = out
        source = str(config.source) if config.source else None
        side = Side(sample=config.inputs[input_index].sample, lint_source=source)
        self.stages = run_stages(config, side)
        self.schema = part_schema(config, self.stages)

    def process(self, part: InputPart, read_as: InputPart) -> None:
        spec = self.config.inputs[part.input_index]
        options = self.config.stages.normalize.to_convert_options()
        if spec.mapping is not None:
            options = dataclasses.replace(options, mapping=spec.mapping)
        stats = Account()
        dropped: Counter[str] = Counter()
        dropped_tokens: Counter[str] = Counter()
        tagged: Counter[str] = Counter()
        if read_as.name is not None:  # lint findings point at the file as the config names it
            for stage in self.stages:
                if isinstance(stage, Lint):
                    stage.linter.places = {read_as.name: read_as.path}
        with (
            (self.out / PART_REJECTED).open("wb") as rejected,
            (self.out / PART_DROPPED).open("wb") as left_out,
        ):
            items = iter_part_records(
                read_as, split=spec.split or DEFAULT_SPLIT, hf_config=spec.hf_config
            )
            threads = read_items(
                read_as.path,
                items,
                format=part.format,
                on_reject=lambda rejection: rejected.write(rejection_line(rejection)),
                stats=stats,
                options=options,
                media=media_checker(
                    self.config.stages.media,
                    options.multimodal,
                    self.out / PART_MEDIA,
                    self.config.media_roots(spec),
                ),
            )
            with pa.ipc.new_file(self.out / PART_THREADS, self.schema) as writer:
                for batch in map_batches(threads, self.stages):
                    dropped.update(batch.dropped)
                    dropped_tokens.update(batch.dropped_tokens)
                    tagged.update(batch.tagged)
                    for thread, by_stage, reason in batch.left_out:
                        left_out.write(dropped_line(thread.id, thread.meta, by_stage, reason))
                    groups = group_column([thread for thread, _, _ in batch.left_out])
                    stats.count_groups(groups, [reason for _, _, reason in batch.left_out])
                    writer.write_table(self._table(batch))
        counts = {
            "records_read": stats.records_read,
            "records_converted": stats.records_converted,
            "threads": stats.threads,
            "quarantined": dict(sorted(stats.quarantined.items())),
            "formats": stats.formats,
            "dropped": dict(sorted(dropped.items())),
            "dropped_tokens": dict(sorted(dropped_tokens.items())),
            "groups_dropped": dict(sorted(stats.groups_dropped.items())),
            "tagged": dict(sorted(tagged.items())),
        }
        self._write_json(PART_STATS, counts)
        if read_as.start in (None, 0):
            record = input_record(read_as.path, part.format, recorded_as=read_as.path)
            self._write_json(PART_INPUT, record.to_dict())
        for stage in self.stages:
            state = stage.part_state()
            if state is not None:
                self._write_json(stage_file(stage.name), state)

    def _write_json(self, name: str, data: Any) -> None:
        (self.out / name).write_bytes(orjson.dumps(data, option=orjson.OPT_SORT_KEYS))

    def _table(self, batch: Batch) -> pa.Table:
        """The batch's rows (shard columns, every stage's columns), settings and media, in
        the part's schema."""
        table = batch_rows(batch)
        if "settings" not in table.column_names:
            table = table.append_column("settings", settings_to_arrow(batch.threads))
        if MEDIA_COLUMN not in table.column_names:
            counts = pc.list_value_length(table["messages"]).to_pylist()
            table = table.append_column(MEDIA_COLUMN, media_to_arrow(batch.threads, counts))
        return table.select(self.schema.names).cast(self.schema)
