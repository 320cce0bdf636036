"""The OpenAssistant format through the public API: paths of message trees (all or top),
left-out branches, flat exports merged per file with exact counts, and the real files."""

from __future__ import annotations

import orjson
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.formats import ConvertOptions
from tests.conftest import REPO, needs_shared
from tests.reading import read_all

SAMPLES = REPO / "data_samples" / "oasst"


def msg(message_id, parent, role, text, **fields):
    return {"message_id": message_id, "parent_id": parent, "role": role, "text": text, **fields}


def test_every_root_to_leaf_path_is_a_thread_with_ids_in_meta():
    threads, rejected, stats = read_all(str(SAMPLES / "trees.jsonl"))
    assert stats.read_balanced and [r.code for r in rejected] == [
        "empty_conversation",
        "unknown_role",
    ]
    assert [t.id for t in threads] == ["t1-a", "t1-b-p-a", "t1-b-q"]
    deep = threads[1]
    assert [m.role for m in deep.messages] == ["user", "assistant", "user", "assistant"]
    assert [m.end_turn for m in deep.messages if m.role == "assistant"] == [True, True]
    assert deep.meta["message_tree_id"] == "t1-root"
    assert deep.meta["message_ids"] == ["t1-root", "t1-b", "t1-b-p", "t1-b-p-a"]
    assert deep.meta["message_meta"]["1"]["labels"]["quality"]["value"] == 0.75
    assert deep.meta["extra_fields"] == {"tree_state": "ready_for_export"}
    assert "left out 1 deleted message(s) of this tree with their 1 replies" in deep.meta["notes"]
    assert all("t1-c" not in t.meta["message_ids"] for t in threads)
    unanswered = threads[2]
    assert unanswered.messages[-1].role == "user"
    assert any("unanswered" in note for note in unanswered.meta["notes"])


def test_top_follows_the_best_rank_and_notes_the_other_paths():
    options = ConvertOptions(oasst_paths="top")
    threads, _, _ = read_all(str(SAMPLES / "trees.jsonl"), options=options)
    assert [t.id for t in threads] == ["t1-b-p-a"]  # rank 0 (t1-b) beats rank 1 listed first
    assert any("2 other path(s)" in note for note in threads[0].meta["notes"])


def test_unranked_replies_come_after_ranked_ones(tmp_path):
    tree = {
        "message_tree_id": "r",
        "prompt": msg(
            "r",
            None,
            "prompter",
            "hi",
            replies=[
                msg("u", "r", "assistant", "unranked", replies=[]),
                msg("b", "r", "assistant", "second", rank=1, replies=[]),
                msg("a", "r", "assistant", "best", rank=0, replies=[]),
            ],
        ),
    }
    path = tmp_path / "tree.jsonl"
    path.write_bytes(orjson.dumps(tree) + b"\n")
    threads, _, _ = read_all(str(path), options=ConvertOptions(oasst_paths="top"))
    assert [t.id for t in threads] == ["a"]
    threads, _, _ = read_all(str(path))
    assert [t.id for t in threads] == ["u", "b", "a"]


def test_flat_export_is_merged_per_tree_and_every_record_counted():
    threads, rejected, stats = read_all(str(SAMPLES / "backend_seed.json"))
    assert stats.records_read == 8 and stats.records_converted == 7 and stats.read_balanced
    assert [t.id for t in threads] == ["m4", "m5", "n2"]
    assert threads[0].meta["message_ids"] == ["m1", "m2", "m3", "m4"]
    assert threads[0].meta["message_meta"]["3"] == {"task_message_id": "k4"}
    [orphan] = rejected
    assert orphan.locator.endswith("backend_seed.json#7") and orphan.code == "missing_field"
    assert "replies to 'x9'" in orphan.message


def test_a_tree_split_across_the_file_is_quarantined_with_the_reason():
    threads, rejected, stats = read_all(str(SAMPLES / "message_export.jsonl"))
    assert [t.id for t in threads] == ["r1-a", "s1-a"] and stats.read_balanced
    [split] = rejected
    assert split.locator.endswith(":5") and "not contiguous" in split.message


def test_a_failing_merged_tree_quarantines_each_of_its_records(tmp_path):
    records = [
        msg("p", None, "prompter", "hi", message_tree_id="p"),
        msg("q", "p", "robot", "beep", message_tree_id="p"),
        msg("z", None, "prompter", "next", message_tree_id="z"),
    ]
    path = tmp_path / "messages.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    threads, rejected, stats = read_all(str(path), format="oasst")
    assert [t.id for t in threads] == ["z"]
    assert (
        stats.records_read == 3 and stats.quarantined["unknown_role"] == 2 and stats.read_balanced
    )
    assert [r.locator.rsplit(":", 1)[1] for r in rejected] == ["1", "2"]
    assert all("'robot'" in r.message and "2 records were merged" in r.message for r in rejected)
    assert orjson.loads(rejected[0].raw)["text"] == "hi"


def check_tree_exports(folder, trees: int, leaves: int, user_leaves: int) -> None:
    for name in ("en_100_tree.jsonl", "en_100_message.jsonl"):
        threads, rejected, stats = read_all(str(folder / name))
        assert rejected == [] and stats.records_read == trees and len(threads) == leaves
        assert sum(t.messages[-1].role == "user" for t in threads) == user_leaves
        assert len({t.id for t in threads}) == leaves
    top, _, _ = read_all(
        str(folder / "en_100_tree.jsonl"), options=ConvertOptions(oasst_paths="top")
    )
    assert len(top) == trees and all(t.messages[1].role == "assistant" for t in top)


def test_real_tree_and_message_exports_give_one_thread_per_leaf(data):
    # the copies hold 3 of the 100 trees, one of them with leaves that are user turns
    check_tree_exports(data / "realdata" / "open_assistant", 3, 15, 5)


def check_backend_seed_data(folder, messages: int, threads_expected: int, trees: int) -> None:
    threads, rejected, stats = read_all(str(folder / "backend_realistic_seed_data.json"))
    assert rejected == [] and stats.records_read == stats.records_converted == messages
    assert len(threads) == threads_expected
    assert len({t.meta["message_tree_id"] for t in threads}) == trees


def test_real_backend_seed_data_is_merged_into_trees(data):
    folder = data / "realdata" / "open_assistant"
    # the copy holds the first 56 of the 444 messages
    check_backend_seed_data(folder, 56, 19, 10)
    threads, rejected, stats = read_all(str(folder / "backend_test_generic_data.json"))
    assert rejected == [] and stats.records_read == 10 and len(threads) == 6


def test_the_full_exports_convert_like_their_copies():
    """Every record of the large files tests/data trims; skips without them."""
    names = ["en_100_tree.jsonl", "en_100_message.jsonl", "backend_realistic_seed_data.json"]
    shared = needs_shared(*(f"realdata/open_assistant/{name}" for name in names))
    folder = shared / "realdata" / "open_assistant"
    check_tree_exports(folder, 100, 626, 226)
    check_backend_seed_data(folder, 444, 158, 74)


def test_prompt_lists_and_sampling_reports_are_not_detected_as_oasst(data):
    folder = data / "realdata" / "open_assistant"
    runner = CliRunner()
    for name in (
        "en_100_text.jsonl",
        "prompt_lottery_en_250_text.jsonl",
        "sampling_report_pythia-1b-sft.json",
    ):
        result = runner.invoke(main, ["formats", "--detect", str(folder / name)])
        assert result.exit_code == 0
        detected = result.output.splitlines()[0].rsplit("-> ", 1)[1]
        assert detected == ("unknown" if name.endswith(".json") else "prompts"), result.output
