"""`mms tokenize`: threads to Parquet shards of input_ids and labels, with the tokenizer
that renders them."""

from __future__ import annotations

import dataclasses
import sys

import click

from pipeline import api
from pipeline.cli.options import (
    embed_media_option,
    given,
    hf_config_option,
    input_format_option,
    media_options,
    media_roots,
    media_settings,
    overlong_option,
    overwrite_option,
    read_spec,
    split_option,
    train_on_option,
)
from pipeline.cli.output import (
    Refusal,
    check_mark,
    exit_unbalanced,
    print_error,
    print_inputs,
    print_left_out,
    print_publication,
    print_quarantine,
    read_progress,
    safe,
    stderr,
)
from pipeline.cli.writes import writes
from pipeline.jobs.tokenize import TokenizeResult
from pipeline.media import MediaSettings
from pipeline.objectives import OBJECTIVES
from pipeline.objectives.references import ReferenceError
from pipeline.output.files import OutputPathError
from pipeline.output.guard import check_output_folder
from pipeline.output.shards import SHARD_ROWS
from pipeline.sources import InputError
from pipeline.stages.objective import REASONS as OBJECTIVE_REASONS
from pipeline.tokenize import TokenizerLoadError
from pipeline.tokenize.overlong import DROP_CODES, OverlongThreadError
from pipeline.tokenize.text_encoding import TEXT_ENCODERS

ROW_NOUNS = {"preference": "pair", "unpaired_preference": "completion", "prompt": "prompt"}
"""What a row of each objective other than sft is, in the summary."""


@writes(output="output-folder")
@click.command(
    "tokenize",
    epilog="\b\nExamples:\n"
    "  mms tokenize data/threads.jsonl --tokenizer tokenizers/llama3 -o out/llama3\n"
    "  mms tokenize raw/ --from sharegpt --tokenizer Qwen/Qwen2.5-7B-Instruct -o out/qwen \\\n"
    "      --max-tokens 4096 --overlong truncate\n"
    "  mms tokenize hf:HuggingFaceH4/ultrachat_200k --split train_sft \\\n"
    "      --tokenizer ./phi3/tokenizer.json --bos -o out/phi3\n"
    "\b\nOutput (OUT/):\n"
    "  data/train-00000-of-0000N.parquet   id, messages, input_ids, labels, num_tokens,\n"
    "                                      num_trained, meta (labels: -100 = not trained)\n"
    "  tokenizer/                          a complete Hugging Face tokenizer: the base with\n"
    "                                      the 5 MMS special tokens, bos/eos/pad, and a chat\n"
    "                                      template that renders exactly these ids and labels\n"
    "  tokenizer/generation_config.json    the stop ids (eos_token_id): <|end_turn|>, <|role|>\n"
    "  tokenizer/mms_special_tokens.json   the MMS ids, the policy, how the vocabulary grew\n"
    "  quarantine/rejected.jsonl           input records that did not become threads\n"
    "  quarantine/dropped.jsonl            threads left out by --max-tokens, with why\n"
    "\b\nLoad in a trainer:\n"
    "  datasets.load_dataset('parquet', data_files='OUT/data/*.parquet')\n"
    "  transformers.AutoTokenizer.from_pretrained('OUT/tokenizer')",
)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option(
    "--tokenizer",
    "tokenizer_spec",
    required=True,
    metavar="PATH",
    help="Base tokenizer: a tokenizer.json, a directory holding one (and its "
    "tokenizer_config.json), or a Hub name already in the local Hugging Face cache.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="DIR",
    help="Output directory; the train shards, tokenizer and quarantine files in it are "
    "replaced, only once the whole run succeeds.",
)
@input_format_option("Input format; `auto` detects it per file.")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Longest thread in tokens; longer ones follow --overlong [default: no limit].",
)
@overlong_option(
    "Threads over --max-tokens: drop them (counted, listed in quarantine/dropped.jsonl), "
    "truncate them to the most messages that fit with a trained token, or stop (error)."
)
@click.option(
    "--bos",
    is_flag=True,
    help="Start every thread with the tokenizer's BOS token (from tokenizer_config.json).",
)
@train_on_option(
    "Which assistant messages are trained: every one, or only the thread's final turn "
    "(its last answer with the tool calls before it). Either way a message its source weighted "
    "0 (OpenAI weight/loss_weight) is not trained, and a trained turn's stop token always is."
)
@click.option(
    "--objective",
    type=click.Choice(OBJECTIVES),
    default="sft",
    show_default=True,
    help="What a row is. sft: a thread (input_ids, labels). preference: a pair, its shared "
    "prompt once (prompt_ids, chosen_ids, rejected_ids, each side's labels: DPO, ORPO, "
    "SimPO). unpaired_preference: a completion and its label (prompt_ids, completion_ids, "
    "label: KTO; a pair gives two). prompt: the prompt up to the generation prompt, with a "
    "reference for a reward function (GRPO, RLOO, evaluation). Each row is a cut of the "
    "thread's sft row under --train-on last_assistant; a thread that cannot make one is "
    "dropped with its reason.",
)
@click.option(
    "--references",
    "reference_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    metavar="FILE",
    help="With --objective prompt: answers kept apart from their prompts, joined by id "
    "(BFCL's possible_answer files: {id, ground_truth}; also answer, solution, reference): "
    "each prompt row's `reference`. Repeatable.",
)
@click.option(
    "--encoder",
    type=click.Choice(TEXT_ENCODERS),
    default="auto",
    show_default=True,
    help="Which library encodes the text: auto takes tiktoken where the tokenizer.json shows "
    "it gives exactly the same ids (byte-level BPE converted from tiktoken: Llama-3, Qwen2, "
    "about 4x less CPU; SentencePiece-style BPE: Llama-2, Mistral, Phi-3, Gemma, about 2x), "
    "tokenizers elsewhere. The output is the same.",
)
@click.option(
    "--shard-rows",
    type=click.IntRange(min=1),
    default=SHARD_ROWS,
    show_default=True,
    metavar="N",
    help="Threads per Parquet shard.",
)
@split_option
@hf_config_option
@overwrite_option
@embed_media_option
@media_options
def tokenize_command(
    inputs: tuple[str, ...],
    tokenizer_spec: str,
    output: str,
    input_format: str,
    max_tokens: int | None,
    overlong: str,
    bos: bool,
    policy: str,
    objective: str,
    reference_files: tuple[str, ...],
    encoder: str,
    shard_rows: int,
    split: str,
    hf_config: str | None,
    overwrite: bool,
    media_flags: dict[str, object],
    embed_media: bool | None,
) -> None:
    """Tokenize INPUT threads into Parquet shards with exact loss masks (renderer mms-v0).

    Reads anything `mms convert` reads, renders each thread with the MMS special tokens
    added to the base tokenizer, and writes input_ids with labels that train exactly the
    assistant's tokens (format, content, end of turn, halt signals). Literal special-token
    text in content stays plain text. The summary checks that every record read became a
    written, quarantined or dropped thread. Exit status: 0 done, 1 --overlong error hit,
    2 usage error (e.g. a tokenizer that cannot load).
    """
    spec = read_spec(inputs, input_format, split, hf_config)
    media = media_settings(MediaSettings(), {**media_flags, "embed": embed_media})
    spec = dataclasses.replace(spec, media=media, media_roots=media_roots(media_flags))
    if max_tokens is None and given("overlong"):
        raise click.UsageError("--overlong applies only with --max-tokens N")
    if reference_files and objective != "prompt":
        raise click.UsageError("--references goes with --objective prompt")
    if objective != "sft":
        if given("policy") and policy != "last_assistant":
            raise click.UsageError(
                f"--objective {objective} trains the final turn only: --train-on "
                "last_assistant (the default with it)"
            )
        if max_tokens is not None and overlong == "truncate":
            raise click.UsageError(
                f"--overlong truncate cuts the final turn a {objective} row is made of: "
                "use drop or error"
            )
    try:
        check_output_folder(output)
    except OutputPathError as err:
        raise Refusal(f"-o: {err}") from None
    try:
        with read_progress() as update:
            result = api.tokenize(
                list(inputs),
                output,
                tokenizer_spec,
                spec=spec,
                objective=objective,  # type: ignore[arg-type]
                train_on=policy if given("policy") else None,  # type: ignore[arg-type]
                bos=bos,
                max_tokens=max_tokens,
                overlong=overlong,  # type: ignore[arg-type]
                references=reference_files,
                encoder=encoder,  # type: ignore[arg-type]
                shard_rows=shard_rows,
                progress=update,
                overwrite=overwrite,
            )
    except TokenizerLoadError as err:
        raise click.UsageError(f"--tokenizer: {err}") from None
    except ReferenceError as err:
        raise click.UsageError(f"--references: {err}") from None
    except OverlongThreadError as err:
        print_error(
            f"{err} (--max-tokens {err.max_tokens})",
            "; nothing was written. Raise --max-tokens, or use --overlong drop or truncate.",
        )
        sys.exit(1)
    except OutputPathError as err:
        raise Refusal(str(err)) from None
    except InputError as err:
        raise click.UsageError(str(err)) from None
    _print_summary(result, objective)
    print_publication(result.publication)
    if not result.balanced:
        exit_unbalanced()


