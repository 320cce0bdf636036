"""The lint report writers (text, JSON, Markdown, SARIF, GitHub annotations), through
`write_report`, on hand-written threads, a small JSONL file and the real data."""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

import pipeline
from pipeline.accounting import Account
from pipeline.jobs.lint import lint, lint_threads
from pipeline.lint import Diagnostic, LintConfig, LintReport, Rule
from pipeline.lint.reports import write_report
from pipeline.lint.rules import RULES_BY_CODE
from pipeline.lint.store import DiagnosticStore
from pipeline.mms import Thread
from pipeline.schemas import validator


def user(content: str) -> dict:
    return {"role": "user", "content": content}


def developer(content: str) -> dict:
    return {"role": "developer", "content": content}


def assistant(content: str, format: str = "markdown", end_turn: bool = True) -> dict:
    return {"role": "assistant", "content": content, "format": format, "end_turn": end_turn}


def thread(id: str, *messages: dict) -> Thread:
    return Thread.from_dict({"id": id, "messages": list(messages)})


WEATHER_CALL = ('{"city":"Oslo"}', "get_weather:json", False)


def findings_report(config: LintConfig | None = None) -> LintReport:
    """MMS201 (a tool call nobody enabled), MMS104 as an error (an empty assistant message),
    MMS501 (the last thread repeats the one before)."""
    threads = [
        thread("w1", user("Weather in Oslo?"), assistant(*WEATHER_CALL)),
        thread("e1", user("Hi"), assistant("")),
        thread("d1", user("Hello"), assistant("Hi there")),
        thread("d2", user("Hello"), assistant("Hi there")),
    ]
    return lint_threads(threads, config)


def clean_report() -> LintReport:
    enabled = developer("Call `get_weather:json` for weather questions.")
    return lint_threads([thread("ok", enabled, user("Weather?"), assistant("Sunny."))])


