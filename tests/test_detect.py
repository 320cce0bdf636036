"""Auto-detection as users see it: `mms formats --detect FILE` and per-file choices."""

from __future__ import annotations

import json

from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import REPO


def detect(path) -> str:
    result = CliRunner().invoke(main, ["formats", "--detect", str(path)])
    assert result.exit_code == 0, result.output
    return result.output


def test_detect_prints_every_format_score_and_reason():
    output = detect(REPO / "data_samples" / "mms" / "threads.jsonl")
    first, *rows = output.splitlines()
    assert first.endswith("-> mms")
    assert rows[0].split()[:2] == ["mms", "1.00"]
    assert "assistant messages carry end_turn" in rows[0]


def test_detect_explains_when_nothing_matches(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text("\n".join(json.dumps({"note": i}) for i in range(3)))
    output = detect(path)
    assert output.splitlines()[0].endswith("3 record(s) sniffed -> unknown")
    assert "no format accepts these records: name one with --from" in output


def test_undetected_records_are_quarantined_with_their_shape(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text(json.dumps({"note": 1, "when": "today"}) + "\n")
    out = tmp_path / "o.jsonl"
    result = CliRunner().invoke(main, ["convert", str(path), "-o", str(out)])
    assert result.exit_code == 0
    (rejected,) = [
        json.loads(line) for line in (tmp_path / "o.rejected.jsonl").read_text().splitlines()
    ]
    assert rejected["code"] == "unknown_format"
    assert "an object with keys note, when" in rejected["message"]


def test_a_mixed_file_is_detected_record_by_record(tmp_path):
    records = [
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]},
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]},
        {"instruction": "Say hi.", "output": "hi"},
        {"note": "not a conversation"},
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    output = detect(path)
    assert "-> per-record" in output.splitlines()[0]
    assert "each record is detected on its own" in output
    out = tmp_path / "o.jsonl"
    result = CliRunner().invoke(main, ["convert", str(path), "-o", str(out)])
    assert result.exit_code == 0
    formats = [json.loads(line)["meta"]["source_format"] for line in out.read_text().splitlines()]
    assert formats == ["openai", "sharegpt", "alpaca"]
    (rejected,) = [
        json.loads(line) for line in (tmp_path / "o.rejected.jsonl").read_text().splitlines()
    ]
    assert rejected["code"] == "unknown_format" and rejected["locator"].endswith(":4")
    assert (
        "no input format recognises this record (an object with keys note)" in rejected["message"]
    )
