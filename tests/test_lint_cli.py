"""`mms lint` and `mms rules` from the command line: selection, configuration, exit
status, output files; and `lint` over every real file in ../shared without a crash."""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.jobs.lint import lint
from pipeline.lint import LintConfig, load_config, select_rules
from pipeline.lint.config import ConfigError
from pipeline.lint.rules import RULES, UnknownRuleError
from pipeline.lint.rules.examples import assistant, developer, thread, user
from tests.conftest import needs_shared
from tests.linting import write_lines

CLEAN = thread(developer("Reply in `json`."), user("Primes?"), assistant("[2, 3]", "json"))
ERROR = thread(user("Primes?"), assistant("[2, 3]", "json"), id="bad")  # MMS201
WARNING = thread(user("Hi"), assistant("Hello!<|im_end|>"), id="warn")  # MMS404


def run(*args: str, cwd: Path | None = None):
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(main, list(args))
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return runner.invoke(main, list(args))
    finally:
        os.chdir(old)


def codes(selectors: tuple[str, ...], ignore: tuple[str, ...] = ()) -> list[str]:
    return [rule.code for rule in select_rules(selectors, ignore)]


def test_selection_by_code_family_name_and_all_with_the_more_specific_winning():
    assert codes(("MMS201",)) == ["MMS201"]
    assert codes(("MMS3",)) == ["MMS301", "MMS303"]
    assert codes(("invalid-json",)) == ["MMS401"]
    assert codes(("ALL",)) == sorted(rule.code for rule in RULES) and len(RULES) == 30
    assert codes(("MMS2",), ("MMS207", "MMS206")) == ["MMS201", "MMS202", "MMS203", "MMS204"]
    assert codes(("MMS201",), ("MMS2",)) == ["MMS201"]
    assert codes(("MMS201",), ("MMS201",)) == []
    with pytest.raises(UnknownRuleError, match="MMS201, MMS202"):
        select_rules(("MMS209",))


def test_exit_status_follows_fail_on(tmp_path):
    clean, warned, failed = (
        write_lines(tmp_path, [r], f"{n}.jsonl")
        for n, r in (("clean", CLEAN), ("warn", WARNING), ("error", ERROR))
    )
    assert run("lint", str(clean), "--from", "mms").exit_code == 0
    assert run("lint", str(warned), "--from", "mms").exit_code == 0
    assert run("lint", str(warned), "--from", "mms", "--fail-on", "warning").exit_code == 1
    assert run("lint", str(failed), "--from", "mms").exit_code == 1
    assert run("lint", str(failed), "--from", "mms", "--fail-on", "never").exit_code == 0
    assert run("lint", str(failed), "--from", "mms", "--ignore", "MMS201").exit_code == 0


def test_unknown_rule_and_bad_config_are_usage_errors(tmp_path):
    data = write_lines(tmp_path, [CLEAN])
    result = run("lint", str(data), "--select", "MMS999")
    assert result.exit_code == 2 and "no rule 'MMS999'" in result.output
    bad = tmp_path / "lint.toml"
    bad.write_text('selct = ["MMS2"]\n')
    result = run("lint", str(data), "--config", str(bad))
    assert result.exit_code == 2 and "unknown lint setting(s) selct" in result.output


def test_pyproject_settings_are_found_upwards_and_options_override_them(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.mms.lint]\nignore = ["MMS201"]\nfail-on = "warning"\nspecial-tokens = ["<END>"]\n'
    )
    nested = tmp_path / "data" / "deep"
    nested.mkdir(parents=True)
    config = load_config(start=nested)
    assert config.ignore == ("MMS201",) and config.fail_on == "warning"
    assert config.source == str(tmp_path / "pyproject.toml")
    data = write_lines(nested, [ERROR])
    assert run("lint", str(data), "--from", "mms", cwd=nested).exit_code == 0
    assert run("lint", str(data), "--from", "mms", "--ignore", "MMS404", cwd=nested).exit_code == 1
    ends = write_lines(nested, [thread(user("Hi"), assistant("Bye <END>"))], "end.jsonl")
    assert run("lint", str(ends), "--from", "mms", cwd=nested).exit_code == 1  # a warning


