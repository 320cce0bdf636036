"""The shard writes of `mms run`, in parallel on the engine (DESIGN §7): once the ordered
pass has chosen every part's rows (pipeline/jobs/run/selection.py), each shard is one task
that reads its rows from the parts' threads files, reshapes them (pack, within the shard),
and writes the shard under its final name. No process writes every shard.

A split kept in plan order is cut into ranges of its rows in that order (`rows_per_shard`
each, the last holding the rest); the shuffled split into equal ranges of the selection's
keys, each shard holding its range's rows sorted by key (about `rows_per_shard` each: a key
range is a random sample of the split). A packed split has as many shards as its tokens
fill SEQUENCES_PER_SHARD sequences, each packed alone. The shards, their names and their
bytes depend on the rows and the config, never on the engine or the workers."""

from __future__ import annotations

import itertools
import math
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.engine import Runner
from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.decisions import Decided
from pipeline.jobs.run.part import PART_MEDIA
from pipeline.jobs.run.phases import SHARD_WRITES, Progress
from pipeline.jobs.run.selection import SELECTED_DIR, Selections, SplitTotals, shard_count
from pipeline.jobs.run.shard_rows import Threads, batch_bounds, chosen
from pipeline.jobs.run.stages import reshaping_stages, row_schema, shard_schema
from pipeline.media.check import MEDIA_DIR, content_address, write_once
from pipeline.mms import FRAMES, MEDIA_COLUMN, THREAD_MEDIA_ARROW_SCHEMA
from pipeline.mms.media_columns import (
    with_content_parts,
    with_embedded_bytes,
    with_media_columns,
)
from pipeline.output.shards import ROW_GROUP_ROWS, Shard, ShardWriter, shard_name
from pipeline.packing import SEQUENCES_PER_SHARD, PackingStats
from pipeline.stages.contract import Stage
from pipeline.stages.pack import Pack, PackSettings
from pipeline.stages.split import ShardSettings
from pipeline.stages.tokenize import renderer_for
from pipeline.tokenize.special import ROLE

if TYPE_CHECKING:
    from pipeline.jobs.stats.compute import ShardTables


@dataclass
class Written:
    """The shards the tasks wrote: each split's (only splits that got rows, none when the
    gate failed) and their count tables (for the stats), what the pack stage did (None
    without one), and the media the tasks published under media/ (copy mode)."""

    shards: dict[str, list[Shard]] = field(default_factory=dict)
    tables: dict[str, list[ShardTables]] = field(default_factory=dict)
    packing: dict[str, Any] | None = None
    media_files: dict[str, int] = field(default_factory=dict)


def write_shards(
    config: RunConfig,
    decided: Decided,
    out: Path,
    runner: Runner,
    workdir: Path,
    progress: Progress | None = None,
) -> Written:
    """If the lint gate passed, the shards under `out/data` (`out`: the output folder's
    staging folder), one task per shard on `runner`'s workers, from the parts' selections
    (see the module docstring). A split that got no rows gets no file."""
    tasks: list[ShardTask] = []
    done: list[ShardDone] = []
    if decided.selections is not None and not decided.gate_failed:
        tasks = plan_shard_tasks(decided.selections, decided.part_dirs, config, out / "data")

        def shards_progress(count: int) -> None:
            if progress is not None:
                progress(SHARD_WRITES, count, len(tasks), None)

        shards_progress(0)
        done = runner.map_tasks(tasks, shards_progress)
        shutil.rmtree(workdir / SELECTED_DIR, ignore_errors=True)
    written = Written()
    for task, shard_done in zip(tasks, done, strict=True):
        written.shards.setdefault(task.split, []).append(shard_done.shard)
        written.tables.setdefault(task.split, []).append(shard_done.tables)
    if config.stages.pack is not None and written.shards:
        written.packing = packing_stats(done, config.stages.pack.seq_len).to_dict()
        written.shards = dict(sorted(written.shards.items()))  # packed: splits by name
    written.media_files = {name: size for shard_done in done for name, size in shard_done.media}
    return written


@dataclass(frozen=True, slots=True)
class Source:
    """Entries `start .. end` of a part's selection for one split (batch `split` of the
    selection file), and the part's directory."""

    part_dir: str
    selection: str
    split: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class ShardDone:
    """A written shard, what packing it did (None: not packed), and its count tables."""

    shard: Shard
    packing: PackingStats | None
    tables: ShardTables
    """Its count tables, for the run's stats (merged by the driver, never re-read)."""
    media: tuple[tuple[str, int], ...] = ()
    """The media its rows point at that it published (copy mode): name under media/, bytes."""


