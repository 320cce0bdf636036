"""The `mms` command line: parses options, calls the public API, prints terse summaries."""

from __future__ import annotations

import itertools
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
import orjson
import pyarrow.parquet as pq
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from pipeline.accounting import ReadStats
from pipeline.engine.local import UnitFailed, WorkdirError, reset_workdir
from pipeline.formats import AUTO, FORMATS, ConvertOptions
from pipeline.formats.base import MULTIMODAL, OASST_PATHS, PARALLEL_CALLS, REASONING
from pipeline.formats.detect import detect
from pipeline.jobs.convert import ConvertResult, check_output_file, convert
from pipeline.jobs.lint import lint
from pipeline.jobs.pack import PackError, PackResult, pack_output
from pipeline.jobs.read import ReadSpec, read
from pipeline.jobs.run import WORK_DIR, RunResult, detected_format, plan, run_pipeline
from pipeline.jobs.run.config import RunConfig, RunConfigError, load_run_config
from pipeline.jobs.tokenize import TokenizeResult, tokenize_dataset
from pipeline.jobs.verify import OutputError, verify_output
from pipeline.lint import (
    RULES,
    ConfigError,
    LintReport,
    UnknownRuleError,
    find_rule,
    load_config,
    select_rules,
)
from pipeline.lint.config import FAIL_ON
from pipeline.lint.docs import rule_dict, rule_page, rules_table
from pipeline.lint.reports import OUTPUT_FORMATS, write_report
from pipeline.loader.packing import WINDOW
from pipeline.output.files import OutputPathError, atomic_text_output, check_writable
from pipeline.output.shards import SHARD_ROWS
from pipeline.quarantine import ERROR_CODES
from pipeline.sources import DEFAULT_SPLIT, InputError, ReadLimits, Record, is_hf_input, iter_file
from pipeline.stages.normalize import SNIFF_RECORDS
from pipeline.tokenize import LABEL_POLICIES, Renderer, TokenizerLoadError, load_tokenizer
from pipeline.tokenize.inspect import (
    ThreadNotFoundError,
    pick_threads,
    read_stored,
    show,
    stored_encoding,
    token_triples,
)
from pipeline.tokenize.overlong import DROP_CODES, OVERLONG_POLICIES, OverlongThreadError
from pipeline.tokenize.text_encoding import TEXT_ENCODERS
from pipeline.version import __version__

stderr = Console(stderr=True, highlight=False, soft_wrap=True)


