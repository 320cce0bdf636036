"""Every code block of the documentation site runs, and does what the page says: each page
(docs/**/*.md, the pages scripts/build_reference.py generates, and README.md) is played
top to bottom in its own temporary folder holding copies of configs/ and data_samples/,
offline, as a newcomer would type it:

- `python` blocks are executed, one namespace per page, so a later block sees what an
  earlier one made; `pycon` blocks are run as doctests in that namespace;
- `bash`/`shell`/`console` blocks are run line by line, each line an `mms` command run
  through the CLI (`> FILE` writes its standard output to FILE), which must exit 0;
- `json`, `yaml` and `toml` blocks must parse (a `json` block: one JSON document, or
  one per line);
- `text` blocks (usage lines, terminal output, layouts) are shown, not run.

A page whose Python trains a model is skipped, saying so, where torch is not installed.

A comment on the line before a block changes that, and must say why:

- `<!-- test: file=NAME -->` writes the block to NAME in the folder instead (a config,
  a plugin module) for the blocks after it;
- `<!-- test: exit=N -->` expects every command of the block to exit N;
- `<!-- test: lint=CODE fires -->` (or `passes`) lints the block's lines with that rule
  alone: a rule's example must fire it, or must not;
- `<!-- test: covered-by=tests/test_x.py -->` leaves the block to that test, which must
  read this page (it runs it with a tiny model, checking more than that it runs);
- `<!-- test: skip REASON -->` does not run it (a command that needs a cluster, a
  network or a new virtual environment), with the reason.

`mms push` lines push to a local stand-in of the Hub (tests/hub_stand_in.py)."""

from __future__ import annotations

import doctest
import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

sys.path.insert(0, str(REPO / "scripts"))
import build_reference

