"""`tokenize_dataset`: the job around the tokenize stage: inputs read, every thread
tokenized, and the dataset written (DESIGN §7) with the augmented tokenizer, the records
that did not become threads and the threads left out, each with its reason."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.accounting import Account
from pipeline.jobs.batch_steps import StreamDriver
from pipeline.jobs.read import ReadSpec, files_to_read, read
from pipeline.media.check import MEDIA_DIR, content_address
from pipeline.mms import MEDIA_COLUMN, media_to_arrow
from pipeline.mms.groups import GROUP_DROP
from pipeline.mms.media_columns import (
    COLUMN_KINDS,
    MEDIA_SHARD_COLUMNS,
    kind_fields,
    media_fields,
    parts_schema,
    with_content_parts,
    with_embedded_bytes,
    with_media_columns,
)
from pipeline.objectives import SCHEMAS
from pipeline.output.files import atomic_output, discard_if_none
from pipeline.output.folder import OutputFolder, Publication
from pipeline.output.manifest import (
    DATA_DIR,
    MANIFEST_FILE,
    build_manifest,
    file_entries,
    input_record,
    json_sha256,
    published_files,
    write_manifest,
)
from pipeline.output.overlap import refuse_inputs_in_managed_places
from pipeline.output.shards import ROW_GROUP_ROWS, SHARD_ROWS, Shard, ShardWriter
from pipeline.output.tokenizer import TOKENIZER_DIR, shipped_tokenizer_record, write_tokenizer
from pipeline.quarantine import DROPPED_FILE, REJECTED_FILE, Rejection, rejection_line
from pipeline.stages.contract import ORIGINAL_THREAD, TOKENS_CUT, Batch, Stage
from pipeline.stages.objective import REASONS as OBJECTIVE_REASONS
from pipeline.stages.objective import ObjectiveStage
from pipeline.stages.references import AttachReferences
from pipeline.stages.tokenize import Tokenize
from pipeline.tokenize.loading import LoadedTokenizer
from pipeline.tokenize.overlong import DROP_CODES, OverlongPolicy, drop_reason
from pipeline.tokenize.renderer import LabelPolicy, Renderer
from pipeline.tokenize.tables import BATCH_SIZE, TOKENIZED_SCHEMA

STAGED_MEDIA = "media-staged"
"""Where, in the work directory, the media read are kept for the shards to embed (and
not copied into the output): removed with the work directory."""


@dataclass(frozen=True)
class TokenizeResult:
    """What `tokenize_dataset` wrote, and the counts that prove nothing was lost."""

    output: Path
    shards: list[Shard]
    account: Account
    quarantine: Path
    dropped: Path
    tokenizer: Path
    text_encoder: str
    """Which library encoded the text: `tiktoken` or `tokenizers`."""
    publication: Publication
    """What publishing removed of an earlier output in the folder."""

    @property
    def balanced(self) -> bool:
        """records read = converted + quarantined, and threads = written + dropped."""
        return self.account.balanced


def tokenize_dataset(
    inputs: str | Sequence[str],
    output: str | Path,
    tokenizer: LoadedTokenizer,
    spec: ReadSpec | None = None,
    *,
    bos: bool = False,
    policy: LabelPolicy = "assistant",
    objective: str = "sft",
    references: dict[str, Any] | None = None,
    max_tokens: int | None = None,
    overlong: OverlongPolicy = "drop",
    shard_rows: int = SHARD_ROWS,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[Account], None] | None = None,
    overwrite: bool = False,
) -> TokenizeResult:
    """Read `inputs`, tokenize every thread and write the dataset under `output` (DESIGN
    §7): `data/train-*.parquet`, `tokenizer/tokenizer.json` (augmented) with
    `tokenizer/mms_special_tokens.json`, `quarantine/rejected.jsonl` (records that did not
    become threads) and `quarantine/dropped.jsonl` (threads left out, with the reason), each
    only when it holds something, and `manifest.json` (inputs, settings, counts, every
    file's sha256). The folder is claimed as every output folder is
    (pipeline/output/folder.py; `overwrite` lets it take over files mms did not write);
    nothing appears unless the whole run succeeds. `spec` says how inputs are read.
    `objective` says what a row is (pipeline/objectives): a thread (`sft`), a pair, a
    labelled completion or a prompt; `references` (answers by thread id) go to the
    threads' `meta.reference`, which prompt rows carry.

    The job is a source (`read`), its stages (Tokenize, and the objective's when it is
    not sft) and a sink (the shards and the quarantine files)."""
    spec = spec or ReadSpec()
    renderer = Renderer(tokenizer, bos=bos, policy=policy)
    renderer.check_shipped_tokenizer()  # before any text is encoded: fail fast
    found = files_to_read(inputs, spec)
    refuse_inputs_in_managed_places(output, found.files)
    account = Account()
    with OutputFolder(output, overwrite=overwrite) as folder:
        staging = folder.staging
        spec, staged = _staging_media(spec, folder)
        quarantine, dropped = staging / REJECTED_FILE, staging / DROPPED_FILE
        with (
            atomic_output(quarantine) as rejected_out,
            atomic_output(dropped) as dropped_out,
            ShardWriter(staging / DATA_DIR, SCHEMAS[objective], shard_rows=shard_rows) as shards,
        ):
            stages: list[Stage] = [AttachReferences(references)] if references else []
            stages.append(
                Tokenize(lambda: renderer, max_tokens, overlong, prompt_lengths=objective != "sft")
            )
            if objective != "sft":
                stages.append(ObjectiveStage(objective, lambda: renderer.generation_prompt_ids))
            sink = _TokenizedSink(shards, rejected_out, dropped_out, account, max_tokens, stages)
            sink.placeholders = {kind: n for kind, (_, n) in renderer.media_tokens.items()}
            sink.embed_from = staged
            driver = StreamDriver(
                stages,
                sink,
                account,
                batch_size=batch_size,
                progress=(lambda: progress(account)) if progress is not None else None,
            )
            driver.run(read(inputs, spec, on_reject=driver.rejected, stats=account))
            write_tokenizer(staging / TOKENIZER_DIR, renderer, tokenizer, media=sink.media)
        written = sink.with_media(SCHEMAS[objective], shard_rows) if sink.media else shards.shards
        discard_if_none(dropped, account.dropped_total)
        discard_if_none(quarantine, account.quarantined_total)
        settings = {
            "tokenize": {
                "tokenizer": str(tokenizer.path),
                "bos": bos,
                "train_on": policy,
                "objective": objective,
                "max_tokens": max_tokens,
                "overlong": overlong,
                "shard_rows": shard_rows,
            },
            "format": spec.format,
        }
        write_manifest(
            staging / MANIFEST_FILE,
            build_manifest(
                inputs=[input_record(path, spec.format) for path in account.files],
                config=settings,
                config_digest=json_sha256(settings),
                counts=account.to_dict(),
                shards={shards.split: written},
                tokenizer=shipped_tokenizer_record(staging),
                reports=[],
                files=file_entries(staging, published_files(staging)),
            ),
        )
        publication = folder.publish()
        folder.finish()
    out = Path(output)
    return TokenizeResult(
        out,
        written,
        account,
        out / REJECTED_FILE,
        out / DROPPED_FILE,
        out / TOKENIZER_DIR / "tokenizer.json",
        renderer.text_encoder_name,
        publication,
    )


def _staging_media(spec: ReadSpec, folder: OutputFolder) -> tuple[ReadSpec, Path | None]:
    """`spec` with the folder its media copies go to, when it keeps copies (copy mode: the
    output's media/; to embed only: the work directory's STAGED_MEDIA), and the folder the
    shards' bytes are embedded from (None: they are not)."""
    media = spec.media
    if media is None or spec.options.multimodal != "keep" or not media.stages_copies:
        return spec, None
    store = folder.staging / MEDIA_DIR if media.copy else folder.work / STAGED_MEDIA
    return dataclasses.replace(spec, media_store=str(store)), store if media.embed else None


def _carried(names: list[str]) -> list[str]:
    """The media columns among a written row's columns (the threads' and each kind's)."""
    return [name for name in (MEDIA_COLUMN, *COLUMN_KINDS) if name in names]


def _blank(field: pa.Field, rows: int) -> pa.ChunkedArray:
    """`rows` rows without media in the column `field`: null `media`, empty lists."""
    if field.name == MEDIA_COLUMN:
        return pa.chunked_array([pa.nulls(rows, field.type)])
    return pa.chunked_array([pa.array([[]] * rows, field.type)])


class _TokenizedSink:
    """Kept rows to the shards (one split, `train`), dropped threads to
    quarantine/dropped.jsonl with why, rejected records to quarantine/rejected.jsonl."""

    def __init__(
        self,
        shards: ShardWriter,
        rejected: BinaryIO,
        dropped: BinaryIO,
        account: Account,
        max_tokens: int | None,
        stages: list[Stage],
    ):
        self.shards, self.rejected_out, self.dropped_out = shards, rejected, dropped
        self.account, self.max_tokens, self.last_stage = account, max_tokens, stages[-1]
        self.media = False
        """Whether a written row holds media: the shipped tokenizer then has the
        placeholders its rows render (DESIGN §4), and the shards their media columns."""
        self.placeholders: dict[str, int] = {}
        """Each media kind's placeholder id (the renderer's)."""
        self.kinds: set[str] = set()
        self.before_media = 0
        """The rows written before the first row with media (they hold none)."""
        self.carried: pa.ipc.RecordBatchFileWriter | None = None
        """From the first row with media on, every written row's media columns, in order
        (`with_media` joins them to the shards once the kinds are known)."""
        self.embed_from: Path | None = None
        """The folder of the media copies whose bytes the shards embed (None: paths only)."""

    def rejected(self, rejection: Rejection) -> None:
        self.rejected_out.write(rejection_line(rejection))

    def write(self, batch: Batch, rows: pa.Table | None, reasons: list[str | None]) -> None:
        assert rows is not None  # the tokenize stage built them
        for row, reason in enumerate(reasons):
            if reason is not None:
                self.dropped_out.write(self._drop_line(rows, row, reason))
                self.account.tokens_dropped[reason] += rows["num_tokens"][row].as_py()
        keep = pa.array([reason is None for reason in reasons], pa.bool_())
        kept = rows.filter(keep)
        self.account.truncated += kept.num_rows - kept[ORIGINAL_THREAD].null_count
        self.account.tokens_truncated += pc.sum(kept[TOKENS_CUT]).as_py() or 0
        self.account.count_written(self.shards.split, kept.select(TOKENIZED_SCHEMA.names))
        if not kept.num_rows:
            return
        kept = self._media_of(batch, rows, keep, kept)
        for reshaped in self.last_stage.reshape(self.shards.split, kept):
            self.shards.write(reshaped.select(self.shards.schema.names))
            if not self.media:
                self.before_media += reshaped.num_rows
                continue
            carried = reshaped.select(_carried(reshaped.column_names))
            if self.carried is None:
                self.carried = pa.ipc.new_file(str(self._carried_path()), carried.schema)
            self.carried.write_table(carried)

    def _media_of(self, batch: Batch, rows: pa.Table, keep: pa.Array, kept: pa.Table) -> pa.Table:
        """`kept` with the threads' `media` column and a list column per kind (all three:
        the kinds held are known at the end), from the first batch whose kept rows hold
        media on; as it is before."""
        assert len(batch.threads) == rows.num_rows  # the tokenize stage's rows, in order
        counts = pc.list_value_length(rows["messages"]).to_pylist()
        media = media_to_arrow(batch.threads, counts).filter(keep)
        kinds = pc.struct_field(pc.list_flatten(media), "kind").to_pylist()
        if not kinds and not self.media:
            return kept
        self.media = True
        self.kinds.update(kinds)
        kept = kept.append_column(MEDIA_COLUMN, media)
        return with_media_columns(kept, tuple(MEDIA_SHARD_COLUMNS), self.placeholders)

    def _carried_path(self) -> Path:
        return self.shards.directory.parent / ".media-columns.arrow"

    def with_media(self, schema: pa.Schema, shard_rows: int) -> list[Shard]:
        """The shards written again with their rows' media columns (of the kinds held),
        cut as before (DESIGN §7: as `mms run` writes them); the shards written."""
        assert self.carried is not None
        self.carried.close()
        kinds = [kind for kind in MEDIA_SHARD_COLUMNS if kind in self.kinds]
        fields = media_fields(kinds) if "messages" in schema.names else kind_fields(kinds)
        wide = parts_schema(pa.schema([*schema, *fields]))
        path = self._carried_path()
        with pa.memory_map(str(path)) as mapped:
            carried = pa.ipc.open_file(mapped).read_all()
            before = [_blank(field, self.before_media) for field in fields]
            with ShardWriter(self.shards.directory, wide, shard_rows=shard_rows) as writer:
                start = 0
                for shard in self.shards.shards:
                    table = pq.read_table(self.shards.directory / shard.name)
                    for field, blank in zip(fields, before, strict=True):
                        column = pa.chunked_array(
                            [*blank.chunks, *carried[field.name].chunks], field.type
                        )
                        table = table.append_column(field, column.slice(start, table.num_rows))
                    self._write_embedded(writer, with_content_parts(table, self.placeholders))
                    start += table.num_rows
        path.unlink()
        return writer.shards

    def _write_embedded(self, writer: ShardWriter, table: pa.Table) -> None:
        """`table` to `writer`, its media cells carrying their copies' bytes (`embed_from`),
        a row group at a time."""
        folder = self.embed_from
        if folder is None:
            writer.write(table)
            return

        def read(path: str) -> bytes | None:
            named = content_address(path)
            found = folder / named[0] if named is not None else None
            return found.read_bytes() if found is not None and found.is_file() else None

        for start in range(0, table.num_rows, ROW_GROUP_ROWS):
            writer.write(with_embedded_bytes(table.slice(start, ROW_GROUP_ROWS), read))

    def _drop_line(self, rows: pa.Table, row: int, code: str) -> bytes:
        """One line of `quarantine/dropped.jsonl`."""
        meta = orjson.loads(rows["meta"][row].as_py())
        own = code.removeprefix(GROUP_DROP)
        stage = "tokenize" if own in DROP_CODES else ObjectiveStage.name
        if own != code:
            meaning = DROP_CODES.get(own) or OBJECTIVE_REASONS[own]
            reason = f"another thread of its group was left out: {meaning}"
        elif stage == "tokenize":
            assert self.max_tokens is not None  # only a limit drops threads in tokenize
            reason = drop_reason(own, rows["num_tokens"][row].as_py(), self.max_tokens)
        else:
            reason = OBJECTIVE_REASONS[own]
        return orjson.dumps(
            {
                "id": rows["id"][row].as_py(),
                "source": meta.get("source"),
                "locator": meta.get("locator"),
                "stage": stage,
                "code": code,
                "reason": reason,
            },
            option=orjson.OPT_APPEND_NEWLINE,
        )
