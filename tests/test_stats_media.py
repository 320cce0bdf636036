"""Media in `mms stats` (DESIGN §3): per kind the media, the threads holding one, per role,
and their sizes where known, from the shards' `media` column; without it (an objective's
rows, packed sequences) per kind from the `images` / `audios` / `videos` columns, roles
not known; count tables that merge shard by shard; nothing at all for text-only shards
(their figures stay the bytes they were: tests/test_output_bytes.py pins the
quickstart's)."""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from pipeline.cli import main
from pipeline.jobs.stats.compute import compute_stats, shard_tables, split_figures
from pipeline.mms import Media, Message, Thread, threads_to_arrow
from pipeline.mms.media_columns import MEDIA_CELL
from pipeline.output.stats_html import write_stats_html
from pipeline.output.stats_markdown import stats_markdown
from tests.conftest import REPO
from tests.output_rows import shard_rows
from tests.test_media_rows import (
    _run,
    inputs,  # noqa: F401 (fixture)
)

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"x" * 92).decode()  # 100 bytes
SCHEMA = Draft202012Validator(json.loads((REPO / "schemas" / "stats.schema.json").read_text()))


def media_threads() -> list[Thread]:
    return [
        Thread(
            "a",
            [
                Message.user(
                    "\ufffc\ufffcCompare.", [Media("image", path="1.jpg"), Media("image", data=PNG)]
                ),
                Message.assistant("The second is a PNG."),
                Message.context(
                    "\ufffc", name="tts", media=[Media("audio", url="https://x/a.wav")]
                ),
            ],
        ),
        Thread("b", [Message.user("Hi"), Message.assistant("Hello!")]),
        Thread(
            "c",
            [
                Message.user("\ufffc", [Media("image", path="2.jpg")]),
                Message.assistant("\ufffc", media=[Media("image", data=PNG)]),
            ],
        ),
    ]


def write(path: Path, threads: list[Thread], *, media: bool | None = None) -> str:
    pq.write_table(threads_to_arrow(threads, media=media), path)
    return str(path)


EXPECTED = {
    "media": 5,
    "threads": 2,
    "sized": 2,
    "bytes": 200,
    "kinds": {
        "audio": {
            "media": 1,
            "threads": 1,
            "sized": 0,
            "bytes": 0,
            "roles": {"context": {"media": 1, "threads": 1, "sized": 0, "bytes": 0}},
        },
        "image": {
            "media": 4,
            "threads": 2,
            "sized": 2,
            "bytes": 200,
            "roles": {
                "assistant": {"media": 1, "threads": 1, "sized": 1, "bytes": 100},
                "user": {"media": 3, "threads": 2, "sized": 1, "bytes": 100},
            },
        },
    },
}


def test_media_per_kind_role_and_known_size(tmp_path, monkeypatch):
    stats = compute_stats({"all": [write(tmp_path / "a.parquet", media_threads())]})
    assert stats["splits"]["all"]["media"] == EXPECTED
    SCHEMA.validate(stats)
    import pipeline.jobs.stats.compute as compute

    monkeypatch.setattr(compute, "STATS_ROWS", 1)  # each row's tables, merged
    assert compute_stats({"all": [str(tmp_path / "a.parquet")]}) == stats


def test_shard_tables_merge_to_the_figures_of_one_shard(tmp_path):
    threads = media_threads()
    shards = [write(tmp_path / f"{i}.parquet", [t]) for i, t in enumerate(threads)]
    merged = split_figures([shard_tables(path) for path in shards])
    assert merged["media"] == EXPECTED


