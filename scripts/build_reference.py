"""Build the site's reference pages from the code, so they cannot drift from it: every CLI
command (click's usage, help and options), the run config (schemas/), every lint rule (its
code, severity, why, and its own bad and good examples), every input format (its adapter's
docstring and doctest, and a sample record with the thread it becomes), the output layout
(DESIGN §7) and the Python API (mkdocstrings directives).

The pages are generated at build time: `scripts/mkdocs_hooks.py` adds `pages()` to the
build, so `mkdocs build --strict` checks them with the rest. To read them as files:

    python scripts/build_reference.py /tmp/reference
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import click

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from pipeline.cli import COMMANDS, main  # noqa: E402
from pipeline.formats.base import InputFormat  # noqa: E402
from pipeline.formats.registry import FORMATS  # noqa: E402
from pipeline.lint.docs import SCOPES, example_lines  # noqa: E402
from pipeline.lint.rule import Rule  # noqa: E402
from pipeline.lint.rules import RULES  # noqa: E402
from pipeline.sources import Record, TextDocument, iter_file  # noqa: E402

SCHEMA = REPO / "schemas" / "pipeline-config.schema.json"
DESIGN = REPO / "docs" / "DESIGN.md"
SAMPLES = REPO / "data_samples"
REFERENCE = "reference"
FAMILIES = {
    "MMS1": "Structure",
    "MMS2": "Capabilities",
    "MMS3": "Halting",
    "MMS4": "Content",
    "MMS5": "Dataset",
}
API_NAMES_SKIPPED = frozenset({"annotations", "importlib", "TYPE_CHECKING", "Any"})
"""Names the package's namespace holds that are imports, not its API."""


# ------------------------------------------------------------------------------ CLI


def _help_paragraphs(text: str) -> list[str]:
    """A click help text as Markdown: its paragraphs, and `\\b` blocks (kept as written by
    click) as preformatted text."""
    out: list[str] = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        if paragraph.startswith("\b"):
            out.append("```text\n" + paragraph.lstrip("\b\n") + "\n```")
        else:
            out.append(" ".join(line.strip() for line in paragraph.splitlines()))
    return out


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def command_page(name: str, command: click.Command, parent: click.Context) -> str:
    """One command's page, as `mms NAME --help` has it: usage, help, arguments, options,
    and the `pipeline.api` function it calls (a command that works on data has one)."""
    ctx = click.Context(command, info_name=name, parent=parent)
    lines = [f"# `mms {name}`", ""]
    lines += ["```text", command.get_usage(ctx).strip(), "```", ""]
    for paragraph in _help_paragraphs(command.help or ""):
        lines += [paragraph, ""]
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    if arguments:
        lines += ["| argument | |", "|---|---|"]
        for argument in arguments:
            many = " (one or more)" if argument.nargs == -1 else ""
            required = "required" if argument.required else "optional"
            lines.append(f"| `{argument.make_metavar(ctx)}` | {required}{many} |")
        lines.append("")
    options = [p.get_help_record(ctx) for p in command.params if isinstance(p, click.Option)]
    shown = [record for record in options if record is not None]
    help_option = command.get_help_option(ctx)
    if help_option is not None and (record := help_option.get_help_record(ctx)) is not None:
        shown.append(record)
    if shown:
        lines += ["| option | what it does |", "|---|---|"]
        lines += [f"| `{_cell(names)}` | {_cell(text)} |" for names, text in shown]
        lines.append("")
    from pipeline import api

    if callable(getattr(api, name, None)):
        lines += [
            "## From Python",
            "",
            f"The command is a layer over `pipeline.api.{name}`: the same settings as "
            "keywords, the same defaults, the result whose counts the command prints.",
            "",
            f"::: pipeline.api.{name}",
            "",
        ]
    return "\n".join(lines)


