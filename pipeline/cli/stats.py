"""`mms stats`: the figures of an output's shards, as text or JSON."""

from __future__ import annotations

from typing import Any, TextIO

import click

from pipeline import api
from pipeline.accounting import most_first
from pipeline.cli.options import overwrite_file_option
from pipeline.cli.output import Refusal, input_table, output_argument
from pipeline.cli.writes import writes
from pipeline.jobs.stats import StatsError, stats_json
from pipeline.output.files import OutputPathError
from pipeline.output.guard import claim_file
from pipeline.output.objective_figures import NOUNS, objective_lines
from pipeline.output.stats_html import write_stats_html
from pipeline.output.stats_markdown import stats_markdown
from pipeline.output.stdout import standard_text_output
from pipeline.wording import plural, visible

FORMATS = ("text", "json", "markdown", "html")


@writes(output="file")
@click.command(
    "stats",
    epilog="\b\nExamples:\n"
    "  mms stats out/quickstart\n"
    "  mms stats out/quickstart --by source\n"
    "  mms stats out/quickstart/data/train-00000-of-00001.parquet --output-format json\n"
    "  mms stats out/quickstart --by source --output-format html -o stats.html\n"
    "  mms stats hf:ORG/NAME --by source_format",
)
@click.argument("targets", nargs=-1, required=True, metavar="OUTPUT|FILE...")
@click.option(
    "--by",
    default=None,
    metavar="FIELD",
    help="Also give the figures per value of this meta field: source, source_format, ...",
)
@click.option(
    "--output-format",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="text (for people), json (every figure, sorted keys; schemas/stats.schema.json), "
    "markdown, or html (one self-contained page with plots; use -o).",
)
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    default=None,
    help="Write to this file instead of standard output (never over an input, nor into "
    "an output folder's places: data/, reports/, manifest.json ...).",
)
@overwrite_file_option
def stats_command(
    targets: tuple[str, ...],
    by: str | None,
    output_format: str,
    output: str | None,
    overwrite: bool,
) -> None:
    """The figures of OUTPUT folders (mms run, tokenize, pack; hf:ORG/NAME too) or Parquet
    FILES: threads, messages, user turns and tool calls per thread, tokens and the
    trained share, thread lengths in tokens (p50/p90/p99/max and a histogram), tokens per
    role, capabilities enabled and used, per split and with --by per value of a meta
    field; for a run's folder also its accounting (quarantined, duplicates, drops and
    truncation with their tokens, packing, per input). Computed by polars over streaming
    scans, one shard at a time: memory stays bounded whatever the dataset's size."""
    folders = [str(output_argument(t)) if t.startswith("hf:") else t for t in targets]
    try:
        target = claim_file(output, inputs=folders, overwrite=overwrite) if output else None
    except OutputPathError as err:
        raise Refusal(f"-o: {err}") from None
    try:
        stats = api.stats(*folders, by=by).figures
    except StatsError as err:
        raise Refusal(str(err)) from None
    if target is None:
        with standard_text_output() as out:
            _write(stats, output_format, out)
        return
    with target.open_text() as out:
        _write(stats, output_format, out)


def _write(stats: dict[str, Any], output_format: str, out: TextIO) -> None:
    if output_format == "json":
        out.write(stats_json(stats))
        return
    if output_format == "markdown":
        out.write(stats_markdown(stats))
        return
    if output_format == "html":
        write_stats_html(stats, out)
        return
    run = stats.get("run")
    if run is not None:
        for line in _run_lines(run):
            out.write(line + "\n")
    for split, figures in stats["splits"].items():
        out.write(f"{visible(split)}: {_headline(figures)}\n")
        for line in _details(figures):
            out.write(f"  {line}\n")
        grouped = figures.get("by")
        if grouped:
            out.write(f"  by {visible(grouped['field'])}:\n")
            for group in grouped["groups"]:
                out.write(f"    {visible(group['group'])}: {_headline(group)}\n")


