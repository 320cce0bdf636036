"""The card's "Media" section says what each kind of row holds (DESIGN §7): rows
of threads carry the threads' `media` column beside their kind columns; an objective's
rows and packed sequences have no such column, and their placeholders stand in their own
token columns; a packed output's cells are described as they are (its rows keep no `meta`;
`mms pack` of a copy-mode output copies the media its rows name)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.test_media_rows import (
    _run,
    inputs,  # noqa: F401 (fixture)
)

THREAD_COLUMN = "They also carry the threads' `media` column"
EMBEDDED = "Each cell holds the media's bytes, so the rows load anywhere"


def _media_section(out: Path) -> str:
    """The card's "Media" section, its lines joined (the text is wrapped)."""
    card = (out / "README.md").read_text()
    section = card[card.index("## Media") : card.index("## Training on this dataset")]
    return " ".join(section.split())


@pytest.mark.parametrize(
    ("objective", "says"),
    [
        (
            "preference",
            [
                "in its token columns (`prompt_ids`, `chosen_ids`, `rejected_ids`)",
                "each the prompt's media, then the chosen answer's, then the rejected answer's",
                "the rejected side's the prompt's and the rejected answer's",
                "so it holds no threads' `media` column",
            ],
        ),
        (
            "unpaired_preference",
            [
                "in its token columns (`prompt_ids`, `completion_ids`)",
                "each the prompt's media, then the completion's",
                "so it holds no threads' `media` column",
            ],
        ),
        (
            "prompt",
            [
                "in its `prompt_ids` as one placeholder",
                "each the prompt's media in placeholder order",
                "so it holds no threads' `media` column",
            ],
        ),
    ],
)
def test_an_objectives_card_names_its_token_columns_and_no_thread_media_column(
    inputs,  # noqa: F811 (the fixture)
    tmp_path,
    objective,
    says,
):
    section = _media_section(_run(inputs, tmp_path / "out", f"objective: {objective}"))
    for words in says:
        assert words in section
    assert THREAD_COLUMN not in section and "in its `input_ids`" not in section
    assert "`meta.media_checked` names each media's source" in section  # rows keep `meta`


def test_packed_cards_say_a_sequence_holds_its_threads_media_and_no_media_column(
    inputs,  # noqa: F811 (the fixture)
    tmp_path,
):
    """The run's pack stage and `mms pack` of a run's threads say the same: no `media`
    column, each sequence's threads' media in `ids` order, embedded bytes without the
    `meta` a packed row does not keep."""
    threads = _run(inputs, tmp_path / "threads", "max_tokens: 128")
    assert THREAD_COLUMN in _media_section(threads)
    packed = _run(inputs, tmp_path / "packed", "max_tokens: 128", stages="  pack: {seq_len: 128}\n")
    again = tmp_path / "again"
    result = CliRunner().invoke(main, ["pack", str(threads), "--seq-len", "128", "-o", str(again)])
    assert result.exit_code == 0, result.output
    for out in (packed, again):
        section = _media_section(out)
        assert "each its threads' media one thread after the other (in `ids` order)" in section
        assert "A packed row holds no messages, so no threads' `media` column." in section
        assert THREAD_COLUMN not in section
        assert (
            f"{EMBEDDED} (`datasets`, TRL, the Hub), and its path: its content address" in section
        )
        assert "meta.media_checked" not in section
    assert _media_section(packed) == _media_section(again)


def test_mms_pack_of_unembedded_threads_says_the_cells_hold_paths(
    inputs,  # noqa: F811 (the fixture)
    tmp_path,
):
    """`mms pack` reads what its source's cells hold: paths as the source wrote them (a
    run that read no media embeds none)."""
    threads = tmp_path / "threads"
    _run(inputs, threads, "max_tokens: 128", stages="  media: {check: false}\n")
    again = tmp_path / "again"
    result = CliRunner().invoke(main, ["pack", str(threads), "--seq-len", "128", "-o", str(again)])
    assert result.exit_code == 0, result.output
    section = _media_section(again)
    assert "Each cell holds its media's path as the source wrote it" in section
    assert EMBEDDED not in section


def test_mms_pack_of_a_copy_mode_output_carries_the_media_its_rows_name(
    inputs,  # noqa: F811 (the fixture)
    tmp_path,
):
    """A copy-mode source without embedding: the packed output has its own media/ (each
    file a packed cell names, listed in its manifest), so it stands alone and verifies."""
    import orjson
    import pyarrow.parquet as pq

    threads = tmp_path / "threads"
    _run(inputs, threads, "max_tokens: 128", stages="  media: {copy: true, embed: false}\n")
    again = tmp_path / "again"
    result = CliRunner().invoke(main, ["pack", str(threads), "--seq-len", "128", "-o", str(again)])
    assert result.exit_code == 0, result.output
    named = {
        cell["path"]
        for shard in (again / "data").glob("*.parquet")
        for row in pq.read_table(shard, columns=["images"]).to_pylist()
        for cell in row["images"]
    }
    assert named and all(cell.startswith("media/") for cell in named)
    assert {f"media/{p.name}" for p in (again / "media").iterdir()} == named
    for path in named:
        assert (again / path).read_bytes() == (threads / path).read_bytes()
    listed = {
        entry["path"] for entry in orjson.loads((again / "manifest.json").read_bytes())["files"]
    }
    assert named <= listed
    assert "relative to this output: its `media/` folder" in _media_section(again)
    assert CliRunner().invoke(main, ["verify", str(again)]).exit_code == 0
