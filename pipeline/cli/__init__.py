"""The `mms` command line: one module per command, each parsing its options, calling the
job and printing a terse summary; the group here registers them."""

from __future__ import annotations

import os
import sys

import click

from pipeline.cli.convert import convert_command
from pipeline.cli.formats import formats_command
from pipeline.cli.inspect import inspect_command
from pipeline.cli.lint import lint_command
from pipeline.cli.output import stderr
from pipeline.cli.pack import pack_command
from pipeline.cli.push import push_command
from pipeline.cli.rules import rules_command
from pipeline.cli.run import run_command
from pipeline.cli.tokenize import tokenize_command
from pipeline.cli.verify import verify_command
from pipeline.version import __version__


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
      mms push out/quickstart ORG/NAME         publish it to the Hugging Face Hub
    """


main.add_command(formats_command)
main.add_command(convert_command)
main.add_command(lint_command)
main.add_command(rules_command)
main.add_command(tokenize_command)
main.add_command(inspect_command)
main.add_command(run_command)
main.add_command(verify_command)
main.add_command(pack_command)
main.add_command(push_command)