def _print_summary(result: TokenizeResult, objective: str) -> None:
    stats = result.account
    print_inputs(stats)
    trained_share = stats.trained_tokens / stats.tokens if stats.tokens else 0.0
    rows = sum(shard.rows for shard in result.shards)
    made = "" if objective == "sft" else f" as {rows:,} {ROW_NOUNS[objective]}(s)"
    stderr.print(
        f"Wrote {stats.kept:,} threads{made} to {safe(result.output / 'data')} in "
        f"{len(result.shards)} shard(s): {stats.tokens:,} tokens, "
        f"{stats.trained_tokens:,} trained ({trained_share:.1%}), longest {stats.longest:,}"
    )
    if stats.truncated:
        stderr.print(f"  {stats.truncated:,} truncated at a message boundary (see meta.notes)")
    attached = stats.tagged.get("references:attached", 0)
    if attached:
        stderr.print(f"  {attached:,} given their reference from --references (by thread id)")
    if stats.untrained:
        stderr.print(
            f"  {stats.untrained:,} with no trained token (no assistant message, or only ones "
            "weighted 0): num_trained 0"
        )
    if stats.zero_weight_messages:
        stderr.print(
            f"  {stats.zero_weight_messages:,} assistant messages weighted 0 by their source: "
            "rendered, not trained"
        )
    stderr.print(
        f"Tokenizer with the MMS special tokens: {safe(result.tokenizer)} (text encoded by "
        f"{result.text_encoder})"
    )
    meanings = {**DROP_CODES, **OBJECTIVE_REASONS}
    print_left_out("Dropped", "threads", stats.dropped, result.dropped, meanings, width=20)
    print_quarantine(stats, result.quarantine)
    stderr.print(
        f"Check: {stats.records_read:,} records read = {stats.records_converted:,} converted "
        f"+ {stats.quarantined_total:,} quarantined; {stats.threads:,} threads = "
        f"{stats.kept:,} written + {stats.dropped_total:,} dropped "
        f"{check_mark(result.balanced)}"
    )