class _Group(click.Group):
    """The `mms` group: an unexpected failure (a bug) prints one line saying so, never a
    traceback; MMS_DEBUG=1 shows the traceback for a bug report."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BrokenPipeError:  # the reader went away (`mms lint ... | head`): stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(141)
        except Exception as err:
            if os.environ.get("MMS_DEBUG") == "1":
                raise
            stderr.print(
                f"[red]internal error:[/] {type(err).__name__}: {err}. This is a bug in mms; "
                "please report it (run again with MMS_DEBUG=1 to see the traceback)."
            )
            sys.exit(3)


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "--version", "-V", prog_name="mms")
def main() -> None:
    """Turn conversation datasets into Modular Model Spec (MMS) training data.

    \b
    Start with:
      mms formats                              which input formats are understood
      mms convert data/ -o out/threads.jsonl   any supported input -> MMS JSONL
      mms run configs/quickstart.yaml          a pipeline config -> training-ready shards
      mms verify out/quickstart                check an output without trusting it
    """


@main.command(epilog="\b\nExamples:\n  mms formats\n  mms formats --detect data/train.jsonl")
@click.option(
    "--detect",
    "detect_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Score every format on FILE's first records and show why.",
)
def formats(detect_file: str | None) -> None:
    """List the input formats `--from` accepts, or show how a file would be detected."""
    if detect_file is not None:
        _print_detection(detect_file)
        return
    width = max(len(name) for name in [AUTO, *FORMATS])
    click.echo(f"{AUTO:<{width}}  detect the format of each file from its first records (default)")
    for name, fmt in FORMATS.items():
        click.echo(f"{name:<{width}}  {fmt.summary}")


def _print_detection(path: str) -> None:
    head = itertools.islice(
        (item.value for item in iter_file(path, ReadLimits()) if isinstance(item, Record)),
        SNIFF_RECORDS,
    )
    detection = detect(head)
    click.echo(f"{path}: {detection.records} record(s) sniffed -> {detection.label}")
    width = max(len(name) for name in FORMATS)
    for score in detection.scores:
        mean = score.total / detection.records if detection.records else 0.0
        click.echo(
            f"  {score.name:<{width}}  {mean:4.2f}  accepts {score.accepted}/{detection.records}"
            f"  {score.reason}"
        )
    if detection.per_record:
        click.echo("  no format accepts every record: each record is detected on its own")
    elif detection.format is None:
        click.echo("  no format accepts these records: name one with --from")


# options shared by the commands that read inputs (convert, lint)
split_option = click.option(
    "--split",
    default=DEFAULT_SPLIT,
    show_default=True,
    metavar="NAME",
    help="Split of the hf: dataset inputs to stream (e.g. test, train_sft; train+test joins "
    "splits).",
)
hf_config_option = click.option(
    "--hf-config",
    default=None,
    metavar="NAME",
    help="Config (subset) of the hf: dataset inputs, for datasets that have several (e.g. all).",
)


def input_format_option(help_text: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """`--from FORMAT` (auto-detection by default), shared by the commands that read inputs."""
    return click.option(
        "--from",
        "input_format",
        default=AUTO,
        show_default=True,
        type=click.Choice([AUTO, *FORMATS]),
        help=help_text,
    )


def overlong_option(help_text: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """`--overlong POLICY` (drop, truncate or error), shared by tokenize and pack."""
    return click.option(
        "--overlong",
        type=click.Choice(OVERLONG_POLICIES),
        default="drop",
        show_default=True,
        help=help_text,
    )


def train_on_option(help_text: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """`--train-on POLICY` (the labels policy), shared by the commands that render tokens."""
    return click.option(
        "--train-on",
        "policy",
        type=click.Choice(LABEL_POLICIES),
        default="assistant",
        show_default=True,
        help=help_text,
    )


def _codes_help() -> str:
    return "\n".join(f"  {code:<16} {text}" for code, text in ERROR_CODES.items())


@main.command(
    epilog="\b\nExamples:\n"
    "  mms convert data_samples/mms -o out/threads.jsonl\n"
    "  mms convert 'raw/**/*.jsonl.gz' --from mms -o out/threads.jsonl.zst --strict\n"
    "  mms convert hf:HuggingFaceH4/ultrachat_200k --split train_sft -o out/ultrachat.jsonl\n"
    "  mms convert hf:HuggingFaceTB/smoltalk --hf-config all --split test -o out/smoltalk.jsonl\n"
    "  mms convert hf:./my_dataset --split validation -o out/valid.jsonl\n"
    "\b\nQuarantine codes (the `code` field of each rejected record):\n" + _codes_help()
)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="MMS JSONL file to write (.gz or .zst to compress).",
)
@input_format_option("Input format; `auto` detects it per file.")
@click.option(
    "--quarantine",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where rejected records go (JSONL) [default: OUTPUT's name + .rejected.jsonl].",
)
@click.option("--strict", is_flag=True, help="Exit 1 if any record was quarantined.")
@click.option(
    "--max-record-bytes",
    type=click.IntRange(min=1),
    default=ReadLimits().max_record_bytes,
    show_default=True,
    help="Longest line or row accepted; longer ones are quarantined as oversize_record.",
)
@click.option(
    "--max-depth",
    type=click.IntRange(min=1, max=200),
    default=ReadLimits().max_depth,
    show_default=True,
    help="Deepest nesting of lists and objects accepted in a record; deeper ones are "
    "quarantined as too_deep.",
)
@click.option(
    "--max-decompression-ratio",
    type=click.IntRange(min=1),
    default=ReadLimits().max_decompression_ratio,
    show_default=True,
    metavar="N",
    help="A compressed file may decompress to N times its size plus 64 MiB; past that the "
    "rest of it is one unreadable_file line (a decompression bomb).",
)
@click.option(
    "--parallel-calls",
    type=click.Choice(PARALLEL_CALLS),
    default="sequence",
    show_default=True,
    help="Parallel tool calls as call1, result1, call2, result2 (`sequence`) or one "
    "`tool:jsonl` message per tool (`jsonl`).",
)
@click.option(
    "--reasoning",
    type=click.Choice(REASONING),
    default="keep",
    show_default=True,
    help="Keep the assistant's reasoning as a `reasoning` message, or drop it.",
)
@click.option(
    "--multimodal",
    type=click.Choice(MULTIMODAL),
    default="drop",
    show_default=True,
    help="Drop image/audio/file parts (noted in meta) or write a `[image]`-style placeholder.",
)
@split_option
@hf_config_option
@click.option(
    "--oasst-paths",
    type=click.Choice(OASST_PATHS),
    default="all",
    show_default=True,
    help="OpenAssistant trees: one thread per root-to-leaf path, or only the top-ranked path.",
)
@click.option(
    "--expand-selects",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="N",
    help="Prompt templates with select variables (prompt-json): up to N threads per prompt, "
    "one per allowed value; 0 renders only the defaults.",
)
def convert_command(
    inputs: tuple[str, ...],
    output: str,
    input_format: str,
    quarantine: str | None,
    strict: bool,
    max_record_bytes: int,
    max_depth: int,
    max_decompression_ratio: int,
    parallel_calls: str,
    reasoning: str,
    multimodal: str,
    oasst_paths: str,
    split: str,
    hf_config: str | None,
    expand_selects: int,
) -> None:
    """Convert INPUT files, directories, globs or Hugging Face datasets to MMS JSONL.

    Reads .jsonl/.json/.yaml/.parquet/.csv (optionally .gz/.zst/.bz2/.xz compressed),
    prompt scripts read whole (PPE *.ai.yaml; Semantic Kernel skprompt.txt with the
    config.json beside it; templates are rendered in a sandbox, never run), and Hugging Face datasets as hf:ORG/NAME (the Hub) or hf:./local/dir, streamed one
    row at a time (--split, --hf-config choose what). Every record becomes a thread or a
    quarantined entry with its file, line (or dataset row) and a stable code; the summary
    checks that records read = converted + quarantined.
    """
    _check_hf_options(inputs, hf_config)
    limits = ReadLimits(
        max_record_bytes=max_record_bytes,
        max_depth=max_depth,
        max_decompression_ratio=max_decompression_ratio,
    )
    options = ConvertOptions(
        parallel_calls=parallel_calls,  # type: ignore[arg-type]
        reasoning=reasoning,  # type: ignore[arg-type]
        multimodal=multimodal,  # type: ignore[arg-type]
        oasst_paths=oasst_paths,  # type: ignore[arg-type]
        expand_selects=expand_selects,
    )
    try:
        with _progress() as update:
            spec = ReadSpec(input_format, options, limits, split, hf_config)
            result = convert(inputs, output, spec, quarantine=quarantine, progress=update)
    except (InputError, OutputPathError) as err:
        raise click.UsageError(str(err)) from None
    _print_summary(result)
    stats = result.stats
    if not stats.balanced:
        stderr.print("[red]error:[/] the counts do not balance; this is a bug, please report it")
        sys.exit(1)
    if strict and stats.quarantined_total:
        stderr.print(f"[red]--strict:[/] {stats.quarantined_total} record(s) quarantined")
        sys.exit(1)


main.add_command(convert_command, name="convert")


def _check_hf_options(inputs: tuple[str, ...], hf_config: str | None) -> None:
    """--split and --hf-config only steer hf: inputs: given without one, they are a mistake."""
    split_given = click.get_current_context().get_parameter_source("split") is not (
        click.core.ParameterSource.DEFAULT
    )
    if (split_given or hf_config is not None) and not any(is_hf_input(i) for i in inputs):
        raise click.UsageError(
            "--split and --hf-config apply to Hugging Face datasets only; "
            "name one as hf:ORG/NAME or hf:./local/dir"
        )


@contextmanager
def _progress() -> Iterator[Callable[[ReadStats], None] | None]:
    """A live records/threads counter on a terminal; nothing when output is redirected."""
    if not stderr.is_terminal:
        yield None
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=stderr, transient=True) as progress:
        task = progress.add_task("reading")

        def update(stats: ReadStats) -> None:
            progress.update(
                task,
                description=f"{stats.records_read:,} records read, {stats.threads:,} threads, "
                f"{stats.quarantined_total:,} quarantined",
            )

        yield update


def _some(paths: list[str], shown: int = 3) -> str:
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def _print_summary(result: ConvertResult) -> None:
    stats = result.stats
    _print_inputs(stats)
    stderr.print(f"Wrote {stats.threads:,} threads to {result.output}")
    _print_quarantine(stats, result.quarantine)
    mark = "[green]✓[/]" if stats.balanced else "[red]✗ MISMATCH[/]"
    stderr.print(
        f"Check: {stats.records_read:,} read = {stats.records_converted:,} converted "
        f"+ {stats.quarantined_total:,} quarantined {mark}"
    )


def _print_inputs(stats: ReadStats) -> None:
    """Records read per format, and the files skipped, read as companions or undetected."""
    by_format = Counter(stats.formats.values())
    formats = ", ".join(f"{name}: {count}" for name, count in sorted(by_format.items()))
    stderr.print(
        f"Read {stats.records_read:,} records from {len(stats.files):,} file(s) ({formats})"
    )
    if stats.skipped_files:
        stderr.print(
            f"  skipped {len(stats.skipped_files)} unsupported file(s): {_some(stats.skipped_files)}"
        )
    for companion, main in sorted(stats.companion_files.items()):
        stderr.print(f"  read {companion} as part of {main}")
    print_refused(stats.refused_files)
    undetected = [path for path, name in stats.formats.items() if name == "-"]
    if undetected:
        stderr.print(
            f"  [yellow]no format detected[/] in {len(undetected)} file(s), "
            f"e.g. {_some(undetected)}: name it with --from"
        )


def print_refused(refused: dict[str, str]) -> None:
    """Files of the inputs' folders and globs that were never opened, and why."""
    if refused:
        stderr.print(f"  [yellow]refused {len(refused)} file(s)[/], never opened:")
        for path, why in sorted(refused.items()):
            stderr.print(f"    {path}: {why}")