DOCS = REPO / "docs"
FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
DIRECTIVE = re.compile(r"<!--\s*test:\s*(.*?)\s*-->\s*$")
TRAINING = re.compile(r"^\s*(?:from|import) (?:torch|transformers|trl)\b", re.M)
"""A block that needs torch (installed best effort, as for the packing proofs)."""
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")
SHELL = frozenset({"bash", "shell", "sh", "console"})
SHOWN = frozenset({"text", ""})
SLOW_PAGES = frozenset(
    {
        "getting-started.md",
        "README.md",
        "guides/train-sft.md",
        "guides/train-preference.md",
        "guides/train-vlm.md",
    }
)
"""Pages that train a tiny model (several seconds each)."""


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page: its language, text, the directive before it, and
    its line in the page."""

    language: str
    code: str
    directive: str
    line: int


def blocks_of(text: str) -> list[Block]:
    """The fenced blocks of a Markdown page, in order."""
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        directive = DIRECTIVE.search(before)
        line = text.count("\n", 0, match.start()) + 1
        found.append(
            Block(match.group(1), match.group(2), directive.group(1) if directive else "", line)
        )
    return found


def written_pages() -> dict[str, str]:
    """Every written page of the site and the README, by path (docs/ pages relative to
    docs/); the generated ones are made when their test runs, not when tests are
    collected."""
    pages = {
        path.relative_to(DOCS).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(DOCS.rglob("*.md"))
    }
    pages["README.md"] = (REPO / "README.md").read_text(encoding="utf-8")
    return pages


PAGES = written_pages()


def _marks(name: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.slow] if name in SLOW_PAGES else []


def _commands(code: str) -> list[str]:
    """A shell block's commands: continuation lines joined, comments and blanks left out."""
    joined = re.sub(r"\\\n\s*", " ", code)
    return [
        line.strip()
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """`NAME=value` before a command: set for it alone; PYTHONPATH's folders also go on
    sys.path, as a new process would have them (the command runs in this one)."""
    saved = {name: os.environ.get(name) for name in env}
    path = list(sys.path)
    os.environ.update(env)
    if "PYTHONPATH" in env:
        sys.path[:0] = [os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p]
    try:
        yield
    finally:
        sys.path[:] = path
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class Player:
    """Plays a page's blocks in a folder, sharing one Python namespace."""

    def __init__(self, folder: Path, page: str) -> None:
        self.folder = folder
        self.page = page
        self.namespace: dict[str, object] = {"__name__": "__docs__"}

    def where(self, block: Block) -> str:
        return f"{self.page}:{block.line}"

    def play(self, block: Block) -> None:
        directive = block.directive
        if directive.startswith("skip"):
            assert directive[4:].strip(), f"{self.where(block)}: a skipped block says why"
            return
        if directive.startswith("covered-by="):
            test = REPO / directive.split("=", 1)[1].split()[0]
            assert test.is_file(), f"{self.where(block)}: no {test}"
            source = test.read_text(encoding="utf-8")
            assert self.page in source, f"{self.where(block)}: {test.name} does not read the page"
            return
        if directive.startswith("file="):
            target = self.folder / directive.split("=", 1)[1].split()[0]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code, encoding="utf-8")
            self.parse(block)
            return
        if directive.startswith("lint="):
            self.lint(block, *directive.split("=", 1)[1].split()[:2])
            return
        exit_code = 0
        if directive.startswith("exit="):
            exit_code = int(directive.split("=", 1)[1].split()[0])
        elif directive:
            raise AssertionError(f"{self.where(block)}: unknown directive {directive!r}")
        if block.language in SHELL:
            self.shell(block, exit_code)
        elif block.language == "python":
            if TRAINING.search(block.code) and importlib.util.find_spec("torch") is None:
                pytest.skip(f"{self.where(block)} trains a model: torch is not installed")
            code = compile(block.code, self.where(block), "exec")
            exec(code, self.namespace)
        elif block.language == "pycon":
            self.doctest(block)
        else:
            self.parse(block)

    def parse(self, block: Block) -> None:
        if block.language == "json":
            try:
                json.loads(block.code)
            except ValueError:
                for line in block.code.splitlines():
                    if line.strip():
                        json.loads(line)
        elif block.language == "yaml":
            yaml.safe_load(block.code)
        elif block.language == "toml":
            tomllib.loads(block.code)
        elif block.language not in SHOWN and block.language != "python":
            raise AssertionError(f"{self.where(block)}: a `{block.language}` block is not run")

    def shell(self, block: Block, exit_code: int) -> None:
        for command in _commands(block.code):
            words = shlex.split(command, comments=True)
            target = None
            if ">" in words:
                at = words.index(">")
                words, target = words[:at], words[at + 1]
            env = {}
            while words and ASSIGNMENT.match(words[0]):
                name, _, value = words.pop(0).partition("=")
                env[name] = value
            assert words and words[0] == "mms", (
                f"{self.where(block)}: `{command}` is not an mms command; "
                "run it as one, or skip the block with a reason"
            )
            with _environment(env):
                result = CliRunner().invoke(main, words[1:], catch_exceptions=False)
            assert result.exit_code == exit_code, (
                f"{self.where(block)}: `{command}` exited {result.exit_code}:\n{result.output}"
            )
            if target is not None:
                (self.folder / target).write_text(result.stdout, encoding="utf-8")

    def lint(self, block: Block, code: str, expected: str) -> None:
        """A rule's example, linted with that rule alone: `fires` or `passes`."""
        example = self.folder / "example.jsonl"
        example.write_text(block.code, encoding="utf-8")
        words = ["lint", str(example), "--from", "mms", "--select", code, "--no-check-media"]
        result = CliRunner().invoke(
            main, [*words, "--output-format", "concise", "--fail-on", "never"]
        )
        assert result.exit_code == 0, f"{self.where(block)}: {result.output}"
        fired = re.search(rf"\b{code}\b", result.stdout) is not None
        assert fired == (expected == "fires"), (
            f"{self.where(block)}: {code} {expected}?\n{result.output}"
        )

    def doctest(self, block: Block) -> None:
        parser = doctest.DocTestParser()
        test = parser.get_doctest(block.code, self.namespace, self.page, self.page, block.line)
        failures: list[str] = []
        flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        runner = doctest.DocTestRunner(optionflags=flags)
        runner.run(test, out=failures.append, clear_globs=False)
        assert runner.failures == 0, "".join(failures)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder like a fresh clone's root (configs/, data_samples/), the working directory,
    offline, with a stand-in of the Hub for `mms push`."""
    from tests.hub_stand_in import HubStandIn, point_client_at

    work = tmp_path / "work"
    work.mkdir()
    for name in ("configs", "data_samples"):
        shutil.copytree(REPO / name, work / name)
    monkeypatch.chdir(work)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("WANDB_DISABLED", "true")
    monkeypatch.setenv("NO_COLOR", "1")
    with HubStandIn() as hub:
        point_client_at(monkeypatch, tmp_path, hub.endpoint, xet=False)
        yield work


@pytest.mark.parametrize(
    "page", [pytest.param(name, marks=_marks(name), id=name) for name in sorted(PAGES)]
)
def test_every_block_of_the_page_runs(page: str, folder: Path) -> None:
    player = Player(folder, page)
    for block in blocks_of(PAGES[page]):
        player.play(block)


def test_every_block_of_the_generated_pages_runs(folder: Path) -> None:
    """The reference pages (their format doctests, examples and usage), each played in a
    folder of its own."""
    for page, text in build_reference.pages().items():
        own = folder / "generated" / page
        own.mkdir(parents=True)
        os.chdir(own)
        player = Player(own, page)
        for block in blocks_of(text):
            player.play(block)


def test_the_site_has_its_pages_and_their_blocks() -> None:
    """A guard against a scan that finds nothing: the pages the navigation names are here,
    and each kind of block is met."""
    generated = build_reference.pages()
    for name in ("index.md", "getting-started.md", "README.md"):
        assert name in PAGES
    assert "reference/cli.md" in generated
    pages = [*PAGES.values(), *generated.values()]
    languages = {block.language for text in pages for block in blocks_of(text)}
    assert {"python", "bash", "pycon", "json", "yaml", "text"} <= languages
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    named = set(re.findall(r"[\w/-]+\.md", json.dumps(nav)))
    assert named <= set(PAGES) | set(generated), named - set(PAGES) - set(generated)


def test_a_shell_line_that_is_no_mms_command_fails_the_page(tmp_path: Path) -> None:
    """The harness itself: a block it cannot run is an error, not a silent pass."""
    player = Player(tmp_path, "x.md")
    with pytest.raises(AssertionError, match="not an mms command"):
        player.play(Block("bash", "pip install foo\n", "", 1))
    with pytest.raises(AssertionError, match="says why"):
        player.play(Block("bash", "pip install foo\n", "skip", 1))
    with pytest.raises(AssertionError, match="exited 2"):
        player.play(Block("bash", "mms convert no-such-file -o x.jsonl\n", "", 1))
    player.play(Block("bash", "mms convert no-such-file -o x.jsonl\n", "exit=2", 1))


def test_the_generated_pages_cover_every_command_rule_and_format() -> None:
    from pipeline.cli import COMMANDS
    from pipeline.formats.registry import FORMATS
    from pipeline.lint.rules import RULES

    generated = build_reference.pages()
    for name in COMMANDS:
        page = generated[f"reference/cli/{name}.md"]
        assert (
            page.startswith(f"# `mms {name}`")
            and f"(cli/{name}.md)" in generated["reference/cli.md"]
        )
    for rule in RULES:
        page = generated[f"reference/rules/{rule.code}.md"]
        assert rule.rationale in page and "## Fails" in page and "## Passes" in page
    for name in FORMATS:
        assert f"reference/formats/{name}.md" in generated
