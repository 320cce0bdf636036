"""`mms formats`: the input formats `--from` accepts, or how one file would be detected."""

from __future__ import annotations

import click

from pipeline.cli.writes import writes
from pipeline.formats import AUTO, FORMATS
from pipeline.formats.suggest import suggest_mapping
from pipeline.jobs.read import detect_file, first_records
from pipeline.wording import visible


@writes()
@click.command(
    "formats",
    epilog="\b\nExamples:\n  mms formats\n  mms formats --detect data/train.jsonl\n"
    "  mms formats --suggest-mapping data/odd.jsonl > odd_mapping.yaml\n"
    "  mms convert data/odd.jsonl --mapping odd_mapping.yaml -o threads.jsonl",
)
@click.option(
    "--detect",
    "detect_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Score every format on FILE's first records and show why.",
)
@click.option(
    "--suggest-mapping",
    "suggest_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Write (to standard output) a field mapping that reads FILE, from the keys of its "
    "first records, with what to check in comments: edit it, then pass it as --mapping.",
)
def formats_command(detect_file: str | None, suggest_file: str | None) -> None:
    """List the input formats `--from` accepts, show how a file would be detected, or
    suggest a field mapping for a file no format reads."""
    if detect_file is not None:
        _print_detection(detect_file)
        return
    if suggest_file is not None:
        _print_suggestion(suggest_file)
        return
    width = max(len(name) for name in [AUTO, *FORMATS])
    click.echo(f"{AUTO:<{width}}  detect the format of each file from its first records (default)")
    for name, fmt in FORMATS.items():
        click.echo(f"{name:<{width}}  {fmt.summary}")


def _print_detection(path: str) -> None:
    detection = detect_file(path)
    click.echo(f"{visible(path)}: {detection.records} record(s) sniffed -> {detection.label}")
    width = max(len(name) for name in FORMATS)
    for score in detection.scores:
        mean = score.total / detection.records if detection.records else 0.0
        click.echo(
            f"  {score.name:<{width}}  {mean:4.2f}  accepts {score.accepted}/{detection.records}"
            f"  {visible(score.reason)}"
        )
    if detection.per_record:
        click.echo("  no format accepts every record: each record is detected on its own")
    elif detection.format is None:
        click.echo("  no format accepts these records: name one with --from")


def _print_suggestion(path: str) -> None:
    records = [record.value for record in first_records(path)]
    suggestion = suggest_mapping(records)
    if suggestion is None:
        raise click.UsageError(
            f"{visible(path)}: its first records hold no object whose keys a mapping could "
            "name (a mapping reads JSON objects: see `mms formats --detect`)"
        )
    click.echo(suggestion.to_yaml(visible(path)), nl=False)
