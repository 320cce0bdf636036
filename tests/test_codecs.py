"""Every codec of COMPRESSION_SUFFIXES keeps the reader contract: a compressed file that
does not end cleanly (cut short, corrupt) keeps the records read before the break and ends
in one `unreadable_file` line, never reads as a shorter valid file; an intact one converts
whole. A CSV row whose quote is never closed is `invalid_csv`, not a thread."""

from __future__ import annotations

import bz2
import gzip
import lzma
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
import zstandard
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.sources.compression import (
    CODECS,
    COMPRESSION_SUFFIXES,
    BrokenStreamError,
    open_binary,
)
from tests.reading import read_all

COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    # with its checksum, as the zstd command writes it: without one a flipped byte of a
    # frame's literals decodes to other bytes that nothing can tell from the real ones
    "zstd": zstandard.ZstdCompressor(write_checksum=True).compress,
    "bzip2": bz2.compress,
    "xz": lzma.compress,
}
"""How a test writes each codec's files (by codec name: a codec added without one fails)."""

TEXT = st.text(st.characters(categories=("L", "N")), min_size=1, max_size=120)
RECORDS = st.lists(TEXT, min_size=1, max_size=40)


def _record(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]}


def _jsonl(texts: list[str]) -> bytes:
    return b"".join(orjson.dumps(_record(text)) + b"\n" for text in texts)


def _write(folder: Path, suffix: str, data: bytes) -> Path:
    path = folder / f"records.jsonl{suffix}"
    path.write_bytes(data)
    return path


def _compressed(suffix: str, texts: list[str]) -> bytes:
    return COMPRESS[CODECS[suffix].name](_jsonl(texts))


@pytest.mark.parametrize("suffix", COMPRESSION_SUFFIXES)
@settings(max_examples=40)
@given(texts=RECORDS, data=st.data())
def test_a_truncated_file_keeps_a_prefix_and_names_the_break(tmp_path_factory, suffix, texts, data):
    compressed = _compressed(suffix, texts)
    cut = data.draw(st.integers(0, len(compressed) - 1), label="cut")
    path = _write(tmp_path_factory.mktemp("cut"), suffix, compressed[:cut])
    threads, rejected, stats = read_all(path, format="openai")
    assert stats.read_balanced
    assert [r.code for r in rejected] == ["unreadable_file"]
    assert "not a complete" in rejected[0].message and str(path) in rejected[0].message
    assert [t.messages[0].content for t in threads] == texts[: len(threads)]


@pytest.mark.parametrize("suffix", COMPRESSION_SUFFIXES)
@settings(max_examples=10)
@given(texts=RECORDS)
def test_an_intact_file_converts_whole(tmp_path_factory, suffix, texts):
    path = _write(tmp_path_factory.mktemp("whole"), suffix, _compressed(suffix, texts))
    threads, rejected, stats = read_all(path, format="openai")
    assert not rejected and stats.read_balanced
    assert [t.messages[0].content for t in threads] == texts


@pytest.mark.parametrize("suffix", COMPRESSION_SUFFIXES)
@settings(max_examples=40)
@given(texts=RECORDS, data=st.data())
def test_a_corrupt_file_converts_whole_or_names_the_break(tmp_path_factory, suffix, texts, data):
    compressed = bytearray(_compressed(suffix, texts))
    offsets = st.integers(0, len(compressed) - 1)
    for offset in data.draw(st.lists(offsets, min_size=1, max_size=3), label="offsets"):
        compressed[offset] ^= data.draw(st.integers(1, 255), label="flip")
    path = _write(tmp_path_factory.mktemp("flip"), suffix, bytes(compressed))
    threads, rejected, stats = read_all(path, format="openai")
    assert stats.read_balanced
    if not rejected:  # only bytes the codec ignores changed (a gzip header's time)
        assert [t.messages[0].content for t in threads] == texts
    else:  # lines decoded before the check found the damage may be invalid_json
        assert rejected[-1].code == "unreadable_file", [r.code for r in rejected]


@pytest.mark.parametrize("suffix", COMPRESSION_SUFFIXES)
@pytest.mark.parametrize("cut", ["empty", "header", "last byte"])
def test_every_codec_raises_a_named_error_where_its_stream_is_cut(tmp_path, suffix, cut):
    compressed = _compressed(suffix, ["a"] * 50)
    end = {"empty": 0, "header": 3, "last byte": len(compressed) - 1}[cut]
    path = _write(tmp_path, suffix, compressed[:end])
    with open_binary(str(path), 200) as stream, pytest.raises(BrokenStreamError, match=str(path)):
        stream.read()