def _print_quarantine(stats: ReadStats, path: Path) -> None:
    """Records quarantined, per code."""
    if stats.quarantined_total:
        stderr.print(f"Quarantined {stats.quarantined_total:,} records to {path}:")
        for code, count in sorted(stats.quarantined.items(), key=lambda kv: (-kv[1], kv[0])):
            stderr.print(f"  {count:>8,}  {code:<16} {ERROR_CODES[code]}")
    else:
        stderr.print("Quarantined 0 records")


def _codes(values: tuple[str, ...]) -> tuple[str, ...] | None:
    """Repeatable, comma-separated rule selectors; None when not given."""
    codes = tuple(code.strip() for value in values for code in value.split(",") if code.strip())
    return codes or None


@main.command(
    "lint",
    epilog="\b\nExamples:\n"
    "  mms lint data/train.jsonl\n"
    "  mms lint raw/ --from sharegpt --select MMS2,MMS4 --statistics\n"
    "  mms lint out/threads.jsonl --output-format html -o reports/lint.html\n"
    "  mms lint out/threads.jsonl --output-format sarif -o lint.sarif --fail-on warning\n"
    "  mms lint out/threads.jsonl --output-format github   # annotations in GitHub Actions\n"
    "\b\nRules: `mms rules` lists them, `mms rules MMS201` explains one.\n"
    "Settings also come from [tool.mms.lint] in pyproject.toml (select, ignore, fail-on,\n"
    "min-phrasings, dataset-min-threads, special-tokens, max-examples); the options win.",
)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@input_format_option(
    "Input format; `auto` detects it per file. Inputs are normalized to MMS first."
)
@click.option(
    "--select",
    multiple=True,
    metavar="CODES",
    help="Rules to run: codes (MMS201), families (MMS2), names or ALL; comma-separated.",
)
@click.option("--ignore", multiple=True, metavar="CODES", help="Rules not to run (as --select).")
@click.option(
    "--output-format",
    type=click.Choice(OUTPUT_FORMATS),
    default="text",
    show_default=True,
    help="Report format: text (grouped, for people), json (schemas/lint-report.schema.json), "
    "markdown, html (self-contained page with charts), sarif (code scanning), github "
    "(Actions annotations).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the report to this file instead of standard output.",
)
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_ON),
    default=None,
    help="Exit 1 when findings reach this severity [default: error].",
)
@click.option("--statistics", is_flag=True, help="Show the count per rule instead of findings.")
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="TOML settings file ([tool.mms.lint] of a pyproject.toml, or top-level keys) "
    "[default: the nearest pyproject.toml with [tool.mms.lint]].",
)
@split_option
@hf_config_option
def lint_command(
    inputs: tuple[str, ...],
    input_format: str,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    output_format: str,
    output: str | None,
    fail_on: str | None,
    statistics: bool,
    config_file: str | None,
    split: str,
    hf_config: str | None,
) -> None:
    """Check INPUT files, directories, globs or hf: datasets against the MMS rules.

    Every record is normalized to MMS threads first (any input format), then checked:
    structure (MMS1xx), capabilities enabled by developer messages (MMS2xx), halting
    (MMS3xx), content syntax and leftovers (MMS4xx), dataset-wide duplicates and variety
    (MMS5xx). Records that cannot become threads are findings too (MMS101/102/105), so
    nothing is skipped silently. Each finding points at its source file and line.
    Exit status: 0 clean, 1 findings at --fail-on severity, 2 usage error.
    """
    _check_hf_options(inputs, hf_config)
    try:
        config = load_config(config_file).replace(
            select=_codes(select), ignore=_codes(ignore), fail_on=fail_on
        )
        select_rules(config.select, config.ignore)
    except (ConfigError, UnknownRuleError) as err:
        raise click.UsageError(str(err)) from None
    try:
        if output is not None:
            check_output_file(output)
        with _progress() as update:
            report = lint(
                inputs,
                ReadSpec(input_format, split=split, hf_config=hf_config),
                config=config,
                progress=(lambda stats, _report: update(stats)) if update else None,
            )
    except (InputError, OutputPathError) as err:
        raise click.UsageError(str(err)) from None
    print_refused(report.stats.refused_files)
    _write_lint_report(report, output_format, output, statistics)
    if report.failed():
        sys.exit(1)


