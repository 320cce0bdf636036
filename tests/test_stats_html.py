"""The HTML page of `mms stats`: built from the figures of a real quickstart run (plain,
packed by `mms pack`, and packed by a run's pack stage), deterministic, self-contained,
escaped, rendering whatever subset of the figures an output has; and the page loaded in
headless Chromium with its charts holding a bar per bucket and per role (skipped without
Chromium)."""

from __future__ import annotations

import copy
import io
import re
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.jobs.stats import output_stats
from pipeline.output.stats_html import write_stats_html
from tests.browser import chromium
from tests.test_run import (
    NO_GATE,
    OPENAI_SAMPLES,
    QUICKSTART,
    SAMPLE_TOKENIZER,
    run_cli,
    write_config,
)

TOKEN_KEYS = (
    "tokens",
    "trained_tokens",
    "trained_fraction",
    "length_p50",
    "length_p90",
    "length_p99",
    "length_max",
    "length_histogram",
    "roles",
)
"""What a split (or group) has only when its shards are tokenized."""
HOSTILE = '<script>alert("pwned")</script>'


def page_of(stats: dict[str, Any]) -> str:
    out = io.StringIO()
    write_stats_html(stats, out)
    return out.getvalue()


def run_output(config: Path, out: Path) -> Path:
    done = run_cli(str(config), "-o", str(out))
    assert done.exit_code == 0, done.output
    return out


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_output(QUICKSTART, tmp_path_factory.mktemp("stats") / "quickstart")


@pytest.fixture(scope="module")
def stats(quickstart: Path) -> dict[str, Any]:
    return output_stats([quickstart], by="source")


@pytest.fixture(scope="module")
def packed_stats(quickstart: Path) -> dict[str, Any]:
    """`mms pack` of the quickstart output: packed rows, no messages, a manifest without
    reads or a packing record."""
    packed = quickstart.parent / "packed"
    done = CliRunner().invoke(
        main, ["pack", str(quickstart), "--seq-len", "512", "-o", str(packed)]
    )
    assert done.exit_code == 0, done.output
    return output_stats([packed])


