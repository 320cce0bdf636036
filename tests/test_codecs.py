"""Every codec of COMPRESSION_SUFFIXES keeps the reader contract: a compressed file that
does not end cleanly (cut short, corrupt) keeps the records read before the break and ends
in one `unreadable_file` line, never reads as a shorter valid file; an intact one converts
whole."""

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
