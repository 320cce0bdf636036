"""The HTML lint report: a self-contained, escaped, deterministic page (fast checks on the
written HTML), and the same page loaded in headless Chromium (skipped without it)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from unittest.mock import patch
from xml.etree import ElementTree

import pytest
from jinja2 import Environment

from pipeline.jobs.lint import lint, lint_threads
from pipeline.jobs.read import ReadSpec
from pipeline.lint import LintConfig, LintReport
from pipeline.lint.reports import charts, write_report
from pipeline.lint.reports.page import page_template
from pipeline.mms import Thread
from tests.browser import chromium
from tests.conftest import DATA, REPO

imread = pytest.importorskip(
    "matplotlib.image", reason="the lint report's charts need matplotlib (the dev extra)"
).imread

URL_ATTRIBUTES = {"src", "href", "xlink:href", "srcset", "action", "poster", "data", "formaction"}
EXTERNAL = re.compile(r"^\s*([a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)
CSS_URL = re.compile(r"url\(\s*['\"]?(?!#)", re.IGNORECASE)
HOSTILE = '<script>alert("pwned")</script>'


class Page(HTMLParser):
    """What a page is made of: tags and their attributes, CSS text, and references that
    would make a browser fetch something."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.css: list[str] = []
        self._in_style = False
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        self.tags.append((tag, values))
        self.css.append(values.get("style", ""))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.css.append(data)

    def count(self, tag: str, **attrs: str) -> int:
        return sum(
            1 for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items())
        )

    def with_attribute(self, name: str) -> list[dict[str, str]]:
        return [a for _, a in self.tags if name in a]

    def external_references(self) -> list[str]:
        found = [
            f"{tag} {name}={value}"
            for tag, attrs in self.tags
            for name, value in attrs.items()
            if name in URL_ATTRIBUTES and EXTERNAL.match(value)
        ]
        found += [f"{tag}" for tag, _ in self.tags if tag in ("link", "img", "iframe", "object")]
        return found + [css for css in self.css if CSS_URL.search(css) or "@import" in css]


def message(role: str, content: str, **fields: object) -> dict:
    return {"role": role, "content": content, **fields}


def assistant(content: str, format: str = "markdown", end_turn: bool = True) -> dict:
    return message("assistant", content, format=format, end_turn=end_turn)


def thread(id: str, *messages: dict) -> Thread:
    return Thread.from_dict({"id": id, "messages": list(messages)})


def hostile_report(config: LintConfig | None = None) -> LintReport:
    """Markup in content, a context name and a capability name; a tool call nobody enabled
    (MMS201), a tool result, and a duplicate thread (MMS501)."""
    threads = [
        thread(
            "tool",
            message("developer", "Wrap answers in `<em>bold</em>` when asked."),
            message("user", f"Weather in Oslo? {HOSTILE}"),
            assistant('{"city":"Oslo"}', "get_weather:json", end_turn=False),
            message("context", "12 degrees", name="<b>weather</b>"),
            assistant("It is 12 degrees."),
        ),
        thread("d1", message("user", "Hello"), assistant("Hi there")),
        thread("d2", message("user", "Hello"), assistant("Hi there")),
    ]
    return lint_threads(threads, config)


def html_of(report: LintReport) -> str:
    out = io.StringIO()
    write_report(report, "html", out)
    return out.getvalue()


def group_codes(html: str) -> list[str]:
    return re.findall(r'data-rule-group="([A-Z0-9]+)"', html)


@pytest.fixture(scope="module")
def hostile_html() -> str:
    return html_of(hostile_report())


def test_page_is_self_contained(hostile_html: str):
    html = hostile_html
    page = Page(html)
    assert page.external_references() == []
    assert page.count("script") == 1
    assert "<script src" not in html
    assert html.count("<svg") == 6
    assert len(page.with_attribute("data-card")) == 8


