"""`mms rules`: the lint rules, or one explained with a bad and a good example."""

from __future__ import annotations

import click
import orjson

from pipeline.cli.writes import writes
from pipeline.lint import RULES, UnknownRuleError, find_rule
from pipeline.lint.docs import rule_dict, rule_page, rules_table


@writes()
@click.command(
    "rules", epilog="\b\nExamples:\n  mms rules\n  mms rules MMS201\n  mms rules invalid-json"
)
@click.argument("rule", required=False, metavar="[CODE]")
@click.option(
    "--output-format",
    type=click.Choice(("text", "json")),
    default="text",
    show_default=True,
    help="Plain text, or JSON for tools.",
)
def rules_command(rule: str | None, output_format: str) -> None:
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