def _convert_half(tmp_path: Path, texts: list[str]) -> tuple[str, int, list[dict]]:
    """`mms convert` over the JSON Lines of `texts` as a zstd file cut in half: its summary,
    the threads it wrote and its quarantine lines."""
    compressed = _compressed(".zst", texts)
    path = _write(tmp_path, ".zst", compressed[: len(compressed) // 2])
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["convert", str(path), "-o", str(out), "--from", "openai"])
    rejected = (tmp_path / "out.rejected.jsonl").read_bytes().splitlines()
    threads = len(out.read_bytes().splitlines())
    return result.output, threads, [orjson.loads(line) for line in rejected]


def test_a_zstd_file_of_identical_lines_cut_in_half_is_not_read_as_an_empty_file(tmp_path):
    output, _, rejected = _convert_half(tmp_path, ["same"] * 5000)
    assert "1 read = 0 converted + 1 quarantined" in output, output
    assert [r["code"] for r in rejected] == ["unreadable_file"]


def test_a_zstd_file_cut_in_half_keeps_its_first_records_and_names_the_break(tmp_path):
    output, converted, rejected = _convert_half(tmp_path, [f"question {n}" for n in range(5000)])
    (broken,) = rejected
    assert broken["code"] == "unreadable_file" and "not a complete zstd stream" in broken["message"]
    assert f"after {broken['source']}:{converted}:" in broken["message"]
    assert 0 < converted < 5000
    assert f"{converted + 1:,} read = {converted:,} converted + 1 quarantined" in output, output


def _cut_in_half(path: Path, data: bytes) -> Path:
    """`data` written to `path` as a zstd file cut in half."""
    compressed = COMPRESS["zstd"](data)
    path.write_bytes(compressed[: len(compressed) // 2])
    return path


def test_a_cut_csv_keeps_the_rows_before_the_break(tmp_path):
    rows = "".join(f"question {n},answer {n}\n" for n in range(30000))
    path = _cut_in_half(tmp_path / "rows.csv.zst", f"instruction,output\n{rows}".encode())
    threads, rejected, stats = read_all(path, format="alpaca")
    assert stats.read_balanced and 0 < len(threads) < 30000
    assert [t.messages[0].content for t in threads] == [
        f"question {n}" for n in range(len(threads))
    ]
    (broken,) = rejected
    assert (
        broken.code == "unreadable_file" and f"after {path}:{len(threads) + 1}:" in broken.message
    )


@pytest.mark.parametrize("name", ["records.json.zst", "records.yaml.zst"])
def test_a_cut_document_is_one_unreadable_file(tmp_path, name):
    records = [_record(f"question {n}") for n in range(30000)]
    path = _cut_in_half(tmp_path / name, orjson.dumps(records))  # JSON is YAML too
    threads, rejected, stats = read_all(path, format="openai")
    assert not threads and stats.read_balanced
    assert [(r.code, r.locator) for r in rejected] == [("unreadable_file", str(path))]


def test_parallel_parts_name_a_cut_file_as_one_process_does(tmp_path):
    (tmp_path / "in").mkdir()
    cut = _cut_in_half(tmp_path / "in" / "a.jsonl.zst", _jsonl([f"q {n}" for n in range(30000)]))
    (tmp_path / "in" / "b.jsonl").write_bytes(_jsonl(["after"]))
    outputs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}" / "out.jsonl"
        command = ["convert", str(cut.parent), "-o", str(out), "--from", "openai"]
        result = CliRunner().invoke(main, [*command, "--workers", workers])
        assert result.exit_code == 0 and "quarantined ✓" in result.output, result.output
        rejected = out.with_name("out.rejected.jsonl").read_bytes().splitlines()
        assert [orjson.loads(line)["code"] for line in rejected] == ["unreadable_file"]
        outputs.append((out.read_bytes(), rejected))
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize(
    ("text", "kept", "line"),
    [
        ('instruction,output\nq1,a1\nq2,"a2\n', ["q1"], 3),
        ('instruction,output\nq1,a1\nq2,"a2', ["q1"], 3),
        ('instruction,output\nq1,"a1\nstill a1",\nq2,"a2 ""never"" closed\n\n', ["q1"], 4),
        ('instruction,"output\nq1,a1\n', [], 1),
    ],
)
def test_a_csv_quote_never_closed_is_invalid_csv(tmp_path, text, kept, line):
    path = tmp_path / "rows.csv"
    path.write_text(text)
    threads, rejected, stats = read_all(path, format="alpaca")
    assert [t.messages[0].content for t in threads] == kept and stats.read_balanced
    assert [(r.code, r.locator) for r in rejected] == [("invalid_csv", f"{path}:{line}")]
    assert "never closed" in rejected[0].message


def test_a_csv_whose_last_row_ends_without_a_newline_is_read(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text('instruction,output\nq1,"a1"\nq2,a2')
    threads, rejected, _ = read_all(path, format="alpaca")
    assert [t.messages[0].content for t in threads] == ["q1", "q2"] and not rejected