def cli_page() -> str:
    """The commands' index: `mms`'s usage and each command's line, linking its page."""
    root = click.Context(main, info_name="mms")
    lines = [
        "# Command line",
        "",
        "Generated from the commands themselves (`mms COMMAND --help` prints the same). "
        "Every command takes `--help`; `mms --version` prints the version.",
        "",
        "```text",
        main.get_usage(root).strip(),
        "```",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    commands = {name: main.get_command(root, name) for name in COMMANDS}
    for name, command in commands.items():
        assert command is not None, name
        lines.append(f"| [`mms {name}`](cli/{name}.md) | {_cell(command.get_short_help_str(90))} |")
    lines.append("")
    return "\n".join(lines)


def command_pages() -> dict[str, str]:
    """Every command's page, by its path under docs/."""
    root = click.Context(main, info_name="mms")
    pages: dict[str, str] = {}
    for name in COMMANDS:
        command = main.get_command(root, name)
        assert command is not None, name
        pages[f"{REFERENCE}/cli/{name}.md"] = command_page(name, command, root)
    return pages


# --------------------------------------------------------------------------- config


def _resolve(node: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The node a `$ref` points at (within the same schema), merged under the node's own
    keys; any other node as it is."""
    ref = node.get("$ref")
    if not ref:
        return node
    target: Any = schema
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return {**_resolve(target, schema), **{k: v for k, v in node.items() if k != "$ref"}}


def _type_of(node: dict[str, Any], schema: dict[str, Any]) -> str:
    node = _resolve(node, schema)
    if "enum" in node:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in node["enum"])
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    variants = node.get("oneOf") or node.get("anyOf")
    if variants:
        return " or ".join(_type_of(variant, schema) for variant in variants)
    kind = node.get("type", "any")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array" and "items" in node:
        return f"list of {_type_of(node['items'], schema)}"
    return str(kind)


def _rows(path: str, node: dict[str, Any], schema: dict[str, Any], required: bool) -> Iterator[str]:
    """A table row for `path`, then one for each property below it (in objects, lists of
    objects, and the object variant of a `oneOf`)."""
    node = _resolve(node, schema)
    default = f"`{json.dumps(node['default'])}`" if "default" in node else ""
    if required:
        default = "required"
    description = _cell(node.get("description", ""))
    yield f"| `{path}` | {_type_of(node, schema)} | {default} | {description} |"
    children: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    if node.get("type") == "object":
        children.append((path, node, node))
    items = node.get("items")
    if node.get("type") == "array" and isinstance(items, dict):
        item = _resolve(items, schema)
        if item.get("type") == "object":
            children.append((f"{path}[]", item, item))
    for variant in node.get("oneOf") or node.get("anyOf") or ():
        variant = _resolve(variant, schema)
        if variant.get("type") == "object" and variant.get("properties"):
            children.append((path, variant, variant))
    for prefix, holder, _ in children:
        needed = set(holder.get("required", ()))
        for key, child in (holder.get("properties") or {}).items():
            yield from _rows(f"{prefix}.{key}", child, schema, key in needed)


def config_page() -> str:
    """The run config, key by key, from schemas/pipeline-config.schema.json."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    lines = [
        "# Run config",
        "",
        "Generated from `schemas/pipeline-config.schema.json`, the JSON Schema in the "
        "repository that `mms run` checks every config against (an error names the line). "
        "Each key is written as a dotted path: "
        "`stages.lint.fail_on` is `fail_on` under `lint` under `stages`; `inputs[]` is "
        "each item of the `inputs` list.",
        "",
        schema.get("description", ""),
        "",
    ]
    needed = set(schema.get("required", ()))
    for key, node in schema["properties"].items():
        lines += [f"## `{key}`", ""]
        lines += ["| key | type | default | what it is |", "|---|---|---|---|"]
        lines += list(_rows(key, node, schema, key in needed))
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- rules


def _example_block(examples: Sequence[dict[str, Any] | str]) -> list[str]:
    return ["```json", *example_lines(examples), "```"]


def rule_page(rule: Rule) -> str:
    """One rule: code, name, severity, what it checks, why, a bad and a good example."""
    lines = [
        f"# {rule.code} `{rule.name}`",
        "",
        "| code | name | default severity | checks | family |",
        "|---|---|---|---|---|",
        f"| {rule.code} | `{rule.name}` | {rule.severity} | {SCOPES[rule.scope]} "
        f"| {FAMILIES.get(rule.family, rule.family)} |",
        "",
        rule.summary,
        "",
        "## Why",
        "",
        rule.rationale,
        "",
        "## Fails: this fires the rule",
        "",
        "A dataset of these lines (MMS threads, one a line, read with `--from mms`; a line that "
        "is not a thread is a raw record) gets a finding:",
        "",
        f"<!-- test: lint={rule.code} fires -->",
        *_example_block(rule.bad),
        "",
        "## Passes: this does not",
        "",
        f"<!-- test: lint={rule.code} passes -->",
        *_example_block(rule.good),
        "",
        "Both examples are part of the rule's definition, and the tests lint them as shown "
        "here: the first must fire the rule, the second must not.",
        "",
        "## Run it alone",
        "",
        "```text",
        f"mms lint threads.jsonl --from mms --select {rule.code}",
        f"mms rules {rule.code}",
        "```",
        "",
    ]
    if rule.options:
        settings = ", ".join(f"`{option}`" for option in rule.options)
        lines += [
            "## Settings",
            "",
            f"Under `[tool.mms.lint]` in `pyproject.toml` (or `stages.lint` in a run config, "
            f"with `_` for `-`): {settings}.",
            "",
        ]
    return "\n".join(lines)


def rules_index() -> str:
    lines = [
        "# Lint rules",
        "",
        "Every rule `mms lint` runs, generated from the rules' definitions "
        "(`pipeline/lint/rules/`). `--select` and `--ignore` take codes, families "
        "(`MMS2`), names or `ALL`; `mms rules CODE` prints a rule's page in the terminal.",
        "",
    ]
    for family, title in FAMILIES.items():
        members = [rule for rule in RULES if rule.family == family]
        if not members:
            continue
        lines += [f"## {family}xx: {title}", "", "| code | name | severity | what |"]
        lines.append("|---|---|---|---|")
        for rule in members:
            lines.append(
                f"| [{rule.code}]({rule.code}.md) | `{rule.name}` | {rule.severity} "
                f"| {_cell(rule.summary)} |"
            )
        lines.append("")
    return "\n".join(lines)


# -------------------------------------------------------------------------- formats


def _module_of(fmt: InputFormat) -> Any:
    module = importlib.import_module(fmt.to_threads.__module__)
    while module.__name__.count(".") > 2:  # an adapter package's inner module
        module = importlib.import_module(module.__name__.rsplit(".", 1)[0])
    return module


def _imports_for(example: list[str], module: Any) -> str | None:
    """The `>>> from MODULE import ...` line that gives a doctest the module's names it
    uses (a docstring's examples run in their module; on a page they must say so)."""
    code = "\n".join(line[4:] for line in example if line.startswith((">>> ", "... ")))
    imported = set(re.findall(r"import ([\w, ]+)", code))
    own = {name.strip() for names in imported for name in names.split(",")}
    used = dict.fromkeys(re.findall(r"(?<![.\w])([A-Za-z_]\w*)", code))
    names = [
        name
        for name in used
        if name in vars(module)
        and not name.startswith("__")
        and name not in own
        and not inspect.ismodule(vars(module)[name])
    ]
    return f">>> from {module.__name__} import {', '.join(names)}" if names else None


def _docstring_parts(doc: str, module: Any) -> list[str]:
    """A docstring as Markdown: prose paragraphs, and each run of doctest lines as a
    `pycon` block (the site's tests run them with doctest) that imports the module's
    names its examples use."""
    out: list[str] = []
    block: list[str] = []
    prose: list[str] = []

    def flush_prose() -> None:
        if prose:
            out.append(" ".join(line.strip() for line in prose))
            prose.clear()

    def flush_block() -> None:
        if block:
            imports = _imports_for(block, module)
            lines = [imports, *block] if imports else block
            out.append("```pycon\n" + "\n".join(lines) + "\n```")
            block.clear()

    in_example = False
    for line in inspect.cleandoc(doc).splitlines():
        if line.startswith(">>> "):
            flush_prose()
            in_example = True
        if in_example:
            if not line.strip():
                flush_block()
                in_example = False
                continue
            block.append(line)
            continue
        if not line.strip():
            flush_prose()
        else:
            prose.append(line)
    flush_prose()
    flush_block()
    return out


def _sample(name: str) -> tuple[str, Any, dict[str, Any]] | None:
    """(file, raw record, thread) of the first expected thread of the format's sample
    whose record can be found by its locator, or None."""
    expected = SAMPLES / "expected" / name / "threads.jsonl"
    folder = SAMPLES / name
    if not expected.is_file() or not folder.is_dir():
        return None
    files = {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}
    for line in expected.read_text(encoding="utf-8").splitlines()[:8]:
        thread = json.loads(line)
        meta = thread.get("meta") or {}
        source, locator = meta.get("source"), meta.get("locator")
        if source not in files:
            continue
        path = str(files[source])
        try:
            for item in iter_file(path):
                if isinstance(item, Record) and source + item.locator[len(path) :] == locator:
                    return source, item.value, thread
        except Exception:  # a file only its format's reader reads (a script read whole)
            continue
    return None


def _record_block(record: Any) -> list[str]:
    """A raw record as it is in its file: JSON, or the text of a script read whole."""
    if isinstance(record, TextDocument):
        return ["```text", record.text.rstrip("\n"), "```"]
    return ["```json", _json(record), "```"]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def format_page(fmt: InputFormat) -> str:
    module = _module_of(fmt)
    lines = [f"# `{fmt.name}`", "", fmt.summary, ""]
    if fmt.fallback:
        lines += [
            "Read by structure alone: auto-detection takes it only when no other format "
            "accepts the records.",
            "",
        ]
    lines += [f"`mms convert INPUT --from {fmt.name} -o threads.jsonl`", ""]
    lines += ["## What it reads", ""]
    for part in _docstring_parts(module.__doc__ or "", module):
        lines += [part, ""]
    sample = _sample(fmt.name)
    if sample is not None:
        source, record, thread = sample
        lines += [
            "## A record and the thread it becomes",
            "",
            f"From `data_samples/{fmt.name}/{source}`, the record at `{thread['meta']['locator']}`:",
            "",
            *_record_block(record),
            "",
            f"becomes (as in `data_samples/expected/{fmt.name}/threads.jsonl`):",
            "",
            "```json",
            _json(thread),
            "```",
            "",
        ]
    return "\n".join(lines)


def formats_index() -> str:
    lines = [
        "# Input formats",
        "",
        "Every format `mms convert --from` takes, generated from the adapters "
        "(`pipeline/formats/`). `auto` (the default) detects the format of each file from "
        "its first records; `mms formats --detect FILE` shows why.",
        "",
        "| `--from` | what it reads |",
        "|---|---|",
    ]
    for name, fmt in FORMATS.items():
        lines.append(f"| [`{name}`]({name}.md) | {_cell(fmt.summary)} |")
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- output


def output_page() -> str:
    """DESIGN §7, the output of a run, as the contract has it."""
    text = DESIGN.read_text(encoding="utf-8")
    match = re.search(r"^## 7\. .*?(?=^## 8\. )", text, flags=re.S | re.M)
    assert match, "DESIGN.md has no section 7"
    body = match.group(0).split("\n", 1)[1]
    return "\n".join(
        [
            "# Output layout",
            "",
            "What a run writes, from the design contract ([DESIGN §7](../DESIGN.md)), "
            "copied here at build time.",
            "",
            body.strip(),
            "",
        ]
    )


# ------------------------------------------------------------------------------ API


def api_names() -> list[str]:
    """The public names of the `pipeline` package (its `__all__`), in order."""
    import pipeline
    from pipeline import api

    commands = {name for name in vars(api) if callable(getattr(api, name))}
    skipped = API_NAMES_SKIPPED | commands  # shown once, on the api module's section
    return [name for name in pipeline.__all__ if name not in skipped]


def api_page() -> str:
    lines = [
        "# Python API",
        "",
        "Every command as a function (`pipeline.api`), then the other public names of the "
        "`pipeline` package, from their docstrings. Anything under `pipeline.*` that is not "
        "listed here may change between versions.",
        "",
        "## `pipeline.api`",
        "",
        "::: pipeline.api",
        "",
    ]
    for name in api_names():
        lines += [f"## `pipeline.{name}`", "", f"::: pipeline.{name}", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ all


def pages() -> dict[str, str]:
    """Every generated page, by its path under docs/."""
    out = {
        f"{REFERENCE}/cli.md": cli_page(),
        f"{REFERENCE}/config.md": config_page(),
        f"{REFERENCE}/output.md": output_page(),
        f"{REFERENCE}/api.md": api_page(),
        f"{REFERENCE}/rules/index.md": rules_index(),
        f"{REFERENCE}/formats/index.md": formats_index(),
        **command_pages(),
    }
    for rule in RULES:
        out[f"{REFERENCE}/rules/{rule.code}.md"] = rule_page(rule)
    for name, fmt in FORMATS.items():
        out[f"{REFERENCE}/formats/{name}.md"] = format_page(fmt)
    return out


def nav() -> list[Any]:
    """The Reference section of the site's navigation."""
    return [
        {
            "Command line": [
                f"{REFERENCE}/cli.md",
                *({f"mms {name}": f"{REFERENCE}/cli/{name}.md"} for name in COMMANDS),
            ]
        },
        {"Run config": f"{REFERENCE}/config.md"},
        {
            "Lint rules": [
                f"{REFERENCE}/rules/index.md",
                *({rule.code: f"{REFERENCE}/rules/{rule.code}.md"} for rule in RULES),
            ]
        },
        {
            "Input formats": [
                f"{REFERENCE}/formats/index.md",
                *({name: f"{REFERENCE}/formats/{name}.md"} for name in FORMATS),
            ]
        },
        {"Output layout": f"{REFERENCE}/output.md"},
        {"Python API": f"{REFERENCE}/api.md"},
    ]


def main_(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write the pages into")
    args = parser.parse_args(argv)
    written = pages()
    for path, text in written.items():
        target = args.out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    print(f"wrote {len(written)} pages under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
