"""`mms inspect`: threads drawn the way the MMS spec draws them, or their tokens, from any
input or from a tokenized shard."""

from __future__ import annotations

import os
from pathlib import Path

import click
import orjson
import pyarrow.parquet as pq
from rich.console import Console

from pipeline.accounting import Account
from pipeline.cli.options import given, input_format_option, train_on_option
from pipeline.cli.output import output_argument, stderr
from pipeline.cli.writes import writes
from pipeline.jobs.read import ReadSpec, read
from pipeline.mms import Thread
from pipeline.output.hub import is_hub_output
from pipeline.sources import InputError
from pipeline.tokenize import Renderer, TokenizerLoadError, load_tokenizer
from pipeline.tokenize.inspect import (
    ThreadNotFoundError,
    pick_threads,
    read_stored,
    show,
    stored_encoding,
    token_triples,
)
from pipeline.wording import visible


@writes()
@click.command(
    "inspect",
    epilog="\b\nExamples:\n"
    "  mms inspect out/threads.jsonl                     the first thread, message by message\n"
    "  mms inspect out/threads.jsonl --limit 3           the first three\n"
    "  mms inspect out/threads.jsonl --id oasst-42       the thread with that id\n"
    "  mms inspect raw/chat.json --from sharegpt         any input format, normalized first\n"
    "  mms inspect out/threads.jsonl --tokenizer tokenizers/llama3 --bos\n"
    "                                                    its tokens, trained ones marked\n"
    "  mms inspect out/threads.jsonl --tokenizer tokenizers/llama3 > tokens.txt\n"
    "  mms inspect out/run/data/train-00000-of-00001.parquet   a shard's STORED tokens\n"
    "  mms inspect out/run --id oasst-42                 an output: the shard holding it\n"
    "  mms inspect hf:me/quickstart                      a pushed output (fetched or cached)\n"
    "  mms inspect out/run/data/train-00000-of-00001.parquet --triples\n"
    "                                                    (offset, id, label, token) lines\n"
    "\b\nWithout a terminal (a pipe or a file) the output is plain text:\n"
    "  'Hello' ' world'   prompt tokens, repr-escaped (spaces and \\n show)\n"
    "  [['Hello']]        trained tokens (their labels are their ids)\n"
    "  <|role|>           special tokens, as is ([[<|role|>]] when trained)\n"
    "  '😀'{4}            several byte tokens that together make one character",
)
@click.argument("file", metavar="FILE")
@click.option("--id", "thread_id", default=None, metavar="ID", help="Show the thread with this id.")
@click.option(
    "--tokenizer",
    "tokenizer_spec",
    default=None,
    metavar="PATH",
    help="Show the tokens `mms tokenize` makes with this base tokenizer (a tokenizer.json, "
    "a directory holding one, or a Hub name in the local cache).",
)
@input_format_option("Input format; `auto` detects it from the first records.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="N",
    help="How many threads to show, from the first one.",
)
@click.option(
    "--bos",
    is_flag=True,
    help="With --tokenizer: start with the BOS token, as `mms tokenize --bos` does.",
)
@train_on_option(
    "With --tokenizer: which assistant messages are trained, as `mms tokenize --train-on` says."
)
@click.option(
    "--triples",
    is_flag=True,
    help="Print one (offset, id, label, token) line per token instead of the drawing.",
)
def inspect_command(
    file: str,
    thread_id: str | None,
    tokenizer_spec: str | None,
    input_format: str,
    limit: int,
    bos: bool,
    policy: str,
    triples: bool,
) -> None:
    """Show threads of FILE the way the MMS spec draws them, or their tokens.

    FILE is threads in any input format, a tokenized shard (its stored tokens), or an
    output folder or pushed output (hf:ORG/NAME[@REVISION]): its first shard, or the one
    holding --id.

    One block per message: role, context name, assistant format, content and end_turn.
    With --tokenizer, the tokens the model sees instead, rendered as `mms tokenize` does
    (mms-v0): trained tokens highlighted, special tokens marked, counts per message and
    in total, so you can check exactly what is learned. Exit status: 0 shown, 2 usage error
    (e.g. no thread with that --id).
    """
    _check_usage(thread_id, tokenizer_spec, bos, triples)
    if is_hub_output(file) or Path(file).is_dir():
        file = _shard_of(output_argument(file), thread_id)
    if _is_shard(file):
        if given("policy"):
            raise click.UsageError("a shard shows its stored labels; --train-on applies to threads")
        _inspect_shard(file, thread_id, tokenizer_spec, limit, triples)
        return
    if given("policy") and tokenizer_spec is None:
        raise click.UsageError("--train-on applies only with --tokenizer")
    if triples and tokenizer_spec is None:
        raise click.UsageError("--triples shows tokens: give --tokenizer, or inspect a shard")
    renderer = _thread_renderer(tokenizer_spec, bos, policy)
    stats = Account()
    chosen = _chosen_threads(file, input_format, thread_id, limit, stats)
    skipped = (
        f"{stats.quarantined_total:,} record(s) read could not become threads "
        "(`mms convert` quarantines them with the reason)"
        if stats.quarantined_total
        else ""
    )
    if not chosen:
        raise click.UsageError(f"{file}: no threads to show" + (f"; {skipped}" if skipped else ""))
    if triples and renderer is not None:
        for thread in chosen:
            click.echo(
                f"# {visible(thread.id)}\n" + token_triples(renderer, renderer.encode(thread)),
                nl=False,
            )
    else:
        show(Console(highlight=False), chosen, renderer)
    if skipped:
        stderr.print(f"[yellow]note:[/] {skipped}")