@dataclass(frozen=True, slots=True)
class ShardTask:
    """One shard: its split, name and folder, the entries it takes (in order), and whether
    they are sorted by key (the shuffled split). Called in a worker."""

    split: str
    name: str
    directory: str
    sources: tuple[Source, ...]
    shuffled: bool
    config: RunConfig
    role_id: int | None
    """The `<|role|>` id of the run's tokenizer, for tokens per role (None: not tokenized)."""
    media_dir: str | None = None
    """Copy mode: the output's media/ folder, where the task publishes the media its rows
    point at (from the parts' media/; any number of tasks may publish the same name)."""
    media: tuple[str, ...] = ()
    """The media kinds the run's rows hold (DESIGN §7): the shard's media columns."""
    embed: bool = False
    """Whether the shard's media cells carry the bytes of the copies the parts staged
    (`stages.media.embed`), read a row group at a time."""

    @property
    def rows(self) -> int:
        """The entries it takes (the engine runs a few small tasks without workers)."""
        return sum(source.end - source.start for source in self.sources)

    def __call__(self) -> ShardDone:
        from pipeline.jobs.stats.compute import shard_tables  # polars: only where shards are
        from pipeline.jobs.stats.roles import COLUMNS as ROLE_COLUMNS
        from pipeline.jobs.stats.roles import RoleTokens

        stages = reshaping_stages(self.config)
        published = self._publish_media() if self.media_dir is not None else ()
        schema = shard_schema(self.config, self.media)
        shard = self.config.stages.shard
        assert shard is not None
        writer = ShardWriter(
            self.directory, schema, split=self.split, compression=shard.compression, name=self.name
        )
        read = self._staged_media() if self.embed else None
        placeholders = _placeholder_ids(self.config) if self.media else {}
        roles = None
        if self.role_id is not None and set(ROLE_COLUMNS) <= set(schema.names):
            roles = RoleTokens(self.role_id)
        counted_tables = 0
        with writer:  # a batch of rows at a time, through every stage, to the writer
            tables: Iterable[pa.Table] = self._rows()
            for stage in stages:
                tables = _reshaped(stage, self.split, tables)
            for table in tables:
                if self.media:  # messages as chat templates read media (DESIGN §7)
                    table = with_content_parts(table, placeholders)
                if roles is not None:
                    roles.add(table)
                    counted_tables += 1
                if read is None:
                    if table.num_rows:
                        writer.write(table)
                    continue
                for start in range(0, table.num_rows, ROW_GROUP_ROWS):
                    writer.write(with_embedded_bytes(table.slice(start, ROW_GROUP_ROWS), read))
        pack = next((stage for stage in stages if isinstance(stage, Pack)), None)
        written = writer.shards[0]
        counted = shard_tables(
            str(Path(self.directory) / written.name),
            role_id=self.role_id,
            roles=roles.frame() if roles is not None and counted_tables else None,
        )
        return ShardDone(written, pack.stats() if pack is not None else None, counted, published)

    def _publish_media(self) -> tuple[tuple[str, int], ...]:
        """Copy the media the task's rows point at into the output's media/, once each."""
        assert self.media_dir is not None
        published: dict[str, int] = {}
        schema = pa.schema([THREAD_MEDIA_ARROW_SCHEMA.field(MEDIA_COLUMN)])
        for source in self.sources:  # its rows' media column, a batch at a time
            entries, files = chosen((source,), shuffled=False)
            for media in Threads(files, schema).batches(entries, batch_bounds(entries)):
                flat = pc.list_flatten(media[MEDIA_COLUMN].combine_chunks())
                frames = pc.list_flatten(pc.struct_field(flat, FRAMES))  # frame-list videos
                paths = pa.concat_arrays(
                    [pc.struct_field(flat, "path"), pc.struct_field(frames, "path")]
                )
                for path in pc.unique(paths.drop_null()).to_pylist():
                    name = path.removeprefix(f"{MEDIA_DIR}/")
                    if name == path or name in published:
                        continue
                    data = (Path(source.part_dir) / PART_MEDIA / name).read_bytes()
                    write_once(Path(self.media_dir) / name, data)
                    published[name] = len(data)
        return tuple(sorted(published.items()))

    def _staged_media(self) -> Callable[[str], bytes | None]:
        """Reads a media the task's rows point at (`media/<name>`) from the copy a part
        staged (any part holding the name: the same name holds the same bytes)."""
        staged: dict[str, Path] = {}
        for source in self.sources:
            folder = Path(source.part_dir) / PART_MEDIA
            if folder.is_dir():
                for name in os.listdir(folder):
                    staged.setdefault(name, folder / name)

        def read(path: str) -> bytes | None:
            named = content_address(path)
            found = staged.get(named[0]) if named is not None else None
            return found.read_bytes() if found is not None else None

        return read

    def _rows(self) -> Iterator[pa.Table]:
        """The task's rows, each weighted copy with its id marked (`id#copy`), in order,
        a batch of about a row group at a time (pipeline/jobs/run/shard_rows.py)."""
        schema = row_schema(self.config)
        carried = bool(self.media)
        if carried:
            schema = schema.append(THREAD_MEDIA_ARROW_SCHEMA.field(MEDIA_COLUMN))
        placeholders = _placeholder_ids(self.config) if carried else {}
        entries, files = chosen(self.sources, self.shuffled)
        threads = Threads(files, schema)
        bounds = batch_bounds(entries) or [(0, 0)]  # no rows: one empty batch
        with ExitStack() as stack:
            if self.shuffled and len(entries.rows):  # its rows come from every part
                Path(self.directory).mkdir(parents=True, exist_ok=True)
                spill = TemporaryDirectory(prefix=f".{self.name}.", dir=self.directory)
                folder = stack.enter_context(spill)
                tables = threads.spilled_batches(entries, bounds, folder)
            else:
                tables = threads.batches(entries, bounds)
            for (first, last), table in zip(bounds, tables, strict=True):
                table = _copy_ids(table, entries.copies[first:last])
                if carried:
                    table = with_media_columns(table, self.media, placeholders)
                yield table


