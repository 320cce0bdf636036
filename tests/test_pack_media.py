"""Any packing of a tokenized output holding media verifies: every multimodal fixture of
tests/data/formats/multimodal, tokenized by `mms tokenize`, packed by `mms pack` at a
short, a middle and a long --seq-len under every --overlong policy, passes `mms verify`,
and its packed rows hold every source row's thread exactly once (whole, or cut at a
message boundary with the media its cut kept) unless the drop list names it with a
reason. xtuner's two files number their records alike, so thread ids repeat: a thread is
told from another by what it holds, never by its id alone."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.cli.pack import PACK_DROP_CODES
from pipeline.jobs.verify import verify_output
from tests.output_rows import shard_rows

REPO = Path(__file__).resolve().parents[1]
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
MULTIMODAL = REPO / "tests" / "data" / "formats" / "multimodal"
FLAGS = {
    "swift_messages.jsonl": ("--no-check-media",),
    "xtuner_llava.json": ("--no-check-media",),
    "xtuner_img_context": ("--media-root", str(MULTIMODAL / "xtuner")),
}
"""What a fixture needs besides the defaults: the stand-ins name media files that do not
exist; the older xtuner files' photographs are the current ones'."""
FIXTURES = sorted(path.name for path in MULTIMODAL.iterdir() if path.name != "PROVENANCE.txt")
SEQ_LENS = ("small", "medium", "large")
POLICIES = ("drop", "truncate", "error")


@pytest.fixture(scope="module")
def tokenized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each fixture tokenized once, with the sample tokenizer."""
    done: dict[str, Path] = {}
    for name in FIXTURES:
        out = tmp_path_factory.mktemp("tokenized") / Path(name).stem
        args = ["tokenize", str(MULTIMODAL / name), "--tokenizer", str(SAMPLE_TOKENIZER)]
        result = CliRunner().invoke(main, [*args, "-o", str(out), *FLAGS.get(name, ())])
        assert result.exit_code == 0, result.output
        done[name] = out
    return done


def _seq_len(rows: list[dict], size: str) -> int:
    """Short: most threads over it; middle: the median thread; long: the longest."""
    lengths = sorted(row["num_tokens"] for row in rows)
    return {"small": 64, "medium": lengths[len(lengths) // 2], "large": lengths[-1]}[size]


def _slices(row: dict, image: int) -> list[tuple[str, list[int], list[int], list]]:
    """Each thread of a packed row: id, ids, labels and its images."""
    out, start, taken = [], 0, 0
    for name, length in zip(row["ids"], row["seq_lens"], strict=True):
        ids = row["input_ids"][start : start + length]
        held = ids.count(image)
        images = (row.get("images") or [])[taken : taken + held]
        out.append((name, ids, row["labels"][start : start + length], images))
        start, taken = start + length, taken + held
    return out


def _key(name: str, ids: list[int], labels: list[int], images: list) -> bytes:
    return orjson.dumps([name, ids, labels, [cell["path"] for cell in images]])


def _image_id(out: Path) -> int:
    record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    return int(record["media_tokens"]["image"]["id"])


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("size", SEQ_LENS)
@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_packing_of_media_rows_verifies(tokenized, fixture, size, policy):
    source = tokenized[fixture]
    rows = shard_rows(source)
    assert rows and any(row.get("images") for row in rows)
    seq_len = _seq_len(rows, size)
    packed = source.parent / f"packed-{size}-{policy}"  # beside its source: verify finds it
    args = ["pack", str(source), "--seq-len", str(seq_len), "--overlong", policy]
    result = CliRunner().invoke(main, [*args, "-o", str(packed)])
    over = [row for row in rows if row["num_tokens"] > seq_len]
    if policy == "error" and over:
        assert result.exit_code == 1 and "more than --seq-len" in result.output
        assert not packed.exists()
        return
    assert result.exit_code == 0, result.output

    verified = CliRunner().invoke(main, ["verify", str(packed)])
    assert verified.exit_code == 0, verified.output
    checked = verify_output(packed).checked

    image = _image_id(source)
    slices = [s for row in shard_rows(packed) for s in _slices(row, image)]
    dropped_path = packed / "quarantine" / "dropped.jsonl"
    drops = (
        [orjson.loads(line) for line in dropped_path.read_bytes().splitlines()]
        if (dropped_path.exists())
        else []
    )
    # records in = threads packed + dropped with a reason
    assert len(rows) == len(slices) + len(drops)
    assert all(drop["code"] in PACK_DROP_CODES for drop in drops)
    assert checked["packed threads matched to their source rows"] == len(slices)
    assert checked["rows rendered again"] == len(rows)

    held = Counter(_key(*s) for s in slices)
    whole = Counter(
        _key(row["id"], row["input_ids"], row["labels"], row.get("images") or [])
        for row in rows
        if row["num_tokens"] <= seq_len
    )
    assert whole <= held  # every row that fits is packed whole, once per time it occurs
    cut = list((held - whole).elements())
    if policy == "drop":
        assert not cut and Counter(d["id"] for d in drops) == Counter(r["id"] for r in over)
        return
    # truncate: each row over seq_len is cut (its ids a prefix of the row's, but for the
    # trained halt a cut after an unfinished turn ends with) or dropped, exactly once
    assert len(cut) + len(drops) == len(over)
    unmatched = [s for s in slices if _key(*s) in set(cut)]
    for name, ids, _, images in unmatched:
        candidates = [
            row
            for row in over
            if row["id"] == name
            and row["input_ids"][: len(ids) - 1] == ids[:-1]
            and (row.get("images") or [])[: len(images)] == images
        ]
        assert candidates, name
        over.remove(candidates[0])
        assert len(ids) <= seq_len and len(images) == ids.count(image)
    assert Counter(d["id"] for d in drops) == Counter(r["id"] for r in over)