def file_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LintReport:
    """`data.jsonl` (read from its folder): a good thread, a line that is not JSON (MMS105)
    and a tool call nobody enabled (MMS201), on lines 1-3."""
    good = {"id": "ok1", "messages": [user("Hi"), assistant("Hello")]}
    call = {"id": "w1", "messages": [user("Weather?"), assistant(*WEATHER_CALL)]}
    lines = [json.dumps(good), "{not json", json.dumps(call)]
    (tmp_path / "data.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return lint("data.jsonl")


def hand_report(rules: list[Rule], diagnostics: list[Diagnostic]) -> LintReport:
    """A report with exactly these findings, for texts no rule writes (newlines, pipes)."""
    stats = Account(records_read=1, records_converted=1, threads=1)
    report = LintReport(LintConfig(), rules, ["in.jsonl"], stats, DiagnosticStore())
    report.add(diagnostics)
    return report


def written(report: LintReport, output_format: str, **options: bool) -> str:
    out = io.StringIO()
    write_report(report, output_format, out, **options)
    return out.getvalue()


def messages(report: LintReport) -> dict[str, str]:
    return {d.code: d.message for d in report.diagnostics}


# ----------------------------------------------------------------------------- text


def test_text_groups_findings_under_their_file_with_position_and_summary(tmp_path, monkeypatch):
    report = file_report(tmp_path, monkeypatch)
    rejected = next(d for d in report.diagnostics if d.code == "MMS105")
    text = messages(report)
    assert written(report, "text").splitlines() == [
        "data.jsonl",
        f"  :2 error MMS105 [thread {rejected.thread_id}] {text['MMS105']}",
        f"  :3 error MMS201 [thread w1, msg 1] {text['MMS201']}",
        "",
        "1  MMS105  error    unreadable-record",
        "1  MMS201  error    capability-not-enabled",
        "Found 2 findings (2 errors, 0 warnings) in 1 of 2 threads; 3 records read, 1 quarantined.",
    ]


def test_text_shows_thread_level_findings_and_severity_per_finding():
    report = findings_report()
    text = messages(report)
    lines = written(report, "text").splitlines()
    assert lines[:4] == [
        "(no source file)",
        f"  error MMS201 [thread w1, msg 1] {text['MMS201']}",
        f"  error MMS104 [thread e1, msg 1] {text['MMS104']}",
        f"  warning MMS501 [thread d2] {text['MMS501']}",
    ]
    assert lines[-1].startswith("Found 3 findings (2 errors, 1 warning) in ")


def test_text_keeps_each_finding_on_one_line():
    rule = RULES_BY_CODE["MMS405"]
    found = Diagnostic(
        "MMS405", "warning", "first\nsecond\r\nthird", "t", 2, "a.jsonl", "a.jsonl:4"
    )
    lines = written(hand_report([rule], [found]), "text").splitlines()
    assert lines[:2] == ["a.jsonl", "  :4 warning MMS405 [thread t, msg 2] first\\nsecond\\nthird"]


def test_text_statistics_has_only_counts_most_frequent_first():
    report = findings_report()
    report_text = written(report, "text", statistics=True)
    assert report_text.splitlines()[:3] == [
        "1  MMS104  error    empty-content",
        "1  MMS201  error    capability-not-enabled",
        "1  MMS501  warning  duplicate-thread",
    ]
    assert len(report_text.splitlines()) == 4
    assert "[thread" not in report_text


def test_text_says_all_checks_passed_when_nothing_is_found():
    report = clean_report()
    assert written(report, "text") == (
        "All checks passed: no findings in 1 thread; 1 record read, 0 quarantined.\n"
    )
    assert written(report, "text", statistics=True) == written(report, "text")


# ----------------------------------------------------------------------------- JSON


def test_json_validates_and_round_trips_the_diagnostics(tmp_path, monkeypatch):
    report = file_report(tmp_path, monkeypatch)
    data = json.loads(written(report, "json"))
    validator("lint-report").validate(data)
    assert data["version"] == 1
    assert data["tool"] == {"name": "mms-pipeline", "version": pipeline.__version__}
    assert data["summary"] == report.summary()
    assert [Diagnostic.from_dict(d) for d in data["diagnostics"]] == list(report.diagnostics)
    assert [rule["code"] for rule in data["rules"]] == [r.code for r in report.listed_rules]
    assert data["rules"][0] == {
        "code": "MMS101",
        "name": "unknown-role",
        "severity": "error",
        "summary": RULES_BY_CODE["MMS101"].summary,
    }


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(_TEXT, st.one_of(st.none(), _TEXT)), max_size=12),
    st.integers(min_value=1, max_value=64),
)
def test_json_diagnostics_are_copied_whole_whatever_the_block_size(found, size):
    """The JSON report copies the stored diagnostics in blocks of whole lines (one per
    finding, multi-byte text included): the same values, one per line, in order."""
    diagnostics = [
        Diagnostic("MMS401", "warning", message, thread, None, "in.jsonl", locator)
        for message, locator in found
        for thread in ["t"]
    ]
    report = hand_report([RULES_BY_CODE["MMS401"]], diagnostics)
    blocks = list(report.diagnostics.json_blocks(size))
    assert all(block.endswith("\n") for block in blocks)
    lines = "".join(blocks).split("\n")[:-1]  # JSON text holds no raw newline
    assert lines == [json_text(d.to_dict()) for d in diagnostics]
    text = written(report, "json")
    assert [Diagnostic.from_dict(d) for d in json.loads(text)["diagnostics"]] == diagnostics
    listed = text.split('"diagnostics":[\n', 1)[1].rsplit("]}", 1)[0].split("\n")[:-1]
    assert len(listed) == len(diagnostics)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.lists(_TEXT, max_size=4), max_size=5),
    st.lists(st.booleans(), min_size=5, max_size=5),
    st.integers(min_value=1, max_value=64),
)
def test_a_report_merged_from_saved_parts_keeps_every_finding_in_order(
    tmp_path_factory, parts, saved, size
):
    """A run's parts save their findings to files (the run's report takes the files, not
    their bytes, through pickling as between processes) and the run's own findings come
    between and after them: the report lists every one, in order, in any block size."""
    folder = tmp_path_factory.mktemp("findings")
    merged = hand_report([RULES_BY_CODE["MMS401"]], [])
    expected = []
    for number, messages_of_part in enumerate(parts):
        found = [
            Diagnostic("MMS401", "warning", text, f"t{number}", None, "in.jsonl", None)
            for text in messages_of_part
        ]
        part = hand_report([RULES_BY_CODE["MMS401"]], found)
        if saved[number]:
            part.diagnostics.save(folder / f"part-{number}.jsonl")
        merged.merge(pickle.loads(pickle.dumps(part.part())))
        own = Diagnostic("MMS401", "warning", f"after {number}", "run", None, "in.jsonl", None)
        merged.add([own])
        expected += [*found, own]
    assert list(merged.diagnostics) == expected
    assert len(merged.diagnostics) == len(expected)
    lines = "".join(merged.diagnostics.json_blocks(size)).split("\n")[:-1]
    assert lines == [json_text(d.to_dict()) for d in expected]