def test_a_recorded_size_is_picked_up(tmp_path):
    table = threads_to_arrow(media_threads())
    rows = table.column("media").to_pylist()
    for items in rows:
        for item in items or []:
            item["size"] = 7 if item["path"] == "1.jpg" else None
    column_type = pa.list_(
        pa.struct([*table.schema.field("media").type.value_type, pa.field("size", pa.int64())])
    )
    table = table.set_column(4, "media", pa.array(rows, column_type))
    pq.write_table(table, tmp_path / "sized.parquet")
    found = compute_stats({"all": [str(tmp_path / "sized.parquet")]})["splits"]["all"]["media"]
    user = found["kinds"]["image"]["roles"]["user"]
    assert (user["sized"], user["bytes"]) == (2, 107)  # 1.jpg recorded, the PNG from its data
    assert found["kinds"]["image"]["roles"]["assistant"]["bytes"] == 100  # data, no record


def test_text_only_shards_have_no_media_figures(tmp_path):
    text = [Thread("b", [Message.user("Hi \ufffc"), Message.assistant("Hello!")])]
    without = compute_stats({"all": [write(tmp_path / "t.parquet", text)]})
    with_column = compute_stats({"all": [write(tmp_path / "m.parquet", text, media=True)]})
    assert "media" not in without["splits"]["all"]
    assert with_column == without
    assert "media" not in stats_markdown(without)