def test_everything_from_data_is_escaped(hostile_html: str):
    html = hostile_html
    page = Page(html)
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in html
    assert "&lt;b&gt;weather&lt;/b&gt;" in html
    assert "&lt;em&gt;bold&lt;/em&gt;" in html
    assert page.count("script") == 1
    assert page.count("em") == 0
    assert page.count("b") == 0


def test_same_report_same_bytes(hostile_html: str):
    report = hostile_report()
    assert html_of(report) == hostile_html
    assert html_of(report) == hostile_html


def test_compiled_page_kept_in_the_cache_gives_the_same_bytes(
    hostile_html: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The first page compiles the template and keeps its code; the next loads that code
    (the template compiled again is never needed) and writes the same bytes."""
    monkeypatch.setenv("MMS_CACHE_DIR", str(tmp_path))
    report = hostile_report()
    page_template.cache_clear()
    try:
        assert html_of(report) == hostile_html
        kept = sorted((tmp_path / "templates").glob("*.code"))
        assert len(kept) == 1
        page_template.cache_clear()
        with patch.object(Environment, "compile", side_effect=AssertionError("compiled")):
            assert html_of(report) == hostile_html
        kept[0].write_bytes(b"not code")  # spoiled: compiled again, the same page
        page_template.cache_clear()
        assert html_of(report) == hostile_html
        monkeypatch.setenv("MMS_CACHE_DIR", "off")
        page_template.cache_clear()
        assert html_of(report) == hostile_html
    finally:
        page_template.cache_clear()


def test_chart_ids_are_unique_on_the_page(hostile_html: str):
    ids = [a["id"] for a in Page(hostile_html).with_attribute("id")]
    assert len(ids) == len(set(ids))


def test_findings_grouped_by_rule_most_first():
    report = hostile_report(LintConfig(max_examples=1))
    html = html_of(report)
    codes = group_codes(html)
    assert set(codes) == set(report.by_code)
    counts = [report.by_code[c] for c in codes]
    assert counts == sorted(counts, reverse=True)
    for code in codes:
        assert f'href="#rule={code}" data-rule-filter="{code}"' in html
    assert 'data-rule-filter="all"' in html
    capped = [c for c in codes if report.by_code[c] > 1]
    for code in capped:
        assert f"showing 1 of {report.by_code[code]} — see the JSON report for all" in html


def test_thread_is_drawn_like_the_spec():
    html = html_of(hostile_report(LintConfig(select=("MMS201",))))
    assert group_codes(html) == ["MMS201"]
    blocks = re.findall(r'<div class="message ([^"]*)">', html)
    assert blocks == ["developer", "user", "assistant at-fault error", "context", "assistant"]
    assert '<span class="label">get_weather:json</span>' in html
    assert '<span class="label">&lt;b&gt;weather&lt;/b&gt;</span>' in html
    assert html.count("⏎ end_turn") == 1
    assert html.count("… continues (no end_turn)") == 1
    assert "◀ error here" in html
    assert "message #2" in html


def test_long_thread_shows_a_window_with_notes():
    turns = [
        message("user", "") if i == 28 else (message("user", "q") if i % 2 == 0 else assistant("a"))
        for i in range(45)
    ]
    turns[27] = assistant("x" * 2500)
    html = html_of(lint_threads([thread("long", *turns)], LintConfig(select=("MMS104",))))
    assert "16 earlier messages omitted" in html
    assert "4 later messages omitted" in html
    assert "… 500 more characters not shown" in html
    assert '<pre class="content empty">(empty)</pre>' in html


def test_record_that_never_became_a_thread_shows_its_raw_text(tmp_path: Path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"messages": [<b>not json</b>\n', encoding="utf-8")
    html = html_of(lint(str(path), ReadSpec("mms")))
    assert group_codes(html) == ["MMS105"]
    assert "raw record (never became a thread)" in html
    assert "{&#34;messages&#34;: [&lt;b&gt;not json&lt;/b&gt;" in html
    assert f"{path}:1" in html


def test_empty_report_says_there_is_nothing_to_show():
    html = html_of(lint_threads([]))
    assert "<svg" not in html
    assert "No threads were read, so there is nothing to show." in html
    assert "No findings: every rule passed." in html
    assert "No findings: every rule that ran passed." in html
    assert "threads linted in memory" in html


def test_chart_labels():
    lengths = charts.content_length({"user": {0: 2, 65536: 1}})
    assert lengths is not None
    for label in ("&lt;16", "16_63", "64_255", "256_1023", "1K_4K", "16K_64K", "≥64K"):
        assert f">{label.replace('_', charts.RANGE)}</text>" in lengths
    histogram = charts.messages_per_thread({1: 5, 2: 7, 40: 1, 100: 2})
    assert histogram is not None
    for label in (">1<", ">2<", ">33_64<", ">65_128<"):
        assert label.replace("_", charts.RANGE) in histogram
    assert charts.capability_usage({}, {}) is None
    formats = charts.format_distribution({f"tool_{i}:json": 20 - i for i in range(15)})
    assert formats is not None
    assert "other (4 formats)" in formats
    assert "tool_11:json" not in formats
    dollars = charts.format_distribution({"cost_$x$:json": 3})
    assert dollars is not None
    assert ">cost_$x$:json</text>" in dollars


def bars(svg: str, color: str) -> list[dict[str, float]]:
    """The geometry of the chart's rectangles filled with `color`, top first (a legend's
    swatch, then the bars)."""
    found = re.findall(
        rf'<rect x="([-\d.]+)" y="([-\d.]+)" width="([\d.]+)" height="([\d.]+)" fill="{color}"/>',
        svg,
    )
    shapes = [dict(zip(("x", "y", "width", "height"), map(float, f), strict=True)) for f in found]
    return sorted(shapes, key=lambda shape: shape["y"])


def test_charts_are_well_formed_svg_with_a_title():
    drawn = [
        charts.findings_by_rule([("MMS501  duplicate-thread", 0, 4), ("MMS201  <b>", 2, 0)]),
        charts.messages_per_thread({2: 5, 4: 1}),
        charts.content_length({"user": {0: 1}, "robot": {16: 2}}),
        charts.role_distribution({"user": 3, "robot": 1}),
        charts.format_distribution({"a & b": 1}),
        charts.capability_usage({"x:json": 1}, {}),
    ]
    for svg in drawn:
        assert svg is not None
        root = ElementTree.fromstring(svg)
        assert root.get("class") == "chart"
        assert root.get("role") == "img"
        assert root.find("{http://www.w3.org/2000/svg}title") is not None
    assert ">MMS201  &lt;b&gt;</text>" in drawn[0]
    assert ">a &amp; b</text>" in drawn[4]


def test_bars_are_drawn_to_scale():
    roles = charts.role_distribution({"user": 300, "assistant": 100, "tool": 0})
    assert roles is not None
    user = bars(roles, charts.ROLE_COLORS["user"])
    assistant = bars(roles, charts.ROLE_COLORS["assistant"])
    assert len(user) == len(assistant) == 1
    assert user[0]["height"] == pytest.approx(3 * assistant[0]["height"], abs=0.2)
    assert user[0]["x"] < assistant[0]["x"]
    assert ">300</text>" in roles
    assert ">tool</text>" not in roles
    findings = charts.findings_by_rule([("MMS403  arguments", 3, 1), ("MMS201  enabled", 2, 0)])
    assert findings is not None
    error_swatch, *errors = bars(findings, charts.ERROR_COLOR)
    warning_swatch, warning = bars(findings, charts.WARNING_COLOR)
    assert error_swatch["width"] == warning_swatch["width"] == error_swatch["height"]
    assert errors[0]["width"] == pytest.approx(1.5 * errors[1]["width"], abs=0.2)
    assert warning["x"] == pytest.approx(errors[0]["x"] + errors[0]["width"], abs=0.2)
    assert warning["width"] == pytest.approx(errors[0]["width"] / 3, abs=0.2)
    assert ">4</text>" in findings


def test_histogram_switches_to_a_log_scale_for_a_wide_spread():
    wide = charts.messages_per_thread({2: 3000, 3: 40, 9: 1})
    assert wide is not None
    assert ">threads (log scale)</text>" in wide
    for tick in ("1", "10", "100", "1,000"):
        assert f">{tick}</text>" in wide
    narrow = charts.messages_per_thread({2: 30, 3: 20})
    assert narrow is not None
    assert ">threads</text>" in narrow
    assert "log scale" not in narrow


def test_legends_and_notes_carry_the_totals():
    lengths = charts.content_length({"user": {0: 3, 16: 1}, "assistant": {64: 2}})
    assert lengths is not None
    assert ">user (4)</text>" in lengths
    assert ">assistant (2)</text>" in lengths
    assert lengths.index(">user (4)<") < lengths.index(">assistant (2)<")
    capabilities = charts.capability_usage({"a:json": 4, "b:json": 2}, {"a:json": 1, "c:json": 3})
    assert capabilities is not None
    for note in ("used in 1 of 4", "used in 0 of 2", "used in 3, never enabled"):
        assert f">{note}</text>" in capabilities
    many = charts.capability_usage({f"t{n}:json": 30 - n for n in range(20)}, {})
    assert many is not None
    assert "(top 15 of 20)" in many
    assert ">t14:json</text>" in many
    assert ">t15:json</text>" not in many


def test_writing_the_page_loads_no_plotting_library():
    script = (
        "import io, sys\n"
        "from pipeline.jobs.lint import lint_threads\n"
        "from pipeline.lint.reports import write_report\n"
        "write_report(lint_threads([]), 'html', io.StringIO())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert done.stdout.strip() == "[]"


# --- in a browser -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> tuple[ModuleType, str]:
    return chromium("the HTML report")


@pytest.fixture(scope="module")
def real_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LintReport]:
    folder = DATA / "realdata" / "llamafactory"
    report = lint(str(folder))
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(html_of(report), encoding="utf-8")
    return path, report


def test_browser_renders_the_real_report(browser, real_page):
    script, chromium = browser
    path, report = real_page
    dom = Page(script.dump_dom(chromium, path.as_uri()))
    cards = {a["data-card"] for a in dom.with_attribute("data-card")}
    assert {"records read", "threads", "findings", "errors", "warnings"} <= cards
    assert len(cards) == 8
    assert dom.count("svg", **{"class": "chart", "role": "img"}) == 6
    assert dom.count("nav", id="rule-filter") == 1
    groups = dom.with_attribute("data-rule-group")
    assert [g["data-rule-group"] for g in groups] == sorted(
        report.by_code, key=lambda c: (-report.by_code[c], c)
    )
    assert not any("hidden" in g for g in groups)
    assert dom.external_references() == []


def test_browser_filter_shows_one_rule(browser, real_page):
    script, chromium = browser
    path, report = real_page
    chosen = sorted(report.by_code)[0]
    dom = Page(script.dump_dom(chromium, f"{path.as_uri()}#rule={chosen}"))
    shown = [
        g["data-rule-group"] for g in dom.with_attribute("data-rule-group") if "hidden" not in g
    ]
    assert shown == [chosen]
    pressed = [
        a["data-rule-filter"]
        for a in dom.with_attribute("data-rule-filter")
        if a["aria-current"] == "true"
    ]
    assert pressed == [chosen]


def test_browser_screenshot_is_not_blank(browser, real_page, tmp_path: Path):
    script, chromium = browser
    path, _ = real_page
    png = tmp_path / "report.png"
    script.screenshot(chromium, path, png, (1280, 2400))
    assert png.stat().st_size > 50_000
    pixels = imread(png)
    assert pixels.shape[:2] == (2400, 1280)
    assert pixels[..., :3].std() > 0.05
    rows_with_ink = (pixels[..., :3].std(axis=(1, 2)) > 0.02).mean()
    assert rows_with_ink > 0.5
