"""What reaches a terminal from the data or the command line is shown as data: a file
named with a newline or a terminal escape (ESC[31m) is printed with those characters
escaped (`\\n`, `\\x1b`), so a `path:line:col:` finding stays one line and no name colours,
clears or reorders the terminal; through convert, lint (text, concise), run, tokenize and
their error lines."""

from __future__ import annotations

import io
import re
from pathlib import Path

import orjson
from click.testing import CliRunner

from pipeline.accounting import Account
from pipeline.cli import main
from pipeline.lint import Diagnostic, LintConfig, LintReport
from pipeline.lint.reports import write_report
from pipeline.lint.rules import RULES_BY_CODE
from pipeline.lint.store import DiagnosticStore
from pipeline.wording import visible
from tests.conftest import REPO

NEWLINE = "new\nline.jsonl"
ESCAPE = "esc\x1b[31mred.jsonl"
SKIPPED = "skip\x1b[2J\n.bin"  # an unsupported file: listed as skipped
UNDETECTED = "what\u202e\x85.jsonl"  # no format detected: listed, and linted
RAW = ("\x1b", "\x85", "\u202e", "\r", "\x07")
"""Characters of the names (a newline aside) that must never reach the output raw."""
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
FINDING = re.compile(r"^\S.*:\d+:1: MMS\d{3} (error|warning) ")


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def thread(n: int) -> bytes:
    return orjson.dumps(
        {
            "id": f"t{n}",
            "messages": [
                {"role": "developer", "content": "Answer in `json`."},
                {"role": "user", "content": f"question {n}"},
                {"role": "assistant", "format": "json", "content": f"[{n}]", "end_turn": True},
            ],
        }
    )


def odd_inputs(tmp_path: Path) -> Path:
    """A folder whose file names hold a newline, ESC sequences, a bidi override and C1:
    two with a thread and a line that is not JSON (a finding at line 2), one unsupported,
    one whose format nothing detects."""
    folder = tmp_path / "in"
    folder.mkdir()
    for n, name in enumerate((NEWLINE, ESCAPE)):
        (folder / name).write_bytes(thread(n) + b"\nnot json\n")
    (folder / SKIPPED).write_text("x")
    (folder / UNDETECTED).write_text('{"foo": 1}\n')
    return folder


def assert_shown_as_data(output: str, *names: str) -> None:
    """No raw control character of the names is in `output`, no name is split over lines,
    and each of `names` is there, escaped."""
    assert not [char for char in RAW if char in output], output
    for name in (NEWLINE, SKIPPED, "new\nline", "\n.bin"):
        assert name not in output
    for name in names:
        assert visible(name) in output, (name, output)


def test_visible_escapes_control_bidi_and_line_separators_only():
    assert visible("a\nb\r\tc") == "a\\nb\\r\\tc"
    assert visible("\x1b[31mred\x07\x7f\x85\x9b") == "\\x1b[31mred\\x07\\x7f\\x85\\x9b"
    assert visible("\u202eevil\u2066\u2028\u2029") == "\\u202eevil\\u2066\\u2028\\u2029"
    assert visible("data/ünï cødé 😀 C:\\dir\\file [x].jsonl") == (
        "data/ünï cødé 😀 C:\\dir\\file [x].jsonl"
    )
    assert visible(visible("a\nb\x1b")) == visible("a\nb\x1b")


