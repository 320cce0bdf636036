"""The `mms` command line: one module per command, each parsing its options, calling the
job and printing a terse summary; the group here registers them."""

from __future__ import annotations

import importlib
import os
import sys

import click
from rich.markup import escape

from pipeline.cli.output import stderr
from pipeline.storage import StorageError
from pipeline.version import __version__
from pipeline.wording import visible

COMMANDS = {
    "run": "pipeline.cli.run:run_command",
    "convert": "pipeline.cli.convert:convert_command",
    "lint": "pipeline.cli.lint:lint_command",
    "curate": "pipeline.cli.curate:curate_command",
    "inspect": "pipeline.cli.inspect:inspect_command",
    "stats": "pipeline.cli.stats:stats_command",
    "verify": "pipeline.cli.verify:verify_command",
    "push": "pipeline.cli.push:push_command",
    "tokenize": "pipeline.cli.tokenize:tokenize_command",
    "pack": "pipeline.cli.pack:pack_command",
    "export": "pipeline.cli.export:export_command",
    "formats": "pipeline.cli.formats:formats_command",
    "rules": "pipeline.cli.rules:rules_command",
}
"""Each command and where it lives, in the order `mms --help` lists them (the whole job
first, then its steps one by one, then the references): a command's module is imported
only when it runs (or help lists it), so `mms run` does not load what `mms push` needs."""


class _Group(click.Group):
    """The `mms` group: commands loaded from COMMANDS when asked for; an error's message is
    shown on one line with control characters escaped (it often names an input); an object
    store that refused or stopped answering (after the retries) is one error line, exit 1; an
    unexpected failure (a bug) prints one line saying so, never a traceback; MMS_DEBUG=1
    shows the traceback for a bug report."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attribute = target.split(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.ClickException as err:
            # a name in it stays on the error's one line; click declares `message` Final,
            # but it is only read when the error is shown, after this
            err.message = visible(err.message)  # type: ignore[misc]
            raise
        except (click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except StorageError as err:  # an object store that refused or stopped answering
            stderr.print(f"[red]error:[/] {escape(visible(str(err)))}")
            sys.exit(1)
        except BrokenPipeError:  # the reader went away (`mms lint ... | head`): stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(141)
        except Exception as err:
            if os.environ.get("MMS_DEBUG") == "1":
                raise
            stderr.print(
                f"[red]internal error:[/] {escape(visible(f'{type(err).__name__}: {err}'))}. This is a "
                "bug in mms; please report it (run again with MMS_DEBUG=1 to see the traceback)."
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
      mms run configs/quickstart.yaml          a pipeline config -> training-ready shards
      mms convert data/ -o out/threads.jsonl   any supported input -> MMS JSONL
      mms lint data/                           what would fail, file:line by file:line
      mms verify out/quickstart                check an output without trusting it
      mms push out/quickstart ORG/NAME         publish it to the Hugging Face Hub
      mms formats                              which input formats are understood
    """