def json_text(value: object) -> str:
    return orjson.dumps(value).decode()


def test_json_of_a_clean_run_validates_with_an_empty_list():
    data = json.loads(written(clean_report(), "json"))
    validator("lint-report").validate(data)
    assert data["diagnostics"] == []
    assert data["summary"]["findings"] == 0


def test_schema_rejects_a_diagnostic_that_breaks_the_contract():
    data = json.loads(written(findings_report(), "json"))
    data["diagnostics"][0]["code"] = "E501"
    assert not validator("lint-report").is_valid(data)
    data["diagnostics"][0] = {**data["diagnostics"][1], "message_index": -1}
    assert not validator("lint-report").is_valid(data)


# ---------------------------------------------------------------------------- SARIF


def test_sarif_locates_results_by_relative_file_and_line(tmp_path, monkeypatch):
    report = file_report(tmp_path, monkeypatch)
    log = json.loads(written(report, "sarif"))
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "mms-lint"
    assert driver["version"] == pipeline.__version__
    rejected, call = run["results"]
    assert (rejected["ruleId"], rejected["level"]) == ("MMS105", "error")
    assert (call["ruleId"], call["level"]) == ("MMS201", "error")
    assert call["locations"] == [
        {
            "physicalLocation": {
                "artifactLocation": {"uri": "data.jsonl"},
                "region": {"startLine": 3},
            }
        }
    ]
    assert call["properties"] == {"thread_id": "w1", "message_index": 1, "locator": "data.jsonl:3"}
    assert all(driver["rules"][r["ruleIndex"]]["id"] == r["ruleId"] for r in run["results"])
    rule = driver["rules"][call["ruleIndex"]]
    assert rule["shortDescription"]["text"] == RULES_BY_CODE["MMS201"].summary
    assert rule["defaultConfiguration"] == {"level": "error"}


def test_sarif_gives_the_finding_level_and_no_location_without_a_source():
    log = json.loads(written(findings_report(), "sarif"))
    results = log["runs"][0]["results"]
    empty = next(found for found in results if found["ruleId"] == "MMS104")
    assert empty["level"] == "error"
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert rules[empty["ruleIndex"]]["defaultConfiguration"] == {"level": "warning"}
    assert all("locations" not in found for found in results)


def test_sarif_uri_is_encoded_and_absolute_outside_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rule = RULES_BY_CODE["MMS405"]
    inside = Diagnostic("MMS405", "warning", "m", "t", 0, str(tmp_path / "my data.jsonl"), None)
    outside = Diagnostic(
        "MMS405", "warning", "m", "t", 0, "/elsewhere/x.jsonl", "/elsewhere/x.jsonl#2"
    )
    log = json.loads(written(hand_report([rule], [inside, outside]), "sarif"))
    first, second = log["runs"][0]["results"]
    assert first["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "my%20data.jsonl"}
    }
    assert second["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "file:///elsewhere/x.jsonl"}
    }


# --------------------------------------------------------------------------- GitHub


def test_github_writes_one_annotation_per_finding_with_file_and_line(tmp_path, monkeypatch):
    report = file_report(tmp_path, monkeypatch)
    lines = written(report, "github").splitlines()
    assert lines[1] == (
        "::error file=data.jsonl,line=3,title=MMS201 capability-not-enabled::"
        + messages(report)["MMS201"]
    )
    assert lines[0].startswith("::error file=data.jsonl,line=2,title=MMS105 unreadable-record::")
    assert lines[2] == (
        "::notice title=mms lint::Found 2 findings (2 errors, 0 warnings) in 1 of 2 threads;"
        " 3 records read, 1 quarantined."
    )
    assert len(lines) == 3


