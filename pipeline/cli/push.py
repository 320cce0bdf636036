"""`mms push`: publish an output folder to a Hugging Face Hub dataset repository."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from pipeline import api
from pipeline.cli.output import output_argument, print_error, safe, stderr
from pipeline.cli.writes import writes
from pipeline.hub_ids import repo_id_problem
from pipeline.jobs.push import PushError, PushResult
from pipeline.storage import is_url
from pipeline.wording import visible

_SHOWN = 20


def _output(_: click.Context, __: click.Parameter, value: str) -> Path:
    """A local output folder, or one on an object store (`s3://...`), of which the files
    its manifest lists are fetched first."""
    if is_url(value):
        return output_argument(value)
    folder = Path(value)
    if not folder.is_dir():
        raise click.BadParameter(f"{visible(value)} is not a folder (nor an s3:// output)")
    return folder


def _repo_id(_: click.Context, __: click.Parameter, value: str) -> str:
    problem = repo_id_problem(value, owner=True)
    if problem is not None:
        raise click.BadParameter(f"{value!r} is not a repository id like ORG/NAME: {problem}")
    return value


@writes()
@click.command(
    "push",
    epilog="\b\nExamples:\n"
    "  mms push out/quickstart me/quickstart --dry-run\n"
    "  mms push out/quickstart me/quickstart --private\n"
    "  mms push out/quickstart me/quickstart --revision v2 --message 'Second pass'\n"
    "  mms push out/quickstart someorg/chat-data --create-pr",
)
@click.argument("output", callback=_output)
@click.argument("repo_id", metavar="ORG/NAME", callback=_repo_id)
@click.option("--private", is_flag=True, help="Create the repository private (if it is new).")
@click.option("--revision", default=None, metavar="BRANCH", help="Push to this branch [main].")
@click.option("--create-pr", is_flag=True, help="Open a pull request instead of committing.")
@click.option("--message", default=None, help="The commit message.")
@click.option(
    "--token",
    default=None,
    envvar="HF_TOKEN",
    show_envvar=True,
    help="A Hub token with write access [default: HF_TOKEN, else the cached login].",
)
@click.option(
    "--dry-run", is_flag=True, help="List what would be sent and what the remote has already."
)
def push_command(
    output: Path,
    repo_id: str,
    private: bool,
    revision: str | None,
    create_pr: bool,
    message: str | None,
    token: str | None,
    dry_run: bool,
) -> None:
    """Publish an OUTPUT folder of mms run or pack as the dataset repository ORG/NAME.

    Nothing is sent unless the output passes verify's file checks (shards against the
    manifest's sha256 and row counts, the card against the files, the lint gate passed)
    and holds no file its manifest does not list (no work directory, no temporary file).
    Files the repository already has are not sent again; an output it already holds makes
    no commit. The card is published with its code loading from ORG/NAME. Exit status: 0
    pushed (or up to date), 1 refused or failed, 2 a usage error.
    """
    push_and_report(
        output,
        repo_id,
        token=token,
        private=private,
        revision=revision,
        create_pr=create_pr,
        message=message,
        dry_run=dry_run,
    )


def push_and_report(output: Path, repo_id: str, **options: Any) -> None:
    """Push (as `api.push`, with its keyword `options`) under a status line, then print
    what was sent; a refusal or a failure prints why and exits 1."""
    from huggingface_hub.utils.tqdm import disable_progress_bars

    disable_progress_bars()  # the status line says what is happening
    try:
        with (
            _client_quiet(),
            stderr.status("checking the output and the repository", spinner="dots") as status,
        ):
            result = api.push(
                output,
                repo_id,
                progress=lambda done, total: status.update(f"committing: {done}/{total}"),
                **options,
            )
    except PushError as err:
        print_error(err)
        for problem in err.problems[:_SHOWN]:
            stderr.print(f"  [red]✗[/] {safe(problem)}")
        if len(err.problems) > _SHOWN:
            stderr.print(f"  ... and {len(err.problems) - _SHOWN} more")
        sys.exit(1)
    _print_result(result, options.get("dry_run", False))


@contextmanager
def _client_quiet() -> Iterator[None]:
    """huggingface_hub's log lines (its retries: `'...' thrown while requesting GET ...`,
    `Retrying in 1s [Retry 1/5].`) and warnings kept off the terminal while pushing: the
    summary, or the one error line, says what happened. HF_HUB_VERBOSITY, when set, still
    shows the client's lines."""
    hub_logger = logging.getLogger("huggingface_hub")
    level = hub_logger.level
    if not os.environ.get("HF_HUB_VERBOSITY"):
        hub_logger.setLevel(logging.CRITICAL + 1)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module="huggingface_hub")
            yield
    finally:
        hub_logger.setLevel(level)


def _print_result(result: PushResult, dry_run: bool) -> None:
    plan = result.plan
    where = f"{plan.repo_id}@{plan.revision}"
    for file in plan.files:
        state = "same" if file.path in plan.same else "send"
        click.echo(f"  {state}  {file.size:>14,}  {visible(file.path)}")
    for path in plan.stale:
        click.echo(f"  delete  {'':>12}  {visible(path)}")
    sending = plan.to_send
    total = sum(file.size for file in sending)
    if plan.up_to_date:
        click.echo(f"{where} already holds this output: nothing to send, no commit")
        return
    if dry_run:
        new = "" if plan.repo_exists else " (a new repository)"
        click.echo(
            f"dry run: would send {len(sending)} of {len(plan.files)} file(s), {total:,} bytes, "
            f"and delete {len(plan.stale)} to {where}{new}"
        )
        return
    click.echo(
        f"pushed {len(sending)} file(s), {total:,} bytes, in {len(result.commits)} commit(s) "
        f"to {where}"
    )
    if result.pull_request:
        click.echo(f"pull request: {visible(result.pull_request)}")
