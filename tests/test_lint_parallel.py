"""`mms lint --workers N`: the Lint stage's map side in worker processes, its dataset side
over the parts in plan order, gives the same report in every format, byte for byte, as
one process reading every file in turn; on the real files and on a big MMS file cut into
byte ranges with bad records inside its parts."""

from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner, Result

from pipeline.cli import main
from pipeline.jobs.lint import lint
from pipeline.jobs.read import ReadSpec
from pipeline.lint import LintConfig, LintReport
from pipeline.lint.reports import OUTPUT_FORMATS, write_report
from tests.test_convert_parallel import (
    SPLIT_BYTES,
    parts_of,
    three_files_one_failing,
    write_dataset,
)

DATASET_RULES = {"MMS501", "MMS502"}
"""Codes of dataset rules the generated file sets off (found in the ordered pass)."""


def reports(report: LintReport) -> dict[tuple[str, bool], str]:
    """The report in every output format (text also as --statistics)."""
    written = {}
    for output_format in OUTPUT_FORMATS:
        for statistics in (False, True) if output_format == "text" else (False,):
            out = io.StringIO()
            write_report(report, output_format, out, statistics=statistics)
            written[output_format, statistics] = out.getvalue()
    return written


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_the_real_files_give_the_same_reports_with_any_number_of_workers(data):
    realdata = str(data / "realdata")
    one = lint(realdata, workers=1)
    assert one.stats.quarantined_total and {"MMS105", "MMS501"} <= set(one.by_code)
    expected = reports(one)
    for workers in (2, 3):
        report = lint(realdata, workers=workers)
        assert report.stats.to_dict() == one.stats.to_dict() and report.stats.balanced
        assert reports(report) == expected


def test_the_cli_writes_the_same_report_file_and_summary(data, tmp_path):
    realdata = str(data / "realdata")
    out = tmp_path / "lint.html"
    runs = []
    for workers in ("1", "2"):
        result = cli(
            "lint", realdata, "--output-format", "html", "-o", str(out), "--workers", workers
        )
        assert result.exit_code == 1, result.output  # the real files have errors
        runs.append((result.output, out.read_bytes()))
    assert runs[0] == runs[1]
    assert "Wrote the html report" in runs[0][0]


def test_a_file_cut_into_parts_gives_the_same_reports(tmp_path):
    source = tmp_path / "big.jsonl"
    bad = write_dataset(source)
    assert len(parts_of(source)) > 20
    spec, config = ReadSpec("mms"), LintConfig(max_examples=3)
    one = lint(str(source), spec, config=config, workers=1)
    assert one.stats.balanced and one.stats.quarantined_total == len(bad)
    assert set(one.by_code) >= DATASET_RULES and {"MMS101", "MMS105"} <= set(one.by_code)
    expected = reports(one)
    for workers in (2, 3):
        report = lint(str(source), spec, config=config, workers=workers, split_bytes=SPLIT_BYTES)
        assert report.stats.to_dict() == one.stats.to_dict()
        assert reports(report) == expected


def test_a_bad_record_inside_a_part_is_reported_at_its_line_in_reading_order(tmp_path):
    source = tmp_path / "big.jsonl"
    bad = write_dataset(source)
    spec = ReadSpec("mms")
    report = lint(str(source), spec, workers=2, split_bytes=SPLIT_BYTES)
    found = json.loads(reports(report)["json", False])["diagnostics"]
    unread = [d for d in found if d["code"] in ("MMS101", "MMS105")]
    assert [d["locator"] for d in unread] == [f"{source}:{line}" for line in bad]
    robot = next(d for d in unread if d["code"] == "MMS101")
    assert robot["thread_id"] == "robot"  # the record's own id, kept across the process
    at = found.index(unread[0])  # between the findings of the threads around it
    assert found[at - 1]["thread_id"] <= f"gen-{bad[0] - 2:05d}" < found[at + 1]["thread_id"]


def test_zero_workers_is_a_usage_error(tmp_path):
    source = tmp_path / "a.jsonl"
    write_dataset(source, threads=5)
    result = cli("lint", str(source), "--workers", "0")
    assert result.exit_code == 2
    assert "Invalid value for '--workers': 0 is not in the range x>=1" in result.output
    with pytest.raises(ValueError, match="workers must be at least 1"):
        lint(str(source), workers=0)


def test_a_failing_part_is_a_clean_error_naming_its_file(tmp_path, monkeypatch):
    three_files_one_failing(tmp_path, monkeypatch, "c.jsonl", MemoryError("out of memory"))
    report = tmp_path / "out" / "lint.json"
    result = cli(
        "lint", str(tmp_path), "--output-format", "json", "-o", str(report), "--workers", "2"
    )
    assert result.exit_code == 1
    assert f"({tmp_path}/c.jsonl) failed: MemoryError: out of memory" in result.output
    assert "Traceback" not in result.output and not report.exists()