def test_github_escapes_messages_and_properties():
    rule = RULES_BY_CODE["MMS405"]
    found = Diagnostic(
        "MMS405", "warning", "50% of\nit\r", "t", 1, "dir/a,b:c.jsonl", "dir/a,b:c.jsonl:7"
    )
    no_file = Diagnostic("MMS405", "warning", "x", "t", None, None, None)
    lines = written(hand_report([rule], [found, no_file]), "github").splitlines()
    assert lines[0] == (
        "::warning file=dir/a%2Cb%3Ac.jsonl,line=7,title=MMS405 unrendered-placeholder"
        "::50%25 of%0Ait%0D"
    )
    assert lines[1] == "::warning title=MMS405 unrendered-placeholder::x"


# ------------------------------------------------------------------------- Markdown


def test_markdown_has_summary_rule_table_and_examples():
    report = findings_report(LintConfig(max_examples=1))
    markdown = written(report, "markdown")
    assert markdown.startswith("# mms lint report\n")
    assert "| findings | 3 |\n| errors | 2 |\n| warnings | 1 |\n" in markdown
    row = (
        "| [MMS201](#mms201-capability-not-enabled-error-1) | capability-not-enabled | error | 1 | "
    )
    assert row in markdown
    assert "\n## MMS201 capability-not-enabled (error, 1)\n" in markdown
    assert "## MMS501 duplicate-thread (warning, 1)\n" in markdown
    assert "- thread `w1` · message 1: format `get_weather:json` is not enabled" in markdown
    assert "- thread `d2`: duplicate of thread d1 (same messages and settings)" in markdown
    assert "… and" not in markdown


def test_markdown_points_to_the_json_report_beyond_the_examples():
    threads = [
        thread(f"w{n}", user(f"Weather in city {n}?"), assistant(*WEATHER_CALL)) for n in range(3)
    ]
    markdown = written(lint_threads(threads, LintConfig(max_examples=1)), "markdown")
    assert markdown.count("- thread `w") == 1
    assert "- … and 2 more: see the JSON report (`--output-format json`)\n" in markdown


def test_markdown_escapes_pipes_and_backticks():
    rule = Rule(
        code="MMS499",
        name="pipe-test",
        severity="warning",
        summary="Use `a|b` or c | d.",
        rationale="- a list marker | a pipe",
        bad=[],
        good=[],
    )
    message = "found `x` and | and *stars* and ``a`b`` and a stray `"
    found = Diagnostic("MMS499", "warning", message, "t`1", 0, "in.jsonl", "in.jsonl:1")
    markdown = written(hand_report([rule], [found]), "markdown")
    row = "| [MMS499](#mms499-pipe-test-warning-1) | pipe-test | warning | 1 | Use `a\\|b` or c \\| d. |"
    assert row + "\n" in markdown
    assert "\n\\- a list marker \\| a pipe\n" in markdown
    item = "- `in.jsonl:1` · thread ``t`1`` · message 0: found `x` and \\| and \\*stars\\* and "
    assert item + "``a`b`` and a stray \\`\n" in markdown
    rendered = MarkdownIt("commonmark").enable("table").render(markdown)
    assert "<td>Use <code>a|b</code> or c | d.</td>" in rendered
    assert "<code>a`b</code> and a stray `</li>" in rendered
    assert "<em>" not in rendered


def test_markdown_of_a_clean_run_says_all_checks_passed():
    markdown = written(clean_report(), "markdown")
    assert markdown.endswith("All checks passed: no findings.\n")
    assert "## Findings by rule" not in markdown


# ------------------------------------------------------------------------ real data


def test_every_format_on_real_data(data):
    folders = ["openai_finetune_examples", "functionary", "fastchat"]
    report = lint([str(data / "realdata" / folder) for folder in folders])
    count = len(report.diagnostics)
    codes = set(report.by_code)
    assert count and {"MMS105", "MMS501", "MMS502"} <= codes

    data = json.loads(written(report, "json"))
    validator("lint-report").validate(data)
    assert len(data["diagnostics"]) == count

    log = json.loads(written(report, "sarif"))
    assert len(log["runs"][0]["results"]) == count
    assert any("region" in r["locations"][0]["physicalLocation"] for r in log["runs"][0]["results"])

    text = written(report, "text").splitlines()
    assert text[-1].startswith(f"Found {count:,} findings")
    assert len(written(report, "github").splitlines()) == count + 1

    markdown = written(report, "markdown")
    assert all(f"\n## {code} " in markdown for code in codes)