main.add_command(lint_command)


def _write_lint_report(
    report: LintReport, output_format: str, output: str | None, statistics: bool
) -> None:
    if output is None:
        write_report(report, output_format, sys.stdout, statistics=statistics)
        return
    with atomic_text_output(output) as out:
        write_report(report, output_format, out, statistics=statistics)
    summary = report.summary()
    stderr.print(
        f"Wrote the {output_format} report to {output}: {summary['findings']:,} findings "
        f"({report.errors:,} errors, {report.warnings:,} warnings) in {summary['threads']:,} "
        f"threads from {summary['records']:,} records"
    )


@main.command(epilog="\b\nExamples:\n  mms rules\n  mms rules MMS201\n  mms rules invalid-json")
@click.argument("rule", required=False, metavar="[CODE]")
@click.option(
    "--output-format",
    type=click.Choice(("text", "json")),
    default="text",
    show_default=True,
    help="Plain text, or JSON for tools.",
)
def rules(rule: str | None, output_format: str) -> None:
    """List the lint rules, or explain one (CODE or name): why it matters, with a bad and a
    good example."""
    try:
        chosen = [find_rule(rule)] if rule else list(RULES)
    except UnknownRuleError as err:
        raise click.UsageError(str(err)) from None
    if output_format == "json":
        data = [rule_dict(r) for r in chosen]
        click.echo(orjson.dumps(data[0] if rule else data, option=orjson.OPT_INDENT_2).decode())
    elif rule:
        click.echo(rule_page(chosen[0]))
    else:
        click.echo(rules_table())