def _reshaped(stage: Stage, split: str, tables: Iterable[pa.Table]) -> Iterator[pa.Table]:
    """`tables` as `stage` reshapes them, then what it still holds once they are given."""
    for table in tables:
        yield from stage.reshape(split, table)
    yield from stage.flush(split)


def _copy_ids(rows: pa.Table, copies: np.ndarray) -> pa.Table:
    """Rows whose copy number is not 0 get it after their id (`id#copy`)."""
    if not copies.any():
        return rows
    marked = [
        f"{thread_id}#{copy}" if copy else thread_id
        for thread_id, copy in zip(rows["id"].to_pylist(), copies.tolist(), strict=True)
    ]
    return rows.set_column(rows.schema.get_field_index("id"), "id", pa.array(marked))


def plan_shard_tasks(
    selections: Selections, part_dirs: list[Path], config: RunConfig, directory: Path
) -> list[ShardTask]:
    """The shard tasks of every split that got rows, split by split in config order."""
    settings = config.stages.shard
    assert settings is not None
    pack = config.stages.pack
    role_id = _role_id(config)
    media = config.stages.media
    keeps = config.stages.normalize is None or config.stages.normalize.multimodal == "keep"
    copies = media is not None and media.copy and keeps
    embeds = media is not None and media.stages_copies and media.embed and keeps
    media_dir = str(directory.parent / MEDIA_DIR) if copies else None
    per_row = max((stage.threads_per_row for stage in reshaping_stages(config)), default=1)
    tasks: list[ShardTask] = []
    for index, split in enumerate(selections.splits):
        totals = selections.totals[split]
        count = _shards_of(totals, settings, pack)
        if not count:
            continue
        exact = pack is None and settings.bytes_per_shard is None
        size = settings.rows_per_shard * per_row if exact else math.ceil(totals.entries / count)
        if split == selections.shuffled:
            ranges = _key_ranges(selections, index, totals, size)
        else:
            ranges = _row_ranges(selections, index, totals, size)
        names = [shard_name(split, number, len(ranges)) for number in range(len(ranges))]
        for name, sources in zip(names, ranges, strict=True):
            tasks.append(
                ShardTask(
                    split,
                    name,
                    str(directory),
                    tuple(
                        Source(
                            str(part_dirs[part]),
                            str(selections.path(selections.parts[part])),
                            index,
                            start,
                            end,
                        )
                        for part, start, end in sources
                    ),
                    split == selections.shuffled,
                    config,
                    role_id,
                    media_dir,
                    selections.media,
                    embeds,
                )
            )
    return tasks


def _role_id(config: RunConfig) -> int | None:
    """The `<|role|>` id of the run's tokenizer (None: not tokenized)."""
    if config.stages.tokenize is None:
        return None
    role: int = renderer_for(config.stages.tokenize)[0].special_ids.as_dict()[ROLE]
    return role


def _placeholder_ids(config: RunConfig) -> dict[str, int]:
    """Each media kind's placeholder id in the run's tokenizer (none: not tokenized)."""
    if config.stages.tokenize is None:
        return {}
    renderer = renderer_for(config.stages.tokenize)[0]
    return {kind: number for kind, (_, number) in renderer.media_tokens.items()}


def _shards_of(totals: SplitTotals, settings: ShardSettings, pack: PackSettings | None) -> int:
    """How many shards a split's entries make (0 when it has none)."""
    if not totals.entries:
        return 0
    if pack is not None:
        sequences = math.ceil(totals.tokens / pack.seq_len)
        return max(1, shard_count(sequences, SEQUENCES_PER_SHARD))
    count = shard_count(totals.entries, settings.rows_per_shard)
    if settings.bytes_per_shard is not None:
        count = max(count, math.ceil(totals.nbytes / settings.bytes_per_shard))
    return count