def _check_usage(
    thread_id: str | None, tokenizer_spec: str | None, bos: bool, triples: bool
) -> None:
    """The option combinations that are usage errors whatever FILE is."""
    if thread_id is not None and given("limit"):
        raise click.UsageError("--id shows one thread; --limit applies without it")
    if bos and tokenizer_spec is None:
        raise click.UsageError("--bos applies only with --tokenizer")


def _thread_renderer(tokenizer_spec: str | None, bos: bool, policy: str) -> Renderer | None:
    """The renderer of --tokenizer, or None to draw messages."""
    try:
        return (
            Renderer(load_tokenizer(tokenizer_spec), bos=bos, policy=policy)  # type: ignore[arg-type]
            if tokenizer_spec
            else None
        )
    except (TokenizerLoadError, ValueError) as err:
        raise click.UsageError(f"--tokenizer: {err}") from None


def _chosen_threads(
    file: str, input_format: str, thread_id: str | None, limit: int, stats: Account
) -> list[Thread]:
    """The threads of FILE to show (--id, else the first --limit), counted into `stats`."""
    try:
        return pick_threads(read(file, ReadSpec(input_format), stats=stats), thread_id, limit)
    except ThreadNotFoundError as err:
        raise click.UsageError(f"{file}: {err}") from None
    except InputError as err:
        raise click.UsageError(str(err)) from None


def _shard_of(folder: Path, thread_id: str | None) -> str:
    """The shard of an output folder to show: the one holding `thread_id`, else the first
    of the first split the manifest lists."""
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        raise click.UsageError(f"{folder} is a folder but not an output (no manifest.json)")
    splits = orjson.loads(manifest.read_bytes()).get("splits", {})
    shards = [str(folder / shard["path"]) for split in splits.values() for shard in split["shards"]]
    if not shards:
        raise click.UsageError(f"{folder} has no shards to show")
    if thread_id is None:
        return shards[0]
    for shard in shards:
        if thread_id in pq.read_table(shard, columns=["id"])["id"].to_pylist():
            return shard
    raise click.UsageError(f"no thread with id {thread_id!r} in {folder}")


def _is_shard(file: str) -> bool:
    """Whether FILE is a tokenized Parquet shard (it has input_ids and labels columns)."""
    if not file.endswith(".parquet") or not Path(file).is_file():
        return False
    try:
        names = pq.ParquetFile(file).schema_arrow.names
    except Exception:  # pyarrow raises several types for a file that is not Parquet
        return False
    return "input_ids" in names and "labels" in names


def _inspect_shard(
    file: str, thread_id: str | None, tokenizer_spec: str | None, limit: int, triples: bool
) -> None:
    """A shard's stored tokens, drawn with the output's own tokenizer (beside data/)."""
    # beside data/ as named: not .resolve(), the Hub cache links each file to its blob
    spec = tokenizer_spec or str(Path(os.path.abspath(file)).parent.parent / "tokenizer")
    try:
        renderer = Renderer(load_tokenizer(spec))
    except (TokenizerLoadError, ValueError) as err:
        raise click.UsageError(
            f"--tokenizer: {err} (a shard is drawn with its output's tokenizer)"
        ) from None
    try:
        rows = read_stored(file, thread_id, limit)
    except ThreadNotFoundError as err:
        raise click.UsageError(f"{file}: {err}") from None
    stored = {
        thread.id: stored_encoding(renderer, thread, ids, labels) for thread, ids, labels in rows
    }
    if triples:
        for thread, _, _ in rows:
            click.echo(
                f"# {visible(thread.id)}\n" + token_triples(renderer, stored[thread.id]), nl=False
            )
        return
    show(Console(highlight=False), [thread for thread, _, _ in rows], renderer, stored)
    stderr.print("[dim]the tokens stored in the shard, not rendered again[/]")