@main.command(
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
    "  tokenizer/mms_special_tokens.json   their ids, the policy, how the vocabulary grew\n"
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
    type=click.Path(file_okay=False),
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
    "--encoder",
    type=click.Choice(TEXT_ENCODERS),
    default="auto",
    show_default=True,
    help="Which library encodes the text: auto takes tiktoken where the tokenizer.json shows "
    "it gives exactly the same ids (byte-level BPE converted from tiktoken: the Llama-3 and "
    "Qwen2 families; about 4x less CPU), tokenizers elsewhere. The output is the same.",
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
def tokenize_command(
    inputs: tuple[str, ...],
    tokenizer_spec: str,
    output: str,
    input_format: str,
    max_tokens: int | None,
    overlong: str,
    bos: bool,
    policy: str,
    encoder: str,
    shard_rows: int,
    split: str,
    hf_config: str | None,
) -> None:
    """Tokenize INPUT threads into Parquet shards with exact loss masks (renderer mms-v0).

    Reads anything `mms convert` reads, renders each thread with the MMS special tokens
    added to the base tokenizer, and writes input_ids with labels that train exactly the
    assistant's tokens (format, content, end of turn, halt signals). Literal special-token
    text in content stays plain text. The summary checks that every record read became a
    written, quarantined or dropped thread. Exit status: 0 done, 1 --overlong error hit,
    2 usage error (e.g. a tokenizer that cannot load).
    """
    _check_hf_options(inputs, hf_config)
    if max_tokens is None and _given("overlong"):
        raise click.UsageError("--overlong applies only with --max-tokens N")
    try:
        check_writable(output, directory=True)
    except OutputPathError as err:
        raise click.UsageError(f"-o: {err}") from None
    try:
        tokenizer = load_tokenizer(tokenizer_spec, allow_tiktoken=encoder == "auto")
    except TokenizerLoadError as err:
        raise click.UsageError(f"--tokenizer: {err}") from None
    try:  # the tokenizer suits MMS, has the BOS asked for, and ships as a file trainers load
        Renderer(tokenizer, bos=bos, policy=policy).check_shipped_tokenizer()  # type: ignore[arg-type]
    except ValueError as err:
        raise click.UsageError(f"--tokenizer: {err}") from None
    try:
        with _progress() as update:
            result = tokenize_dataset(
                inputs,
                output,
                tokenizer,
                ReadSpec(input_format, split=split, hf_config=hf_config),
                bos=bos,
                policy=policy,  # type: ignore[arg-type]
                max_tokens=max_tokens,
                overlong=overlong,  # type: ignore[arg-type]
                shard_rows=shard_rows,
                progress=update,
            )
    except OverlongThreadError as err:
        stderr.print(
            f"[red]error:[/] {err} (--max-tokens {err.max_tokens}); nothing was written. "
            "Raise --max-tokens, or use --overlong drop or truncate."
        )
        sys.exit(1)
    except InputError as err:
        raise click.UsageError(str(err)) from None
    _print_tokenize_summary(result)
    if not result.balanced:
        stderr.print("[red]error:[/] the counts do not balance; this is a bug, please report it")
        sys.exit(1)


def _given(parameter: str) -> bool:
    source = click.get_current_context().get_parameter_source(parameter)
    return source is not click.core.ParameterSource.DEFAULT


def _print_tokenize_summary(result: TokenizeResult) -> None:
    read, stats = result.read, result.stats
    _print_inputs(read)
    trained_share = stats.trained_tokens / stats.tokens if stats.tokens else 0.0
    stderr.print(
        f"Wrote {stats.threads_written:,} threads to {result.output / 'data'} in "
        f"{len(result.shards)} shard(s): {stats.tokens:,} tokens, "
        f"{stats.trained_tokens:,} trained ({trained_share:.1%}), longest {stats.longest:,}"
    )
    if stats.truncated:
        stderr.print(f"  {stats.truncated:,} truncated at a message boundary (see meta.notes)")
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
        f"Tokenizer with the MMS special tokens: {result.tokenizer} (text encoded by "
        f"{result.text_encoder})"
    )
    if stats.dropped_total:
        stderr.print(f"Dropped {stats.dropped_total:,} threads to {result.dropped}:")
        for code, count in sorted(stats.dropped.items(), key=lambda kv: (-kv[1], kv[0])):
            stderr.print(f"  {count:>8,}  {code:<20} {DROP_CODES[code]}")
    else:
        stderr.print("Dropped 0 threads")
    _print_quarantine(read, result.quarantine)
    mark = "[green]✓[/]" if result.balanced else "[red]✗ MISMATCH[/]"
    stderr.print(
        f"Check: {read.records_read:,} records read = {read.records_converted:,} converted "
        f"+ {read.quarantined_total:,} quarantined; {read.threads:,} threads = "
        f"{stats.threads_written:,} written + {stats.dropped_total:,} dropped {mark}"
    )