def test_config_file_holds_top_level_keys_or_a_pyproject_table(tmp_path):
    plain = tmp_path / "mms-lint.toml"
    plain.write_text('select = ["MMS4"]\nmin-phrasings = 5\n')
    assert load_config(plain) == LintConfig(select=("MMS4",), min_phrasings=5, source=str(plain))
    for text, problem in [
        ("min-phrasings = 0\n", "min-phrasings must be a positive integer"),
        ('fail-on = "sometimes"\n', "fail-on must be one of error, warning, never"),
        ("select = 'MMS2'\n", "select must be a list of strings"),
        ("select = [\n", "is not valid TOML"),
    ]:
        plain.write_text(text)
        with pytest.raises(ConfigError, match=problem):
            load_config(plain)


def test_text_report_to_a_file_and_statistics(tmp_path):
    data = write_lines(tmp_path, [CLEAN, ERROR, WARNING])
    out = tmp_path / "reports" / "lint.json"
    result = run("lint", str(data), "--from", "mms", "--output-format", "json", "-o", str(out))
    assert result.exit_code == 1
    report = orjson.loads(out.read_bytes())
    assert report["summary"]["by_code"] == {"MMS201": 1, "MMS404": 1}
    assert "Wrote the json report" in result.output
    stats = run("lint", str(data), "--from", "mms", "--statistics")
    assert "MMS201" in stats.output and "MMS404" in stats.output
    assert "format `json` is not enabled" not in stats.output


def test_rules_lists_and_explains():
    listing = run("rules")
    assert listing.exit_code == 0 and listing.output.count("\nMMS") == len(RULES) - 1
    page = run("rules", "mms201")
    assert page.exit_code == 0
    assert "Bad (fires)" in page.output and "Good (does not fire)" in page.output
    assert run("rules", "capability-not-enabled").output == page.output
    data = orjson.loads(run("rules", "MMS503", "--output-format", "json").output)
    assert data["code"] == "MMS503" and data["options"] == ["min-phrasings", "dataset-min-threads"]
    missing = run("rules", "MMS999")
    assert missing.exit_code == 2 and "no rule" in missing.output


def check_lints_without_a_crash_and_balances(root) -> None:
    for folder in ("realdata", "formats"):
        report = lint(str(root / folder))
        stats = report.stats
        assert stats.balanced and stats.threads > 0, folder
        # every quarantined record is a finding: nothing is skipped silently (a record's
        # media problems are MMS107..MMS109, which report threads too)
        codes = ("MMS101", "MMS102", "MMS105", "MMS107", "MMS108", "MMS109")
        record_findings = sum(report.by_code[c] for c in codes)
        assert record_findings >= stats.quarantined_total, folder
        assert "internal_error" not in stats.quarantined, folder


def test_every_real_file_lints_without_a_crash_and_balances(data):
    check_lints_without_a_crash_and_balances(data)


def test_every_full_real_file_lints_without_a_crash_and_balances():
    """The full files of ../shared (tests/data has small copies of most, stand-ins of a
    few); skips without them."""
    check_lints_without_a_crash_and_balances(needs_shared("realdata", "formats"))


def test_known_true_findings_in_real_data(data):
    toolbench = lint(
        str(data / "realdata/toolbench/answer/G3_answer/21_ChatGPT_DFS_woFilter_w2.json")
    )
    (undeclared,) = [d for d in toolbench.diagnostics if d.code == "MMS201"]
    assert "`dota_2_steam_web:json`" in undeclared.message
    identity = lint(str(data / "realdata/llamafactory/identity.json"))
    assert identity.by_code["MMS405"] >= 80  # LLaMA-Factory's {{name}}/{{author}} slots
    functionary = lint(str(data / "realdata/functionary/test_case_v1.json"))
    assert any(
        "'get_car_price' is a required property" in d.message
        for d in functionary.diagnostics
        if d.code == "MMS403"
    )  # the source's schema requires a property named like the tool


CONCISE = re.compile(r"^(?P<where>\S+?): (?P<code>MMS\d{3}) (?:error|warning) \S")
"""A concise line: `path:line:col: CODE severity message` (or path#index, hf:... )."""


def test_concise_on_all_realdata_is_one_clickable_line_per_finding(data):
    result = run("lint", str(data / "realdata"), "--output-format", "concise", "--workers", "2")
    lines = result.output.splitlines()
    totals = re.search(r"^Found ([\d,]+) findings", lines[-1])
    assert totals is not None, lines[-3:]
    found = int(totals.group(1).replace(",", ""))
    assert len(lines) == found + 1 and found > 500  # the copies in tests/data: 701
    matched = [CONCISE.match(line) for line in lines[:-1]]
    assert all(matched), [line for line, m in zip(lines, matched, strict=False) if not m][:3]
    places = [m.group("where") for m in matched]
    assert any(re.search(r"\.jsonl:\d+:1$", place) for place in places)
    assert "\x1b[" not in result.output  # no colour when not on a terminal


