"""`mms formats`: the input formats `--from` accepts, or how one file would be detected."""

from __future__ import annotations

import click

from pipeline.formats import AUTO, FORMATS
from pipeline.jobs.read import detect_file
from pipeline.wording import visible


@click.command(
    "formats", epilog="\b\nExamples:\n  mms formats\n  mms formats --detect data/train.jsonl"
)
@click.option(
    "--detect",
    "detect_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Score every format on FILE's first records and show why.",
)
def formats_command(detect_file: str | None) -> None:
    """List the input formats `--from` accepts, or show how a file would be detected."""
    if detect_file is not None:
        _print_detection(detect_file)
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
