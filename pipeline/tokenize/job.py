"""`tokenize_dataset`: the job around the tokenize stage: inputs read, every thread
tokenized, and the dataset written (DESIGN §7) with the augmented tokenizer, the records
that did not become threads and the threads left out, each with its reason."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from pipeline.formats import AUTO
from pipeline.ingest import ReadStats, read
from pipeline.output_files import atomic_output
from pipeline.quarantine import rejection_line
from pipeline.shards import SHARD_ROWS, Shard, ShardWriter
from pipeline.sources import DEFAULT_SPLIT
from pipeline.tokenize.hf_files import pad_token, special_tokens_map, tokenizer_config, vocabulary
from pipeline.tokenize.loading import LoadedTokenizer, TokenizerLoadError, load_tokenizer
from pipeline.tokenize.overlong import Drop, OverlongPolicy
from pipeline.tokenize.renderer import IGNORE, LABEL_POLICIES, LabelPolicy, Renderer
from pipeline.tokenize.stage import BATCH_SIZE, TOKENIZED_SCHEMA, TokenizeStats, tokenize_threads

SPECIAL_TOKENS_FILE = "mms_special_tokens.json"
"""Beside tokenizer.json: the MMS special ids, the BOS, the renderer, the text encoder, both
tokenizers' sha256."""


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
    *,
    bos: bool = False,
    policy: LabelPolicy = "assistant",
    format: str = AUTO,
    max_tokens: int | None = None,
    overlong: OverlongPolicy = "drop",
    shard_rows: int = SHARD_ROWS,
    batch_size: int = BATCH_SIZE,
    split: str = DEFAULT_SPLIT,
    hf_config: str | None = None,
    progress: Callable[[ReadStats], None] | None = None,
) -> TokenizeResult:
    """Read `inputs`, tokenize every thread and write the dataset under `output` (DESIGN
    §7): `data/train-*.parquet`, `tokenizer/tokenizer.json` (augmented) with
    `tokenizer/mms_special_tokens.json`, `quarantine/rejected.jsonl` (records that did not
    become threads) and `quarantine/dropped.jsonl` (threads left out, with the reason).
    Nothing appears unless the whole run succeeds. `split`/`hf_config` steer hf: inputs."""
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
            format=format,
            on_reject=lambda rejection: rejected_out.write(rejection_line(rejection)),
            stats=read_stats,
            exclude=earlier,
            split=split,
            hf_config=hf_config,
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


def write_tokenizer(
    directory: Path, renderer: Renderer, base: LoadedTokenizer, *, base_path: str | None = None
) -> Path:
    """The augmented tokenizer.json, the tokenizer_config.json (bos/eos/unk/pad, the MMS
    tokens, the chat template that renders the shards) and special_tokens_map.json that
    make it a complete Hugging Face tokenizer, and mms_special_tokens.json recording the
    special ids, the BOS (if rendered), the text encoder, how the vocabulary grew and both
    tokenizers' sha256. No Tokenizer is serialized; one is parsed only to check the file
    when tiktoken encoded the text."""
    renderer.check_shipped_tokenizer()
    augmented = renderer.tokenizer_json()
    file = directory / "tokenizer.json"
    with atomic_output(file) as out:
        out.write(augmented)
    bos_id = renderer.bos_id
    pad = pad_token(renderer, base)
    record = {
        "renderer": renderer.name,
        "label_policy": renderer.policy,
        "ignore_index": IGNORE,
        "text_encoder": renderer.text_encoder_name,
        "special_tokens": renderer.special_ids.as_dict(),
        "vocabulary": vocabulary(renderer, base),
        "pad_token": pad,
        "pad_id": renderer.token_id(pad),
        "bos": {"token": base.bos_token, "id": bos_id} if bos_id is not None else None,
        "tokenizer": {"file": file.name, "sha256": hashlib.sha256(augmented).hexdigest()},
        "base_tokenizer": {"path": base_path or str(base.path), "sha256": base.sha256},
    }
    config = tokenizer_config(renderer, base)
    files = {
        SPECIAL_TOKENS_FILE: record,
        "tokenizer_config.json": config,
        "special_tokens_map.json": special_tokens_map(config),
    }
    for name, data in files.items():
        with atomic_output(directory / name) as out:
            out.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
    return file


def shipped_renderer(directory: Path) -> Renderer:
    """The Renderer an output's `tokenizer/` records: its tokenizer, BOS setting and labels
    policy (TokenizerLoadError when the folder does not hold what write_tokenizer wrote)."""
    try:
        record = orjson.loads((directory / SPECIAL_TOKENS_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError) as err:
        raise TokenizerLoadError(f"{directory / SPECIAL_TOKENS_FILE}: {err}") from None
    policy = record.get("label_policy", "assistant")
    if policy not in LABEL_POLICIES:
        raise TokenizerLoadError(
            f"{directory / SPECIAL_TOKENS_FILE} names an unknown labels policy {policy!r}"
        )
    renderer = Renderer(load_tokenizer(directory), bos=record.get("bos") is not None, policy=policy)
    if renderer.special_ids.as_dict() != record.get("special_tokens"):
        raise TokenizerLoadError(
            f"{directory}: the MMS token ids differ from {SPECIAL_TOKENS_FILE}"
        )
    return renderer
