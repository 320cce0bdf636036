"""`tokenize_dataset`: the job around the tokenize stage: inputs read, every thread
tokenized, and the dataset written (DESIGN §7) with the augmented tokenizer, the records
that did not become threads and the threads left out, each with its reason."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from pipeline.accounting import ReadStats
from pipeline.jobs.read import ReadSpec, read
from pipeline.output.files import atomic_output
from pipeline.output.shards import SHARD_ROWS, Shard, ShardWriter
from pipeline.output.tokenizer import write_tokenizer
from pipeline.quarantine import rejection_line
from pipeline.tokenize.loading import LoadedTokenizer
from pipeline.tokenize.overlong import Drop, OverlongPolicy
from pipeline.tokenize.renderer import LabelPolicy, Renderer
from pipeline.tokenize.stage import BATCH_SIZE, TOKENIZED_SCHEMA, TokenizeStats, tokenize_threads


@dataclass(frozen=True)
class TokenizeResult:
    """What `tokenize_dataset` wrote, and the counts that prove nothing was lost."""

    output: Path
    shards: list[Shard]
    read: ReadStats
    stats: TokenizeStats
    quarantine: Path
    dropped: Path
    tokenizer: Path
    text_encoder: str
    """Which library encoded the text: `tiktoken` or `tokenizers`."""

    @property
    def balanced(self) -> bool:
        """records read = converted + quarantined, and threads = written + dropped."""
        return (
            self.read.balanced
            and self.stats.balanced
            and self.read.threads == self.stats.threads_in
        )


def tokenize_dataset(
    inputs: str | Sequence[str],
    output: str | Path,
    tokenizer: LoadedTokenizer,
    spec: ReadSpec | None = None,
    *,
    bos: bool = False,
    policy: LabelPolicy = "assistant",
    max_tokens: int | None = None,
    overlong: OverlongPolicy = "drop",
    shard_rows: int = SHARD_ROWS,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[ReadStats], None] | None = None,
) -> TokenizeResult:
    """Read `inputs`, tokenize every thread and write the dataset under `output` (DESIGN
    §7): `data/train-*.parquet`, `tokenizer/tokenizer.json` (augmented) with
    `tokenizer/mms_special_tokens.json`, `quarantine/rejected.jsonl` (records that did not
    become threads) and `quarantine/dropped.jsonl` (threads left out, with the reason).
    Nothing appears unless the whole run succeeds. `spec` says how inputs are read."""
    output = Path(output)
    renderer = Renderer(tokenizer, bos=bos, policy=policy)
    renderer.check_shipped_tokenizer()  # before any text is encoded: fail fast
    earlier = [path for path in output.rglob("*") if path.is_file()] if output.is_dir() else []
    read_stats, stats = ReadStats(), TokenizeStats()
    quarantine, dropped = (
        output / "quarantine" / "rejected.jsonl",
        output / "quarantine" / "dropped.jsonl",
    )
    with (
        atomic_output(quarantine) as rejected_out,
        atomic_output(dropped) as dropped_out,
        ShardWriter(output / "data", TOKENIZED_SCHEMA, shard_rows=shard_rows) as shards,
    ):
        threads = read(
            inputs,
            spec,
            on_reject=lambda rejection: rejected_out.write(rejection_line(rejection)),
            stats=read_stats,
            exclude=earlier,
        )
        for table in tokenize_threads(
            threads,
            renderer,
            max_tokens=max_tokens,
            overlong=overlong,
            batch_size=batch_size,
            stats=stats,
            on_drop=lambda drop: dropped_out.write(drop_line(drop)),
        ):
            shards.write(table)
            if progress is not None:
                progress(read_stats)
        tokenizer_file = write_tokenizer(output / "tokenizer", renderer, tokenizer)
    return TokenizeResult(
        output,
        shards.shards,
        read_stats,
        stats,
        quarantine,
        dropped,
        tokenizer_file,
        renderer.text_encoder_name,
    )


def drop_line(drop: Drop) -> bytes:
    """One line of `quarantine/dropped.jsonl`."""
    meta = drop.thread.meta
    return orjson.dumps(
        {
            "id": drop.thread.id,
            "source": meta.get("source"),
            "locator": meta.get("locator"),
            "stage": "tokenize",
            "code": drop.code,
            "reason": drop.reason,
        },
        option=orjson.OPT_APPEND_NEWLINE,
    )