def test_repeated_findings_collapse_and_max_findings_stops_the_list(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n" * 300 + '{"messages": [{"role": "robot", "content": "x"}]}\n')
    text = run("lint", str(bad)).output
    collapsed = [line for line in text.splitlines() if "(x300: also :2, :3, :4 …)" in line]
    assert len(collapsed) == 1 and collapsed[0].startswith("  :1 error MMS105")
    assert "Found 301 findings" in text
    concise = run("lint", str(bad), "--output-format", "concise", "--max-findings", "5")
    assert concise.exit_code == 1  # the exit status still counts every finding
    lines = concise.output.splitlines()
    assert [CONCISE.match(line) is not None for line in lines[:5]] == [True] * 5
    assert lines[5] == "… 296 more findings not shown (--max-findings 5)"
    assert lines[6].startswith("Found 301 findings")


def test_on_a_terminal_severities_are_coloured(tmp_path):
    import pty
    import subprocess
    import sys

    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    main_fd, child_fd = pty.openpty()
    command = [sys.executable, "-m", "pipeline.cli", "lint", str(bad), "--output-format", "concise"]
    child = subprocess.Popen(command, stdout=child_fd, stderr=subprocess.DEVNULL)
    os.close(child_fd)
    shown = b""
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(main_fd)
    assert child.wait() == 1
    assert b"\x1b[31merror\x1b[0m" in shown and b"\x1b[1mMMS105\x1b[0m" in shown
    piped = subprocess.run(command, capture_output=True)
    assert b"\x1b[" not in piped.stdout and b"MMS105 error" in piped.stdout


def test_per_source_ignores_leave_out_rules_on_matching_files_only(tmp_path):
    legacy = tmp_path / "data" / "legacy"
    legacy.mkdir(parents=True)
    for folder in (legacy, tmp_path / "data"):
        (folder / "bad.jsonl").write_text("{not json\n")
    settings = tmp_path / "lint.toml"
    settings.write_text('[per-source-ignores]\n"legacy/*.jsonl" = ["MMS105"]\n')
    shown = run(
        "lint", str(tmp_path / "data"), "--config", str(settings), "--output-format", "concise"
    )
    lines = shown.output.splitlines()
    assert [line.split(":")[0] for line in lines[:-1]] == [str(tmp_path / "data" / "bad.jsonl")]
    assert lines[-1].startswith("Found 1 finding ")
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('[per-source-ignores]\n"*.jsonl" = ["MMS999"]\n')
    refused = run("lint", str(tmp_path / "data"), "--config", str(unknown))
    assert refused.exit_code == 2 and "MMS999" in refused.output


def test_a_baseline_fails_only_on_new_findings(tmp_path):
    """Findings an earlier JSON report has are known (even when their lines moved); one it
    lacks fails the run; a file that is no report is a config error."""
    data = tmp_path / "data.jsonl"
    bad = '{"messages": [{"role": "robot", "content": "x"}]}\n'
    good = '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n'
    data.write_text(bad + good)
    baseline = tmp_path / "baseline.json"
    first = run(
        "lint", str(data), "--from", "openai", "--output-format", "json", "-o", str(baseline)
    )
    assert first.exit_code == 1
    data.write_text(good + bad)  # the known finding moved to line 2
    known = run("lint", str(data), "--from", "openai", "--baseline", str(baseline))
    assert known.exit_code == 0, known.output
    assert "Baseline" in known.output and "1 finding known, 0 new" in known.output
    data.write_text(good + bad + bad.replace("robot", "wizard"))
    new = run("lint", str(data), "--from", "openai", "--baseline", str(baseline))
    assert new.exit_code == 1
    assert "1 finding known, 1 new, 1 of them at fail-on error" in new.output
    assert "new: " in new.output and "'wizard'" in new.output
    not_a_report = tmp_path / "other.json"
    not_a_report.write_text('{"x": 1}')
    refused = run("lint", str(data), "--baseline", str(not_a_report))
    assert refused.exit_code == 2 and "is not a JSON lint report" in refused.output
