"""`tokenize_dataset`: the job around the tokenize stage: inputs read, every thread
tokenized, and the dataset written (DESIGN §7) with the augmented tokenizer, the records
that did not become threads and the threads left out, each with its reason."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.accounting import Account
from pipeline.jobs.driver import StreamDriver
from pipeline.jobs.read import ReadSpec, read
from pipeline.output.files import atomic_output, discard_if_none
from pipeline.output.shards import SHARD_ROWS, Shard, ShardWriter
from pipeline.output.tokenizer import write_tokenizer
from pipeline.quarantine import REJECTED_FILE, Rejection, rejection_line
from pipeline.stages.contract import ORIGINAL_THREAD, TOKENS_CUT, Batch
from pipeline.stages.tokenize import Tokenize
from pipeline.tokenize.loading import LoadedTokenizer
from pipeline.tokenize.overlong import OverlongPolicy, drop_reason
from pipeline.tokenize.renderer import LabelPolicy, Renderer
from pipeline.tokenize.tables import BATCH_SIZE, TOKENIZED_SCHEMA


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
    max_tokens: int | None = None,
    overlong: OverlongPolicy = "drop",
    shard_rows: int = SHARD_ROWS,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[Account], None] | None = None,
) -> TokenizeResult:
    """Read `inputs`, tokenize every thread and write the dataset under `output` (DESIGN
    §7): `data/train-*.parquet`, `tokenizer/tokenizer.json` (augmented) with
    `tokenizer/mms_special_tokens.json`, `quarantine/rejected.jsonl` (records that did not
    become threads) and `quarantine/dropped.jsonl` (threads left out, with the reason), each
    only when it holds something.
    Nothing appears unless the whole run succeeds. `spec` says how inputs are read.

    The job is a source (`read`), one stage (Tokenize) and a sink (the shards and the
    quarantine files)."""
    output = Path(output)
    renderer = Renderer(tokenizer, bos=bos, policy=policy)
    renderer.check_shipped_tokenizer()  # before any text is encoded: fail fast
    earlier = [path for path in output.rglob("*") if path.is_file()] if output.is_dir() else []
    account = Account()
    quarantine, dropped = (
        output / REJECTED_FILE,
        output / "quarantine" / "dropped.jsonl",
    )
    with (
        atomic_output(quarantine) as rejected_out,
        atomic_output(dropped) as dropped_out,
        ShardWriter(output / "data", TOKENIZED_SCHEMA, shard_rows=shard_rows) as shards,
    ):
        sink = _TokenizedSink(shards, rejected_out, dropped_out, account, max_tokens)
        driver = StreamDriver(
            [Tokenize(lambda: renderer, max_tokens, overlong)],
            sink,
            account,
            batch_size=batch_size,
            progress=(lambda: progress(account)) if progress is not None else None,
        )
        driver.run(read(inputs, spec, on_reject=driver.rejected, stats=account, exclude=earlier))
        tokenizer_file = write_tokenizer(output / "tokenizer", renderer, tokenizer)
    discard_if_none(dropped, account.dropped_total)
    discard_if_none(quarantine, account.quarantined_total)
    return TokenizeResult(
        output,
        shards.shards,
        account,
        quarantine,
        dropped,
        tokenizer_file,
        renderer.text_encoder_name,
    )


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
    ):
        self.shards, self.rejected_out, self.dropped_out = shards, rejected, dropped
        self.account, self.max_tokens = account, max_tokens

    def rejected(self, rejection: Rejection) -> None:
        self.rejected_out.write(rejection_line(rejection))

    def write(self, batch: Batch, rows: pa.Table | None, reasons: list[str | None]) -> None:
        assert rows is not None  # the tokenize stage built them
        for row, reason in enumerate(reasons):
            if reason is not None:
                self.dropped_out.write(self._drop_line(rows, row, reason))
                self.account.tokens_dropped[reason] += rows["num_tokens"][row].as_py()
        kept = rows.filter(pa.array([reason is None for reason in reasons], pa.bool_()))
        self.account.truncated += kept.num_rows - kept[ORIGINAL_THREAD].null_count
        self.account.tokens_truncated += pc.sum(kept[TOKENS_CUT]).as_py() or 0
        kept = kept.select(TOKENIZED_SCHEMA.names)
        self.account.count_written(self.shards.split, kept)
        if kept.num_rows:
            self.shards.write(kept)

    def _drop_line(self, rows: pa.Table, row: int, code: str) -> bytes:
        """One line of `quarantine/dropped.jsonl`."""
        meta = orjson.loads(rows["meta"][row].as_py())
        assert self.max_tokens is not None  # only a limit drops threads here
        return orjson.dumps(
            {
                "id": rows["id"][row].as_py(),
                "source": meta.get("source"),
                "locator": meta.get("locator"),
                "stage": "tokenize",
                "code": code,
                "reason": drop_reason(code, rows["num_tokens"][row].as_py(), self.max_tokens),
            },
            option=orjson.OPT_APPEND_NEWLINE,
        )
