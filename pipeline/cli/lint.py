"""`mms lint`: check inputs against the MMS rules and write the report."""

from __future__ import annotations

import dataclasses
import os
import sys

import click

from pipeline import api
from pipeline.cli.options import (
    hf_config_option,
    input_format_option,
    media_options,
    media_roots,
    media_settings,
    overwrite_file_option,
    read_spec,
    split_option,
    worker_count,
    workers_option,
)
from pipeline.cli.output import (
    ConfigProblem,
    Refusal,
    print_error,
    print_refused,
    read_progress,
    safe,
    stderr,
)
from pipeline.cli.writes import writes
from pipeline.engine import PartFailed
from pipeline.lint import ConfigError, LintReport, UnknownRuleError, load_config, select_rules
from pipeline.lint.baseline import Baseline
from pipeline.lint.config import FAIL_ON
from pipeline.lint.report import gating_severities
from pipeline.lint.reports import OUTPUT_FORMATS, write_report
from pipeline.lint.reports.text import concise_line
from pipeline.media import MediaSettings
from pipeline.output.files import OutputPathError
from pipeline.output.guard import OwnedFile, claim_file
from pipeline.output.stdout import standard_text_output
from pipeline.sources import InputError
from pipeline.wording import plural


@writes(output="file")
@click.command(
    "lint",
    epilog="\b\nExamples:\n"
    "  mms lint data/train.jsonl\n"
    "  mms lint raw/ --from sharegpt --select MMS2,MMS4 --statistics\n"
    "  mms lint 'raw/*.jsonl' --workers 4\n"
    "  mms lint out/threads.jsonl --output-format html -o reports/lint.html\n"
    "  mms lint out/threads.jsonl --output-format sarif -o lint.sarif --fail-on warning\n"
    "  mms lint out/threads.jsonl --output-format github   # annotations in GitHub Actions\n"
    "  mms lint data/ --output-format concise --max-findings 50\n"
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
    help="Report format: text (grouped by file, repeated findings collapsed, for people), "
    "concise (one path:line:col: CODE message line per finding, clickable), json "
    "(schemas/lint-report.schema.json), markdown, html (self-contained page with charts), "
    "sarif (code scanning), github (Actions annotations).",
)
@click.option(
    "--max-findings",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="text and concise: show at most N findings, then how many more (the counts and "
    "the exit status still cover all of them).",
)
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    default=None,
    help="Write the report to this file instead of standard output.",
)
@overwrite_file_option
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_ON),
    default=None,
    help="Exit 1 when findings reach this severity [default: error].",
)
@click.option("--statistics", is_flag=True, help="Show the count per rule instead of findings.")
@click.option(
    "--baseline",
    "baseline_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    metavar="FILE",
    help="An earlier JSON report (--output-format json -o FILE) of accepted findings: only "
    "findings it does not have fail the run (matched by rule, file and message, not line).",
)
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
@workers_option
@media_options
def lint_command(
    inputs: tuple[str, ...],
    input_format: str,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    output_format: str,
    max_findings: int | None,
    output: str | None,
    overwrite: bool,
    fail_on: str | None,
    statistics: bool,
    baseline_file: str | None,
    config_file: str | None,
    split: str,
    hf_config: str | None,
    workers: int | None,
    media_flags: dict[str, object],
) -> None:
    """Check INPUT files, directories, globs or hf: datasets against the MMS rules.

    Every record is normalized to MMS threads first (any input format), then checked:
    structure (MMS1xx), capabilities enabled by developer messages (MMS2xx), halting
    (MMS3xx), content syntax and leftovers (MMS4xx), dataset-wide duplicates and variety
    (MMS5xx). Records that cannot become threads are findings too (MMS101/102/105), so
    nothing is skipped silently. Each finding points at its source file and line.
    Exit status: 0 clean, 1 findings at --fail-on severity (or a part failed), 2 usage
    error.
    """
    spec = read_spec(inputs, input_format, split, hf_config)
    media = media_settings(MediaSettings(), media_flags)
    if media.copy:
        raise click.UsageError("mms lint writes no data: --copy-media is for convert and run")
    # as a run reads them: lint agrees
    spec = dataclasses.replace(spec, media=media, media_roots=media_roots(media_flags))
    try:
        config = load_config(config_file).replace(
            select=_codes(select), ignore=_codes(ignore), fail_on=fail_on
        )
        select_rules(config.select, config.ignore)
        for _, selectors in config.per_source_ignores:
            select_rules(list(selectors), ())
        baseline = Baseline.load(baseline_file) if baseline_file else None
    except ConfigError as err:
        raise ConfigProblem(str(err)) from None
    except UnknownRuleError as err:
        raise click.UsageError(str(err)) from None
    try:
        report_file = claim_file(output, overwrite=overwrite) if output is not None else None
    except OutputPathError as err:
        raise Refusal(f"-o: {err}") from None
    try:
        with read_progress() as update:
            report = api.lint(
                inputs,
                spec=spec,
                config=config,
                progress=(lambda stats, _report: update(stats)) if update else None,
                workers=worker_count(workers),
                report_file=output,
            )
    except OutputPathError as err:
        raise Refusal(str(err)) from None
    except InputError as err:
        raise click.UsageError(str(err)) from None
    except PartFailed as err:
        print_error(err, "; no report was written")
        sys.exit(1)
    print_refused(report.stats.refused_files)
    _write_report(report, output_format, report_file, statistics, max_findings)
    if baseline is not None:
        sys.exit(_gate_on_new(report, baseline, baseline_file or ""))
    if report.failed():
        sys.exit(1)


SHOWN_NEW = 20
"""New findings at fail-on listed after the baseline line."""


def _gate_on_new(report: LintReport, baseline: Baseline, path: str) -> int:
    """The exit status when only findings the baseline lacks count: 1 when one of them
    reaches fail_on; says how many were known and how many are new."""
    new = list(baseline.new(report.diagnostics))
    severities = gating_severities(report.config.fail_on)
    gating = [d for d in new if d.severity in severities]
    known = len(report.diagnostics) - len(new)
    stderr.print(
        f"Baseline {safe(path)}: {plural(known, 'finding')} known, {len(new):,} new"
        + (f", {len(gating):,} of them at fail-on {report.config.fail_on}" if gating else ""),
        highlight=False,
    )
    for diagnostic in gating[:SHOWN_NEW]:
        stderr.print(f"  new: {concise_line(diagnostic)}", highlight=False, markup=False)
    return 1 if gating else 0


def _codes(values: tuple[str, ...]) -> tuple[str, ...] | None:
    """Repeatable, comma-separated rule selectors; None when not given."""
    codes = tuple(code.strip() for value in values for code in value.split(",") if code.strip())
    return codes or None


def _write_report(
    report: LintReport,
    output_format: str,
    output: OwnedFile | None,
    statistics: bool,
    max_findings: int | None,
) -> None:
    if output is None:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        with standard_text_output() as out:
            write_report(
                report,
                output_format,
                out,
                color=color,
                statistics=statistics,
                max_findings=max_findings,
            )
        return
    with output.open_text() as out:
        write_report(report, output_format, out, statistics=statistics, max_findings=max_findings)
    summary = report.summary()
    stderr.print(
        f"Wrote the {output_format} report to {safe(output.path)}: {summary['findings']:,} findings "
        f"({report.errors:,} errors, {report.warnings:,} warnings) in {summary['threads']:,} "
        f"threads from {summary['records']:,} records"
    )
