"""Reading records: every file kind, compression, directories and globs, locators, and
rejections instead of crashes for broken input."""

from __future__ import annotations

import bz2
import gzip
import lzma
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from pipeline.quarantine import Rejection
from pipeline.sources import (
    InputError,
    ReadLimits,
    Record,
    TextDocument,
    expand_inputs,
    iter_file,
)


def records(path: Path, **limits) -> list[Record | Rejection]:
    return list(iter_file(path.as_posix(), ReadLimits(**limits) if limits else None))


def summary(items: list[Record | Rejection]) -> list[tuple[str, object]]:
    """(locator, value) for records and (locator, code) for rejections."""
    return [(i.locator, i.value) if isinstance(i, Record) else (i.locator, i.code) for i in items]


def test_jsonl_locators_skip_blank_lines_and_handle_bom_and_crlf(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\r\n  \n{"a": 2}\n[3]')
    assert summary(records(path)) == [
        (f"{path}:1", {"a": 1}),
        (f"{path}:4", {"a": 2}),
        (f"{path}:5", [3]),
    ]


def test_jsonl_rejects_bad_lines_and_reads_on(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"ok": 1}\n{"trunc\n\xff\xfe{}\n' + b'"' + b"x" * 100 + b'"\n{"ok": 2}\n')
    items = records(path, max_record_bytes=50)
    assert summary(items) == [
        (f"{path}:1", {"ok": 1}),
        (f"{path}:2", "invalid_json"),
        (f"{path}:3", "invalid_utf8"),
        (f"{path}:4", "oversize_record"),
        (f"{path}:5", {"ok": 2}),
    ]
    assert "byte(s) ff at byte 0" in items[2].message
    assert items[2].raw == "\\xff\\xfe{}"
    assert "102 bytes" in items[3].message and "limit of 50" in items[3].message


def test_oversize_line_is_not_held_in_memory_whole(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_bytes(b'"' + b"y" * 5_000_000 + b'"\n{"after": true}\n')
    items = records(path, max_record_bytes=1000)
    assert summary(items) == [(f"{path}:1", "oversize_record"), (f"{path}:2", {"after": True})]
    assert len(items[0].raw) <= 1001


@pytest.mark.parametrize(
    ("suffix", "compress"),
    [
        (".gz", gzip.compress),
        (".zst", lambda b: zstandard.ZstdCompressor().compress(b)),
        (".bz2", bz2.compress),
        (".xz", lzma.compress),
    ],
)
def test_compressed_jsonl(tmp_path, suffix, compress):
    path = tmp_path / f"a.jsonl{suffix}"
    path.write_bytes(compress(b'{"a": 1}\n{"a": 2}\n'))
    assert [v for _, v in summary(records(path))] == [{"a": 1}, {"a": 2}]


def test_truncated_gzip_keeps_what_was_read_and_rejects_the_rest(tmp_path):
    data = gzip.compress(b"".join(b'{"n": %d}\n' % i for i in range(5000)))
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    items = records(path)
    assert all(isinstance(i, Record) for i in items[:-1]) and len(items) > 10
    assert (items[-1].locator, items[-1].code) == (path.as_posix(), "unreadable_file")
    assert "rest of the file" in items[-1].message


def test_json_array_object_and_json_lines_saved_as_json(tmp_path):
    array = tmp_path / "array.json"
    array.write_text('[{"a": 1}, [2], "three"]')
    single = tmp_path / "single.json"
    single.write_text('{"a": 1}')
    lines = tmp_path / "lines.json"
    lines.write_text('{"a": 1}\n{"a": 2}\n')
    broken = tmp_path / "broken.json"
    broken.write_text('{"a": 1,,}')
    assert summary(records(array)) == [
        (f"{array}#0", {"a": 1}),
        (f"{array}#1", [2]),
        (f"{array}#2", "three"),
    ]
    assert summary(records(single)) == [(str(single), {"a": 1})]
    assert summary(records(lines)) == [(f"{lines}:1", {"a": 1}), (f"{lines}:2", {"a": 2})]
    (rejected,) = records(broken)
    assert (rejected.code, rejected.locator) == ("invalid_json", str(broken))
    assert "line 1 column 9" in rejected.message


def test_yaml_known_tags_have_explicit_readings(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text(
        "role: !ConversationRole USER\n"
        "fn: !fn |-\n  function x() {}\n"
        "other: !Custom [1, 2]\n"
        "when: 2024-05-01\n"
        "1: one\n"
    )
    (record,) = records(path)
    assert record.value == {
        "role": "USER",
        "fn": {"!fn": "function x() {}"},
        "other": [1, 2],
        "when": "2024-05-01",
        "1": "one",
    }


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system ['touch {marker}']",
        "!!python/object/new:subprocess.Popen [['touch', '{marker}']]",
        "!<tag:yaml.org,2002:python/name:os.system> ''",
    ],
)
def test_yaml_python_tags_are_refused_and_nothing_runs(tmp_path, tag, monkeypatch):
    marker = tmp_path / "ran"
    monkeypatch.setattr("os.system", lambda *a: pytest.fail("os.system was called"))
    path = tmp_path / "evil.yaml"
    path.write_text("a: 1\nrun: " + tag.format(marker=marker) + "\n")
    (rejected,) = records(path)
    assert rejected.code == "unsafe_yaml"
    assert "!!python/" in rejected.message and "line 2" in rejected.message
    assert not marker.exists()


def test_yaml_multi_document_and_errors(tmp_path):
    multi = tmp_path / "multi.yml"
    multi.write_text("a: 1\n---\nb: 2\n")
    assert summary(records(multi)) == [(f"{multi}#0", {"a": 1}), (f"{multi}#1", {"b": 2})]
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\nb: 3\n")
    (rejected,) = records(bad)
    assert rejected.code == "invalid_yaml" and "line" in rejected.message


def test_yaml_alias_bomb_is_rejected_not_expanded(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    (rejected,) = records(path, max_yaml_values=100_000)
    assert rejected.code == "invalid_yaml" and "100000" in rejected.message


def test_yaml_lone_surrogate_escape_is_rejected_not_read(tmp_path):
    """YAML's `\\ud800` escape makes a string that is not Unicode text: it could be neither
    written as UTF-8 nor tokenized, so the document is quarantined, saying why."""
    path = tmp_path / "surrogate.yaml"
    path.write_text('name: x\ntemplate: "hi \\ud800 there"\n')
    (rejected,) = records(path)
    assert rejected.code == "invalid_yaml"
    assert "lone surrogate (U+D800) at character 3" in rejected.message


def test_parquet_rows_in_batches(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": [f"r{i}" for i in range(2500)], "n": list(range(2500))}), path)
    items = records(path)
    assert len(items) == 2500
    assert summary(items)[2499] == (f"{path}#2499", {"id": "r2499", "n": 2499})


def test_corrupt_parquet_is_a_rejection(tmp_path):
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"PAR1 not really")
    (rejected,) = records(path)
    assert rejected.code == "unreadable_file"


def test_csv_rows_with_line_numbers(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text('instruction,output\n"multi\nline",x\nplain,y\n', newline="")
    assert summary(records(path)) == [
        (f"{path}:2", {"instruction": "multi\nline", "output": "x"}),
        (f"{path}:4", {"instruction": "plain", "output": "y"}),
    ]


def test_expand_directories_globs_and_errors(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / ".hidden").mkdir()
    for name in ["d/b.jsonl", "d/a.json", "d/sub/c.yaml.gz", "d/README.md", "d/.hidden/x.jsonl"]:
        (tmp_path / name).write_text("{}")
    found = expand_inputs([str(tmp_path / "d")])
    assert [Path(p).relative_to(tmp_path).as_posix() for p in found.files] == [
        "d/a.json",
        "d/b.jsonl",
        "d/sub/c.yaml.gz",
    ]
    assert [Path(p).name for p in found.skipped] == ["README.md"]
    globbed = expand_inputs(
        [str(tmp_path / "d" / "**" / "*.json*"), str(tmp_path / "d" / "a.json")]
    )
    assert [Path(p).name for p in globbed.files] == ["a.json", "b.jsonl"]
    with pytest.raises(InputError, match="no such file"):
        expand_inputs([str(tmp_path / "missing.jsonl")])
    with pytest.raises(InputError, match="unsupported file type"):
        expand_inputs([str(tmp_path / "d" / "README.md")])
    with pytest.raises(InputError, match="no files match"):
        expand_inputs([str(tmp_path / "*.nothing")])


def test_json_trailing_commas_are_forgiven_with_a_note(tmp_path):
    path = tmp_path / "prompt.json"
    path.write_text('{"a": [1, 2,],\n "b": {"c": ",}",\n },\n}\n')
    (record,) = records(path)
    assert record.value == {"a": [1, 2], "b": {"c": ",}"}}
    assert record.notes == (
        "accepted 3 trailing comma(s), which JSON does not allow (line 1, 2, 3)",
    )


def test_json_with_other_faults_than_trailing_commas_gives_the_position(tmp_path):
    path = tmp_path / "prompt.json"
    path.write_text('{"a": ["x", "y",]\n "b": 2}\n')
    (rejected,) = records(path)
    assert rejected.code == "invalid_json" and "line 2 column 2" in rejected.message


def test_scripts_are_read_whole_as_text_documents(tmp_path):
    script = tmp_path / "chat.ai.yaml"
    script.write_bytes(b"\xef\xbb\xbf---\nname: x\n---\nuser: hi\n-> next\n")
    (record,) = records(script)
    assert record.value == TextDocument("ppe", "---\nname: x\n---\nuser: hi\n-> next\n")


def test_skprompt_is_read_with_its_config_which_is_not_a_record_of_its_own(tmp_path):
    chat = tmp_path / "Chat"
    chat.mkdir()
    (chat / "skprompt.txt").write_text("{{$input}}")
    (chat / "config.json").write_text('{"schema": 1, "description": "d"}')
    (tmp_path / "other.json").write_text('{"a": 1}')
    found = expand_inputs([str(tmp_path)])
    prompt = (chat / "skprompt.txt").as_posix()
    assert found.files == [(tmp_path / "other.json").as_posix(), prompt]
    assert found.companions == {(chat / "config.json").as_posix(): prompt}
    (record,) = records(chat / "skprompt.txt")
    assert record.value == TextDocument(
        "skprompt",
        "{{$input}}",
        {"schema": 1, "description": "d"},
        (chat / "config.json").as_posix(),
    )


def test_skprompt_with_a_broken_config_is_quarantined_naming_the_config(tmp_path):
    (tmp_path / "skprompt.txt").write_text("{{$input}}")
    (tmp_path / "config.json").write_text('{"schema": 1,, }')
    (rejected,) = records(tmp_path / "skprompt.txt")
    assert rejected.code == "invalid_json" and "config.json" in rejected.message