@main.command(
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

    One block per message: role, context name, assistant format, content and end_turn.
    With --tokenizer, the tokens the model sees instead, rendered as `mms tokenize` does
    (mms-v0): trained tokens highlighted, special tokens marked, counts per message and
    in total, so you can check exactly what is learned. Exit status: 0 shown, 2 usage error
    (e.g. no thread with that --id).
    """
    if thread_id is not None and _given("limit"):
        raise click.UsageError("--id shows one thread; --limit applies without it")
    if bos and tokenizer_spec is None:
        raise click.UsageError("--bos applies only with --tokenizer")
    if _is_shard(file):
        if _given("policy"):
            raise click.UsageError("a shard shows its stored labels; --train-on applies to threads")
        _inspect_shard(file, thread_id, tokenizer_spec, limit, triples)
        return
    if _given("policy") and tokenizer_spec is None:
        raise click.UsageError("--train-on applies only with --tokenizer")
    if triples and tokenizer_spec is None:
        raise click.UsageError("--triples shows tokens: give --tokenizer, or inspect a shard")
    try:
        renderer = (
            Renderer(load_tokenizer(tokenizer_spec), bos=bos, policy=policy)  # type: ignore[arg-type]
            if tokenizer_spec
            else None
        )
    except (TokenizerLoadError, ValueError) as err:
        raise click.UsageError(f"--tokenizer: {err}") from None
    stats = ReadStats()
    try:
        chosen = pick_threads(read(file, ReadSpec(input_format), stats=stats), thread_id, limit)
    except ThreadNotFoundError as err:
        raise click.UsageError(f"{file}: {err}") from None
    except InputError as err:
        raise click.UsageError(str(err)) from None
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
                f"# {thread.id}\n" + token_triples(renderer, renderer.encode(thread)), nl=False
            )
    else:
        show(Console(highlight=False), chosen, renderer)
    if skipped:
        stderr.print(f"[yellow]note:[/] {skipped}")


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
    spec = tokenizer_spec or str(Path(file).resolve().parent.parent / "tokenizer")
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
            click.echo(f"# {thread.id}\n" + token_triples(renderer, stored[thread.id]), nl=False)
        return
    show(Console(highlight=False), [thread for thread, _, _ in rows], renderer, stored)
    stderr.print("[dim]the tokens stored in the shard, not rendered again[/]")


@main.command(
    "run",
    epilog="\b\nExamples:\n"
    "  mms run configs/quickstart.yaml\n"
    "  mms run configs/tool_calling.yaml -o out/tools --workers 2\n"
    "  mms run configs/mix.yaml --fresh\n"
    "  mms run configs/quickstart.yaml --dry-run",
)
@click.argument("config_file", type=click.Path(exists=True, dir_okay=False), metavar="CONFIG")
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False),
    default=None,
    help="Output directory [default: the config's `output`].",
)
@click.option(
    "--engine",
    type=click.Choice(["local"]),
    default=None,
    help="Where the stages run [default: the config's engine.kind]; `local` is processes on "
    "this machine.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Parallel work units [default: the config's engine.workers]; the output is the "
    "same for any number.",
)
@click.option(
    "--resume/--fresh",
    default=True,
    show_default=True,
    help="Reuse the finished work units of an interrupted run, or start over.",
)
@click.option(
    "--dry-run", is_flag=True, help="Print the plan (inputs, units, stages); write nothing."
)
def run_command(
    config_file: str,
    output: str | None,
    engine: str | None,
    workers: int | None,
    resume: bool,
    dry_run: bool,
) -> None:
    """Run a pipeline CONFIG: ingest, normalize, lint, filter, dedup, tokenize, shard.

    Writes the output directory: data/ shards per split, tokenizer/,
    reports/lint.{json,md,html}, quarantine/rejected.jsonl, manifest.json and a Hugging
    Face dataset card (README.md). Work units are resumable: a run that is stopped and
    started again finishes with the same bytes. When the lint gate (stages.lint.fail_on,
    judged on the threads kept) fails, no shards, card or tokenizer are written and the
    manifest says why. Exit status: 0 done, 1 the lint gate failed, 2 a usage or config
    error.
    """
    try:
        config = load_run_config(config_file)
    except RunConfigError as err:
        raise click.UsageError(str(err)) from None
    out = Path(output) if output else config.output
    try:
        check_writable(out, directory=True)
    except OutputPathError as err:
        raise click.UsageError(f"{'-o' if output else 'output'}: {err}") from None
    if dry_run:
        try:
            _print_plan(config, out)
        except InputError as err:
            raise click.UsageError(str(err)) from None
        kind, count = engine or config.engine.kind, workers or config.engine.workers
        click.echo(f"engine: {kind}, {count} worker(s)")
        return
    if not resume:
        reset_workdir(out / WORK_DIR)
    try:
        with _stage_progress() as update:
            result = run_pipeline(config, output=out, workers=workers, progress=update)
    except (InputError, WorkdirError, ValueError) as err:
        raise click.UsageError(str(err)) from None
    except UnitFailed as err:
        stderr.print(f"[red]error:[/] {err}; finished units are kept: run again to resume")
        sys.exit(1)
    except OverlongThreadError as err:
        stderr.print(f"[red]error:[/] {err}; nothing was written (overlong: error)")
        sys.exit(1)
    _print_run_summary(result)
    if result.verification is not None and not result.verification.passed:
        for problem in result.verification.problems:
            stderr.print(f"  [red]✗[/] {problem.where}: {problem.what}")
        stderr.print("[red]error:[/] the output does not match its manifest; this is a bug")
        sys.exit(1)
    if not result.counts.balanced:
        stderr.print("[red]error:[/] the counts do not balance; this is a bug, please report it")
        sys.exit(1)
    if result.gate_failed:
        _print_gate_failure(result, config)
        sys.exit(1)


main.add_command(run_command)


@main.command(
    "verify",
    epilog="\b\nExamples:\n  mms verify out/quickstart\n  mms verify out/big --no-render",
)
@click.argument("output", type=click.Path(exists=True, file_okay=False))
@click.option("--no-render", is_flag=True, help="Skip rendering every row again (hashes only).")
@click.option(
    "--no-template",
    is_flag=True,
    help="Skip checking the shipped chat template against every row (needs transformers).",
)
def verify_command(output: str, no_render: bool, no_template: bool) -> None:
    """Check an OUTPUT folder of mms run, tokenize or pack without trusting it.

    Every shard's sha256 and row count against manifest.json (and no unlisted shard), the
    tokenizer's sha256, the dataset card's splits, files and row counts; then every row's
    input_ids and labels rendered again from its messages with the shipped tokenizer and
    labels policy, and the shipped chat template's ids and generation mask against every
    row. Packed rows are checked as packed: lengths, positions restarting at every thread,
    labels, each thread once. Problems are listed with the row id. Exit status: 0 all hold,
    1 a problem, 2 not an output folder.
    """
    try:
        with stderr.status("verifying", spinner="dots") as status:
            result = verify_output(
                output,
                render=not no_render,
                template=not no_template,
                progress=lambda what, done: status.update(f"{what}: {done:,} rows"),
            )
    except OutputError as err:
        raise click.UsageError(str(err)) from None
    for check, count in result.checked.items():
        stderr.print(f"  {count:>8,}  {check}")
    for note in result.notes:
        stderr.print(f"  [yellow]note:[/] {note}")
    for problem in result.problems[:50]:
        stderr.print(f"  [red]✗[/] {problem.where}: {problem.what}")
    if len(result.problems) > 50:
        stderr.print(f"  ... and {len(result.problems) - 50} more")
    if result.problems:
        stderr.print(f"[red]verify failed:[/] {len(result.problems)} problem(s) in {output}")
        sys.exit(1)
    stderr.print(f"[green]✓[/] {output} verified")


@main.command(
    "pack",
    epilog="\b\nExamples:\n"
    "  mms pack out/run --seq-len 4096 -o out/run-packed\n"
    "  mms pack out/tokens --seq-len 8192 --overlong truncate -o out/packed-8k\n"
    "\b\nOutput (PACKED/), the layout of the folder packed:\n"
    "  data/{split}-NNNNN-of-NNNNN.parquet   one row per packed sequence: input_ids, labels,\n"
    "                                      position_ids (0 at every thread), seq_lens, ids,\n"
    "                                      num_tokens, num_trained\n"
    "  tokenizer/                          the packed output's tokenizer, as it was\n"
    "  manifest.json, README.md            counts, fill, shards' sha256; the dataset card\n"
    "  quarantine/dropped.jsonl            threads over --seq-len left out, with why",
)
@click.argument("source", metavar="OUT", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--seq-len",
    required=True,
    type=click.IntRange(min=1),
    metavar="N",
    help="Most tokens in a packed sequence.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(file_okay=False),
    help="Folder for the packed output (not OUT itself).",
)
@overlong_option(
    "Threads over --seq-len: drop them (counted, listed in quarantine/dropped.jsonl), "
    "truncate them at a message boundary (rendered again with OUT's tokenizer), or stop."
)
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=WINDOW,
    show_default=True,
    metavar="N",
    help="Threads sorted and placed together: larger packs tighter and holds more in memory.",
)
def pack_command(source: str, seq_len: int, output: str, overlong: str, window: int) -> None:
    """Pack the tokenized output OUT into sequences of at most --seq-len tokens.

    Threads are placed best-fit-decreasing, a window at a time, so memory stays flat on any
    size. Every thread that fits lands in exactly one packed row with its input_ids and
    labels unchanged; position_ids restart at 0 for each thread and seq_lens gives their
    lengths, which is what attention needs to keep them apart (flash-attention varlen
    arguments, or a block-diagonal mask). The same OUT and options give the same bytes.
    Exit status: 0 packed, 1 --overlong error hit, 2 usage error (e.g. OUT holds no tokens).
    """
    try:
        check_writable(output, directory=True)
    except OutputPathError as err:
        raise click.UsageError(f"-o: {err}") from None
    try:
        with stderr.status("packing", spinner="dots") as status:
            result = pack_output(
                source,
                output,
                seq_len=seq_len,
                overlong=overlong,  # type: ignore[arg-type]
                window=window,
                progress=lambda done: status.update(f"packing: {done:,} threads read"),
            )
    except PackError as err:
        if "more than --seq-len" in str(err):
            stderr.print(f"[red]error:[/] {err}; nothing was written")
            sys.exit(1)
        raise click.UsageError(str(err)) from None
    except TokenizerLoadError as err:
        raise click.UsageError(f"{source}/tokenizer: {err}") from None
    _print_pack_summary(result)


def _print_pack_summary(result: PackResult) -> None:
    stats = result.stats
    for split, counts in result.splits.items():
        shards = result.shards[split]
        stderr.print(
            f"  {split}: {counts.rows_in:,} threads -> {counts.sequences:,} sequences "
            f"in {len(shards)} shard(s)"
            + (f", {counts.truncated:,} truncated" if counts.truncated else "")
        )
        for code, count in sorted(counts.dropped.items()):
            stderr.print(f"    {count:>8,}  dropped  {code:<20} {DROP_CODES.get(code, '')}")
    stderr.print(
        f"Packed {stats.rows:,} threads into {stats.sequences:,} sequences of up to "
        f"{result.seq_len:,} tokens: fill {stats.fill:.2%}, {stats.rows_per_sequence:.1f} "
        f"threads per sequence, {stats.padding:,} padding tokens at full length"
    )
    mark = "[green]✓[/]" if result.balanced else "[red]✗ MISMATCH[/]"
    read = sum(s.rows_in for s in result.splits.values())
    dropped = sum(sum(s.dropped.values()) for s in result.splits.values())
    stderr.print(f"Check: {read:,} threads = {stats.rows:,} packed + {dropped:,} dropped {mark}")
    stderr.print(f"Wrote {result.output}")
    if not result.balanced:
        stderr.print("[red]error:[/] the counts do not balance; this is a bug, please report it")
        sys.exit(1)


def _print_plan(config: RunConfig, out: Path) -> None:
    units = plan(config, out)
    click.echo(f"{config.name}: {len(config.inputs)} input(s), {len(units)} work unit(s) -> {out}")
    for unit in units:
        click.echo(f"  {unit.id}  {detected_format(config, unit):<20} {unit.describe()}")
    stages = config.stages
    names = ["normalize", "lint", "filters"]
    names += ["dedup"] if stages.dedup.enabled else []
    names += [f"tokenize ({stages.tokenize.tokenizer})"] if stages.tokenize else []
    names += (
        ["shard (" + ", ".join(f"{n} {f:g}" for n, f in stages.shard.splits) + ")"]
        if stages.shard
        else []
    )
    click.echo("stages: " + " -> ".join(names))


@contextmanager
def _stage_progress() -> Iterator[Callable[[str, int, int], None] | None]:
    """A live units counter on a terminal; nothing when output is redirected."""
    if not stderr.is_terminal:
        yield None
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=stderr, transient=True) as progress:
        task = progress.add_task("planning")

        def update(stage: str, done: int, total: int) -> None:
            progress.update(task, description=f"{stage}: {done:,} of {total:,} work units")

        yield update


def _print_gate_failure(result: RunResult, config: RunConfig) -> None:
    """Which findings on kept threads failed the gate, and where the first of each is."""
    fail_on = config.stages.lint.fail_on
    withheld = "no shards, card or tokenizer written; " if config.stages.shard else ""
    stderr.print(
        f"[red]lint gate failed[/] (fail_on: {fail_on}): {withheld}manifest.json says "
        "gate.passed: false"
    )
    for code, severity, count, first in result.report.gate_findings(fail_on):
        where = first.locator or first.source or first.thread_id or ""
        stderr.print(f"  {count:>8,}  {code} {severity:<7} first at {where}")
    stderr.print(
        f"Fix them, drop them (stages.lint.drop_on) or relax fail_on; details in "
        f"{result.output / 'reports' / 'lint.md'}"
    )


def _print_run_summary(result: RunResult) -> None:
    counts = result.counts
    stderr.print(
        f"Read {counts.records_read:,} records: {counts.records_converted:,} converted into "
        f"{counts.threads:,} threads, {sum(counts.quarantined.values()):,} quarantined"
    )
    skipped = result.report.stats.skipped_files
    if skipped:
        stderr.print(f"  skipped {len(skipped)} unsupported file(s): {_some(skipped)}")
    print_refused(result.report.stats.refused_files)
    for code, count in sorted(counts.quarantined.items(), key=lambda kv: (-kv[1], kv[0])):
        stderr.print(f"  {count:>8,}  quarantined  {code}")
    for reason, count in sorted(counts.dropped.items(), key=lambda kv: (-kv[1], kv[0])):
        stderr.print(f"  {count:>8,}  dropped      {reason}")
    for split, shards in result.shards.items():
        rows = counts.written[split] if result.packing else sum(s.rows for s in shards)
        stderr.print(f"  {rows:>8,}  written      {split} ({len(shards)} shard(s))")
    for split in result.empty_splits:
        stderr.print(f"  [yellow]split {split} got no rows[/]: not written, not in the card")
    if counts.withheld:
        stderr.print(f"  {counts.withheld:>8,}  withheld     the lint gate failed")
    if counts.tokens:
        stderr.print(
            f"Tokens: {counts.tokens:,}, trained {counts.trained_tokens:,} "
            f"(text encoded by {result.text_encoder})"
        )
    if counts.zero_weight_messages:
        stderr.print(
            f"  {counts.zero_weight_messages:,} assistant messages weighted 0 by their source: "
            "rendered, not trained"
        )
    packing = result.packing
    if packing:
        stderr.print(
            f"Packed {packing['threads']:,} threads into {packing['sequences']:,} rows of up to "
            f"{packing['seq_len']:,} tokens: fill {packing['fill']:.2%}, "
            f"{packing['threads_per_sequence']:.1f} threads per row"
        )
    report = result.report
    left_out = sum(report.on_dropped.values())
    not_gated = f", {left_out:,} of them on what was dropped (not gated)" if left_out else ""
    stderr.print(
        f"Lint: {len(report.diagnostics):,} findings ({report.errors:,} errors, "
        f"{report.warnings:,} warnings){not_gated}; reports in {result.output / 'reports'}"
    )
    checked = result.verification.checked if result.verification else None
    if checked:
        stderr.print(
            f"Verified: {checked.get('files', 0)} file(s) and {checked.get('rows', 0):,} rows "
            "against manifest.json, and the card (hashes only; `mms verify` renders every row)"
        )
    kept = sum(counts.written.values()) - counts.copies
    unsharded = f" + {counts.not_sharded:,} linted only" if counts.not_sharded else ""
    unsharded += f" + {counts.withheld:,} withheld" if counts.withheld else ""
    mark = "[green]✓[/]" if counts.balanced else "[red]✗ MISMATCH[/]"
    stderr.print(
        f"Check: {counts.records_read:,} read = {counts.records_converted:,} converted + "
        f"{sum(counts.quarantined.values()):,} quarantined; {counts.threads:,} threads = "
        f"{kept:,} written{unsharded} + {sum(counts.dropped.values()):,} dropped {mark}"
    )


if __name__ == "__main__":
    main()