def test_markdown_html_and_mms_stats_show_the_media(tmp_path):
    path = write(tmp_path / "a.parquet", media_threads())
    stats = compute_stats({"all": [path]})
    markdown = stats_markdown(stats)
    assert "## all: media" in markdown
    assert "| `image` | `user` | 3 | 2 | 100 bytes (1 of 3) |" in markdown
    assert "| `audio` | `context` | 1 | 1 | - |" in markdown
    page = tmp_path / "stats.html"
    with page.open("w") as out:
        write_stats_html(stats, out)
    html = page.read_text()
    assert 'id="media-0"' in html and "100 bytes (1 of 3)" in html
    result = CliRunner().invoke(main, ["stats", path, "--output-format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["splits"]["all"]["media"] == EXPECTED


kinds = st.sampled_from(["image", "audio", "video"])
items = st.one_of(
    st.builds(lambda k: Media(k, path="x.jpg"), kinds),
    st.builds(
        lambda k, b: Media(k, data=base64.b64encode(b).decode()), kinds, st.binary(max_size=30)
    ),
)


@st.composite
def threads(draw: st.DrawFn) -> Thread:
    messages = []
    for role in draw(
        st.lists(
            st.sampled_from(["user", "assistant", "context", "developer"]), min_size=1, max_size=4
        )
    ):
        media = tuple(draw(st.lists(items, max_size=3)))
        messages.append(
            Message(
                role,
                "\ufffc" * len(media) + "t",
                media=media,
                **({"format": "markdown", "end_turn": True} if role == "assistant" else {}),
            )
        )  # type: ignore[arg-type]
    return Thread("t", messages)


@settings(max_examples=25, deadline=None)
@given(st.lists(threads(), min_size=1, max_size=5), st.integers(1, 3))
def test_figures_are_the_threads_media_counted_in_any_number_of_shards(tmp_path_factory, batch, n):
    folder = tmp_path_factory.mktemp("shards")
    batch = [Thread(f"t{i}", t.messages) for i, t in enumerate(batch)]
    shards = [
        write(folder / f"{i}.parquet", batch[i::n], media=True) for i in range(n) if batch[i::n]
    ]
    found = split_figures([shard_tables(path) for path in shards]).get("media")
    media = [(m.role, x) for t in batch for m in t.messages for x in m.media]
    if not media:
        assert found is None
        return
    per_kind = Counter(x.kind for _, x in media)
    assert found["media"] == len(media)
    assert found["threads"] == sum(1 for t in batch if t.has_media)
    assert {k: v["media"] for k, v in found["kinds"].items()} == dict(per_kind)
    assert found["bytes"] == sum(
        len(base64.b64decode(x.data)) for _, x in media if x.data is not None
    )
    for figures in found["kinds"].values():
        assert sum(r["media"] for r in figures["roles"].values()) == figures["media"]


def _kind_shard(path: Path, rows: list[dict[str, list[dict]]]) -> str:
    """A shard of rows with kind columns alone (no `media` column), as an objective's or
    a packed output's: `rows` maps each column (`images` ...) to its cells."""
    columns = sorted({name for row in rows for name in row})
    table = pa.table(
        {
            name: pa.array([row.get(name, []) for row in rows], pa.list_(MEDIA_CELL))
            for name in columns
        }
        | {"id": [str(i) for i in range(len(rows))]}
    )
    pq.write_table(table, path)
    return str(path)


def test_media_of_rows_without_a_media_column_come_from_their_kind_columns(tmp_path):
    """Per kind: the media, the rows holding one and the embedded bytes; roles are said
    not to be known, and the figures merge shard by shard."""
    image = {"bytes": b"x" * 10, "path": "media/a.png"}
    rows = [
        {"images": [image, {"bytes": None, "path": "b.png"}], "audios": [image]},
        {"images": [], "audios": []},
        {"images": [image]},
    ]
    shards = [_kind_shard(tmp_path / f"{i}.parquet", [row]) for i, row in enumerate(rows)]
    found = split_figures([shard_tables(path) for path in shards])["media"]
    assert found == {
        "counted_from": "kind_columns",
        "media": 4,
        "rows": 2,
        "sized": 3,
        "bytes": 30,
        "kinds": {
            "audio": {"media": 1, "rows": 1, "sized": 1, "bytes": 10, "roles": None},
            "image": {"media": 3, "rows": 2, "sized": 2, "bytes": 20, "roles": None},
        },
    }
    stats = compute_stats({"all": [_kind_shard(tmp_path / "all.parquet", rows)]})
    assert stats["splits"]["all"]["media"] == found
    SCHEMA.validate(stats)
    markdown = stats_markdown(stats)
    assert "the role of the message holding each media is not known" in markdown
    assert "| media | media | rows | known size |" in markdown
    assert "| `image` | 3 | 2 | 20 bytes (2 of 3) |" in markdown
    page = tmp_path / "stats.html"
    with page.open("w") as out:
        write_stats_html(stats, out)
    html = page.read_text()
    assert '<th class="n">rows</th>' in html and "is not known" in html
    empty = compute_stats({"all": [_kind_shard(tmp_path / "none.parquet", [rows[1]])]})
    assert "media" not in empty["splits"]["all"]


@pytest.mark.parametrize(
    ("tokenize", "stages"),
    [
        ("objective: preference", ""),  # a pair holds its prompt's and both answers' images
        ("objective: unpaired_preference", ""),
        ("objective: prompt", ""),
        ("max_tokens: 128", "  pack: {seq_len: 128}\n"),
    ],
)
def test_mms_stats_counts_an_objectives_or_a_packed_outputs_media(
    inputs,  # noqa: F811 (the fixture)
    tmp_path,
    monkeypatch,
    tokenize,
    stages,
):
    """`mms stats` of `mms run` outputs without a `media` column: their rows' images,
    counted per row, sized by their embedded bytes (the same counted a row at a time)."""
    import pipeline.jobs.stats.compute as compute

    out = _run(inputs, tmp_path / "out", tokenize, stages=stages)
    rows = shard_rows(out)
    images = [cell for row in rows for cell in row["images"]]
    result = CliRunner().invoke(main, ["stats", str(out), "--output-format", "json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    monkeypatch.setattr(compute, "STATS_ROWS", 1)
    again = CliRunner().invoke(main, ["stats", str(out), "--output-format", "json"])
    assert json.loads(again.output) == stats
    SCHEMA.validate(stats)
    figures = {
        "media": len(images),
        "rows": sum(1 for row in rows if row["images"]),
        "sized": len(images),
        "bytes": sum(len(cell["bytes"]) for cell in images),
    }
    assert stats["splits"]["train"]["media"] == {
        "counted_from": "kind_columns",
        **figures,
        "kinds": {"image": {**figures, "roles": None}},
    }
    assert figures["media"] > figures["rows"] > 0  # a row holding several counts once