def test_convert_lists_odd_names_escaped(tmp_path):
    folder = odd_inputs(tmp_path)
    out = tmp_path / "o\x1b[1m\nut.jsonl"
    result = cli("convert", str(folder), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert_shown_as_data(result.output, SKIPPED, UNDETECTED, str(out))
    assert "Check: 5 read = 2 converted + 3 quarantined" in result.output


def test_lint_text_and_concise_keep_one_finding_per_line(tmp_path):
    folder = odd_inputs(tmp_path)
    text = cli("lint", str(folder), "--output-format", "text")
    default = cli("lint", str(folder))
    assert text.exit_code == default.exit_code == 1
    assert text.output == default.output
    assert_shown_as_data(text.output, str(folder / NEWLINE), str(folder / ESCAPE))
    headers = [line for line in text.output.splitlines() if line.startswith(str(folder))]
    assert len(headers) == 3  # one per file with findings, each on its own line
    concise = cli("lint", str(folder), "--output-format", "concise")
    assert concise.exit_code == 1
    assert_shown_as_data(concise.output, str(folder / NEWLINE), str(folder / ESCAPE))
    *findings, totals = concise.output.splitlines()
    assert totals.startswith("Found 3 findings")
    assert len(findings) == 3 and all(FINDING.match(line) for line in findings), findings
    assert any(line.startswith(visible(f"{folder / NEWLINE}:2:1: ")) for line in findings)
    assert any(line.startswith(visible(f"{folder / ESCAPE}:2:1: ")) for line in findings)


def test_lint_reports_escape_thread_ids_locators_and_messages():
    """Findings written by hand: what the data says in them is escaped too."""
    found = Diagnostic(
        "MMS405", "warning", "says \x1b]0;title\x07 and\nmore", "t\x1b[31m", 2, "a\nb", "a\nb:4"
    )
    stats = Account(records_read=1, records_converted=1, threads=1)
    report = LintReport(LintConfig(), [RULES_BY_CODE["MMS405"]], ["a"], stats, DiagnosticStore())
    report.add([found])
    for output_format in ("text", "concise"):
        out = io.StringIO()
        write_report(report, output_format, out)
        assert not [char for char in RAW if char in out.getvalue()]
    assert out.getvalue().splitlines()[0] == (
        "a\\nb:4:1: MMS405 warning says \\x1b]0;title\\x07 and\\nmore [thread t\\x1b[31m, msg 2]"
    )


def test_run_summary_and_per_input_table_escape_names(tmp_path):
    folder = odd_inputs(tmp_path)
    config = tmp_path / "odd.yaml"
    inputs = [str(folder), str(folder / ESCAPE)]
    config.write_text(
        "name: odd\ninputs:\n"
        + "".join(f"  - path: {orjson.dumps(path).decode()}\n" for path in inputs)
        + f"output: {tmp_path / 'out'}\nstages:\n  lint: {{fail_on: never}}\n"
    )
    result = cli("run", str(config))
    assert result.exit_code == 0, result.output
    assert_shown_as_data(result.output, str(folder / SKIPPED), str(folder / ESCAPE))
    table = result.output.split("Per input")[1].splitlines()[1:4]
    assert [line.split()[0] for line in table] == ["input", str(folder), visible(inputs[1])]


def test_tokenize_summary_escapes_names(tmp_path):
    folder = odd_inputs(tmp_path)
    out = tmp_path / "tok\x1b[1m"
    result = cli("tokenize", str(folder), "--tokenizer", str(SAMPLE_TOKENIZER), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert_shown_as_data(result.output, SKIPPED, UNDETECTED, str(out / "data"))


def test_an_error_naming_an_input_is_one_line(tmp_path):
    missing = str(tmp_path / "no\nsuch\x1b[31m.jsonl")
    for command in (["convert", missing, "-o", str(tmp_path / "o.jsonl")], ["lint", missing]):
        result = cli(*command)
        assert result.exit_code == 2
        assert_shown_as_data(result.output)
        (error,) = [line for line in result.output.splitlines() if line.startswith("Error:")]
        assert visible(missing) in error


def test_inspect_shows_ids_sources_and_content_escaped(tmp_path):
    path = tmp_path / ESCAPE
    record = {
        "id": "t\x1b[31m1",
        "messages": [
            {"role": "user", "content": "hi \x1b[2Jthere\nline \u202ettwo\r"},
            {"role": "assistant", "content": "ok", "end_turn": True},
        ],
    }
    path.write_bytes(orjson.dumps(record) + b"\n")
    result = cli("inspect", str(path))
    assert result.exit_code == 0, result.output
    # the thread's lineage names its file as the input does (a file input: its base name)
    assert_shown_as_data(result.output, path.name, "t\x1b[31m1")
    assert "  1 | hi \\x1b[2Jthere" in result.output
    assert "  2 | line \\u202ettwo\\r" in result.output