def _headline(figures: dict[str, Any]) -> str:
    objective = figures.get("objective")
    if objective is not None:
        return (
            plural(objective["rows"], NOUNS[objective["objective"]])
            + f" ({objective['objective']})"
        )
    text = plural(figures["threads"], "thread")
    if "rows" in figures:
        text += f" packed in {plural(figures['rows'], 'row')}"
    if "messages" in figures:
        text += f", {plural(figures['messages'], 'message')}"
    if "tokens" in figures:
        share = figures["trained_fraction"]
        text += f", {plural(figures['tokens'], 'token')} ({figures['trained_tokens']:,} trained, "
        text += f"{share:.1%})"
    return text


def _details(figures: dict[str, Any]) -> list[str]:
    lines = objective_lines(figures["objective"]) if "objective" in figures else []
    if "length_max" in figures:
        lengths = ", ".join(
            f"{k.removeprefix('length_')} {figures[k]:,}" for k in _length_keys(figures)
        )
        of = "row" if "rows" in figures else "thread"
        lines.append(f"{of} length in tokens: {lengths}")
        histogram = figures["length_histogram"]
        if histogram:
            bars = "  ".join(f"{bucket}+: {count:,}" for bucket, count in _by_bucket(histogram))
            lines.append(f"{of}s by length: {bars}")
    if "turns_mean" in figures:
        lines.append(
            f"user turns per thread: mean {figures['turns_mean']:g}, max "
            f"{figures['turns_max'] or 0}; {plural(figures['tool_calls'], 'tool call')} in "
            f"{plural(figures['threads_with_tool_calls'], 'thread')}"
        )
    roles = figures.get("roles")
    if roles:
        shares = ", ".join(
            f"{visible(role)} {found['tokens']:,} ({found['token_share']:.1%}, "
            f"{found['trained_tokens']:,} trained)"
            for role, found in sorted(roles.items(), key=lambda item: -item[1]["tokens"])
        )
        lines.append(f"tokens per role: {shares}")
    capabilities = figures.get("capabilities")
    if capabilities:
        used = most_first({name: found["used"] for name, found in capabilities.items()})
        shown = ", ".join(
            f"{visible(name)} {count:,}/{capabilities[name]['enabled']:,}"
            for name, count in used[:8]
        )
        more = f" and {len(used) - 8:,} more" if len(used) > 8 else ""
        lines.append(f"capabilities (threads using/enabling): {shown}{more}")
    return lines


def _length_keys(figures: dict[str, Any]) -> list[str]:
    percentiles = sorted(
        (k for k in figures if k.startswith("length_p")), key=lambda k: float(k[len("length_p") :])
    )
    return [*percentiles, "length_max"]


def _by_bucket(histogram: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(histogram.items(), key=lambda item: int(item[0]))


def _run_lines(run: dict[str, Any]) -> list[str]:
    """The run's accounting: reading, duplicates, drops, truncation, packing, inputs."""
    rates = run["duplicate_rate"]
    lines = [
        f"run: {plural(run['records_read'], 'record')} read, {run['records_quarantined']:,} "
        f"quarantined; {plural(run['threads'], 'thread')}: {rates['exact']:.2%} exact "
        f"duplicates, {rates['near']:.2%} near; {run['truncated']:,} truncated to fit "
        f"({plural(run['tokens_truncated'], 'token')} cut)"
    ]
    if run["dropped"]:
        tokens = run["tokens_dropped"]
        dropped = ", ".join(
            f"{visible(reason)} {count:,}"
            + (f" ({tokens[reason]:,} tokens)" if reason in tokens else "")
            for reason, count in most_first(run["dropped"])
        )
        lines.append(f"  dropped: {dropped}")
    packing = run.get("packing")
    if packing:
        lines.append(
            f"  packed: {packing['threads']:,} threads into {packing['sequences']:,} rows of up "
            f"to {packing['seq_len']:,} tokens, fill {packing['fill']:.2%}"
        )
    if len(run["inputs"]) > 1:
        tokenized = all("tokens" in source for source in run["inputs"])
        lines += [f"  {line}" for line in input_table(run["inputs"], tokenized)]
    return lines