Ranges = list[list[tuple[int, int, int]]]
"""Per shard, its (part number, first entry, end entry) of each part it takes from."""


def _row_ranges(selections: Selections, split: int, totals: SplitTotals, size: int) -> Ranges:
    """A split in plan order, cut every `size` entries, or just before the group the cut
    would fall in (after it when that group is the whole shard)."""
    offsets = np.concatenate([[0], np.cumsum(totals.per_part)]).tolist()
    cuts = [0]
    for target in range(size, totals.entries, size):
        part = int(np.searchsorted(offsets, target, "right")) - 1
        with pa.memory_map(str(selections.path(selections.parts[part]))) as mapped:
            starts = pa.ipc.open_file(mapped).get_batch(split)["start"].to_numpy(False)
        local = target - offsets[part]
        before = int(np.flatnonzero(starts[: local + 1])[-1]) if starts[: local + 1].any() else 0
        cut = offsets[part] + before
        if cut <= cuts[-1]:
            after = np.flatnonzero(starts[local + 1 :])
            cut = offsets[part] + (local + 1 + int(after[0]) if len(after) else len(starts))
        if cuts[-1] < cut < totals.entries:
            cuts.append(cut)
    cuts.append(totals.entries)
    ranges: Ranges = []
    for first, last in itertools.pairwise(cuts):
        taken = []
        for part in range(len(totals.per_part)):
            start, end = max(first, offsets[part]), min(last, offsets[part + 1])
            if start < end:
                taken.append((part, start - offsets[part], end - offsets[part]))
        ranges.append(taken)
    return ranges


def _key_ranges(selections: Selections, split: int, totals: SplitTotals, size: int) -> Ranges:
    """The shuffled split in key order (each part's entries sorted by key; equal keys, a
    group's rows, in plan order), cut every `size` entries: each cut's key is found by a
    search over the key space counting, in every part at once, the entries up to it (no
    process holds the split's keys: the parts' selections are memory-mapped)."""
    with ExitStack() as stack:
        keys = []
        for part_id in selections.parts:
            mapped = stack.enter_context(pa.memory_map(str(selections.path(part_id))))
            keys.append(pa.ipc.open_file(mapped).get_batch(split)["key"].to_numpy())
        ranks = np.arange(size, totals.entries, size, dtype=np.int64)
        cuts = _cut_positions(keys, ranks)
        ends = [len(part_keys) for part_keys in keys]
    bounds = [[0] * len(keys), *cuts, ends]
    ranges: Ranges = []
    for number in range(len(bounds) - 1):
        ranges.append(
            [
                (part, bounds[number][part], bounds[number + 1][part])
                for part in range(len(keys))
                if bounds[number][part] < bounds[number + 1][part]
            ]
        )
    return ranges


def _cut_positions(keys: list[np.ndarray], ranks: np.ndarray) -> list[list[int]]:
    """For each rank r, where each part's sorted keys are cut so that about r entries come
    before it in key order: before the entries of the key at rank r (a group's rows share
    their key), or after them when that would leave the shard empty; cuts that would
    leave one empty are left out."""
    if not len(ranks):
        return []
    low = np.zeros(len(ranks), np.uint64)
    high = np.full(len(ranks), np.iinfo(np.uint64).max, np.uint64)
    while (low < high).any():  # the key of the entry at rank r: r + 1 entries up to it
        middle = low + (high - low) // np.uint64(2)
        enough = _count(keys, middle, "right") > ranks
        high = np.where(enough, middle, high)
        low = np.where(enough, low, middle + np.uint64(1))
    below = np.array([np.searchsorted(part, low, "left") for part in keys]).T
    through = np.array([np.searchsorted(part, low, "right") for part in keys]).T
    cuts: list[list[int]] = []
    done, total = 0, sum(len(part) for part in keys)
    for before, after in zip(below.tolist(), through.tolist(), strict=True):
        cut = before if sum(before) > done else after  # a group (equal keys) is never cut
        if done < sum(cut) < total:
            cuts.append(cut)
            done = sum(cut)
    return cuts


def _count(
    keys: list[np.ndarray], values: np.ndarray, side: Literal["left", "right"]
) -> np.ndarray:
    """How many entries of every part have a key at or below (`right`) each value."""
    total = np.zeros(len(values), np.int64)
    for part in keys:
        total += np.searchsorted(part, values, side)
    return total


def packing_stats(done: list[ShardDone], seq_len: int) -> PackingStats:
    """What packing every shard did, added up."""
    every = [each.packing for each in done if each.packing is not None]
    return PackingStats(
        sequences=sum(stats.sequences for stats in every),
        rows=sum(stats.rows for stats in every),
        tokens=sum(stats.tokens for stats in every),
        seq_len=seq_len,
    )