@pytest.fixture(scope="module")
def pack_stage_stats(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run with a pack stage: its manifest records the packing."""
    folder = tmp_path_factory.mktemp("pack-stage")
    config = write_config(
        folder,
        "packed",
        OPENAI_SAMPLES,
        NO_GATE,
        f"tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 512}}",
        "pack: {seq_len: 512}",
    )
    return output_stats([run_output(config, folder / "out")])


@pytest.fixture(scope="module")
def html(stats: dict[str, Any]) -> str:
    return page_of(stats)


def without(stats: dict[str, Any], *keys: str, run: bool = False) -> dict[str, Any]:
    """A copy of `stats` without `keys` in any split or group (and without `run`)."""
    stripped = copy.deepcopy(stats)
    if run:
        stripped.pop("run", None)
    for figures in stripped["splits"].values():
        for group in [figures, *(figures.get("by") or {}).get("groups", [])]:
            for key in keys:
                group.pop(key, None)
    return stripped


class Figures(HTMLParser):
    """The page's charts, by (split, chart): their rectangles' fills and their texts; and
    the headline cards."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.rects: dict[tuple[str, str], list[str]] = {}
        self.texts: dict[tuple[str, str], list[str]] = {}
        self.cards: list[str] = []
        self.title = ""
        self._figure: tuple[str, str] | None = None
        self._in: str | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "figure" and "data-chart" in values:
            self._figure = (values.get("data-split", ""), values["data-chart"])
            self.rects.setdefault(self._figure, [])
            self.texts.setdefault(self._figure, [])
        elif tag == "rect" and self._figure is not None:
            self.rects[self._figure].append(values.get("fill", ""))
        if "data-card" in values:
            self.cards.append(values["data-card"])
        self._in = tag

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._figure = None
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "title" and self._figure is None:
            self.title += data
        elif self._in == "text" and self._figure is not None:
            self.texts[self._figure].append(data)


def role_bars(roles: dict[str, dict[str, int]]) -> int:
    """The bars of the role chart: a trained and an untrained part per role, each drawn
    only when it has tokens."""
    return sum(
        (figures["trained_tokens"] > 0) + (figures["tokens"] > figures["trained_tokens"])
        for figures in roles.values()
    )


# --- the page's bytes ---------------------------------------------------------------------


def test_same_stats_same_bytes(stats: dict[str, Any], html: str):
    assert page_of(stats) == html
    assert page_of(copy.deepcopy(stats)) == html


def test_page_shows_every_split_and_the_headline(stats: dict[str, Any], html: str):
    assert "<title>mms stats</title>" in html
    splits = stats["splits"]
    threads = sum(figures["threads"] for figures in splits.values())
    tokens = sum(figures["tokens"] for figures in splits.values())
    assert tokens >= 1000
    assert f'<div class="value">{threads:,}</div>' in html
    assert f'<div class="value">{tokens:,}</div>' in html
    for name, figures in splits.items():
        assert f'data-split="{name}"' in html
        assert f"<code>{name}</code>" in html
        assert f">{figures['tokens']:,}</td>" in html
    run = stats["run"]
    assert f'<div class="value">{run["records_quarantined"]:,}</div>' in html
    for source in run["inputs"]:
        assert f"<code>{source['path']}</code>" in html
    for reason, count in run["dropped"].items():
        lost = run["tokens_dropped"][reason]
        assert (
            f'<code>{reason}</code></td><td class="n">{count:,}</td><td class="n">{lost:,}</td>'
            in html
        )
    assert "✓ " in html and " in the shards" in html
    groups = [g["group"] for figures in splits.values() for g in figures["by"]["groups"]]
    for group in groups:
        assert f"<code>{group}</code>" in html


def test_page_is_self_contained(html: str):
    assert "<script" not in html
    assert not re.search(r"\s(src|href|srcset|action)=", html)
    assert "url(" not in html and "@import" not in html
    assert not re.search(r"<(link|img|iframe|object)\b", html)
    ids = re.findall(r'\sid="([^"]+)"', html)
    assert len(ids) == len(set(ids))


def test_histogram_buckets_are_in_numeric_order_with_the_gaps(html: str, stats: dict[str, Any]):
    as_text = copy.deepcopy(stats)
    for figures in as_text["splits"].values():  # the CLI's JSON order: "128" before "16"
        figures["length_histogram"] = dict(sorted(figures["length_histogram"].items()))
    assert page_of(as_text) == html
    histogram = stats["splits"]["train"]["length_histogram"]
    chart = Figures(html)
    labels = [t for t in chart.texts[("train", "lengths")] if "\u2013" in t]
    lows = [int(label.split("\u2013")[0].replace(",", "")) for label in labels]
    low, high = min(map(int, histogram)), max(map(int, histogram))
    assert lows == [low << n for n in range((high // low).bit_length())]


def test_everything_from_data_is_escaped(stats: dict[str, Any]):
    hostile = copy.deepcopy(stats)
    hostile["splits"][HOSTILE] = hostile["splits"].pop("test")
    hostile["splits"][HOSTILE]["by"]["groups"][0]["group"] = HOSTILE
    hostile["splits"][HOSTILE]["roles"][HOSTILE] = {
        "messages": 1,
        "tokens": 3,
        "trained_tokens": 1,
        "token_share": 0.01,
    }
    hostile["splits"][HOSTILE]["capabilities"][HOSTILE] = {"enabled": 1, "used": 1}
    hostile["run"]["inputs"][0]["path"] = HOSTILE
    hostile["run"]["dropped"][HOSTILE] = 1
    html = page_of(hostile)
    assert HOSTILE not in html
    assert "<script" not in html
    assert "&lt;script&gt;" in html


# --- whatever subset the output has ------------------------------------------------------


def test_packed_output_shows_rows_and_says_what_packed_rows_lack(packed_stats: dict[str, Any]):
    assert all("rows" in figures for figures in packed_stats["splits"].values())
    html = page_of(packed_stats)
    assert "Packed rows keep no messages, so tokens per role and capabilities" in html
    assert "Packed row length" in html
    assert "packed rows" in html
    rows = sum(figures["rows"] for figures in packed_stats["splits"].values())
    assert f"in {rows:,} packed rows" in html
    assert "needs the run&#39;s manifest.json" in html  # mms pack's manifest is not a run's


def test_pack_stage_shows_fill_and_padding(pack_stage_stats: dict[str, Any]):
    packing = pack_stage_stats["run"]["packing"]
    assert packing is not None
    html = page_of(pack_stage_stats)
    chart = Figures(html)
    assert ("", "packing") in chart.rects
    assert f"fill {packing['fill']:.1%}" in chart.texts[("", "packing")]
    assert f"padding tokens {packing['padding']:,}" in html
    assert f"sequence length {packing['seq_len']:,}" in html


def test_stats_without_run_or_tokens(stats: dict[str, Any]):
    html = page_of(without(stats, *TOKEN_KEYS, run=True))
    assert "needs the run&#39;s manifest.json" in html
    assert "Not tokenized: the shards hold no tokens, so no lengths or tokens per role." in html
    assert "Not available: these figures come from Parquet files without the run" in html
    assert "Thread length" not in html
    assert "Capabilities: threads enabling vs using" in html
    for name, figures in stats["splits"].items():
        assert f'data-split="{name}"' in html
        assert f">{figures['threads']:,}</td>" in html


def test_roles_without_the_special_tokens_say_what_they_need(stats: dict[str, Any]):
    html = page_of(without(stats, "roles"))
    assert "Tokens per role need the output&#39;s tokenizer/mms_special_tokens.json." in html
    assert "Tokens per role</text>" not in html


def test_tokens_before_the_first_message_come_first(stats: dict[str, Any]):
    with_bos = copy.deepcopy(stats)
    roles = with_bos["splits"]["train"]["roles"]
    roles["bos"] = {"messages": 0, "tokens": 58, "trained_tokens": 0, "token_share": 0.0079}
    html = page_of(with_bos)
    assert "bos: the tokens before the first message." in html
    drawn = Figures(html).texts[("train", "roles")]
    assert drawn.index("bos") < drawn.index("developer") < drawn.index("assistant")
    assert "58 (0.8%)" in drawn


def test_every_subset_of_the_figures_renders(
    stats: dict[str, Any], packed_stats: dict[str, Any], pack_stage_stats: dict[str, Any]
):
    keys = {key for figures in stats["splits"].values() for key in figures}
    for key in sorted(keys):
        assert "mms stats" in page_of(without(stats, key))
    for key in sorted(stats["run"]):
        stripped = copy.deepcopy(stats)
        del stripped["run"][key]
        assert "mms stats" in page_of(stripped)
    for packing_key in sorted(pack_stage_stats["run"]["packing"]):
        stripped = copy.deepcopy(pack_stage_stats)
        del stripped["run"]["packing"][packing_key]
        assert "mms stats" in page_of(stripped)
    for source_key in sorted(stats["run"]["inputs"][0]):
        stripped = copy.deepcopy(stats)
        for source in stripped["run"]["inputs"]:
            del source[source_key]
        assert "mms stats" in page_of(stripped)
    assert "no splits" in page_of({"splits": {}})
    assert "no splits" in page_of({})
    empty = {"splits": {"train": {"threads": 0, "tokens": 0, "length_histogram": {}, "roles": {}}}}
    assert "No lengths: the split holds no rows." in page_of(empty)
    assert "mms stats" in page_of(without(packed_stats, "rows", run=True))


# --- in a browser -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> tuple[ModuleType, str]:
    return chromium("the stats page")


def test_browser_renders_the_page_with_data_in_its_charts(
    browser: tuple[ModuleType, str], stats: dict[str, Any], html: str, tmp_path: Path
):
    script, chromium = browser
    path = tmp_path / "stats.html"
    path.write_text(html, encoding="utf-8")
    dom = script.dump_dom(chromium, path.as_uri())
    page = Figures(dom)
    assert page.title == "mms stats"
    assert len(page.cards) == 8
    for name, figures in stats["splits"].items():
        assert f'data-split="{name}"' in dom
        lengths = page.rects[(name, "lengths")]
        assert len(lengths) == len(figures["length_histogram"]) > 0
        roles = figures["roles"]
        drawn = page.texts[(name, "roles")]
        assert len(page.rects[(name, "roles")]) == 2 + role_bars(roles)  # the legend's 2
        for role, role_figures in roles.items():
            if role_figures["tokens"]:
                assert role in drawn
                assert f"{role_figures['tokens']:,} ({role_figures['token_share']:.1%})" in drawn
        capabilities = page.rects[(name, "capabilities")]
        assert len(capabilities) > 2


def test_browser_renders_the_packed_page(
    browser: tuple[ModuleType, str], pack_stage_stats: dict[str, Any], tmp_path: Path
):
    script, chromium = browser
    path = tmp_path / "packed.html"
    path.write_text(page_of(pack_stage_stats), encoding="utf-8")
    page = Figures(script.dump_dom(chromium, path.as_uri()))
    assert page.title == "mms stats"
    for name, figures in pack_stage_stats["splits"].items():
        assert len(page.rects[(name, "lengths")]) == len(figures["length_histogram"])
        assert page.rects[(name, "roles")] == []
    assert len(page.rects[("", "packing")]) == 4  # 2 legend swatches, tokens, padding
