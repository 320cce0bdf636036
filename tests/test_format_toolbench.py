"""The ToolBench answer format through the public API: the trajectory as one thread,
Finish handling, search state left out, quarantined files without train_messages, every
tool call enabled, and the real answer and instruction files."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import REPO, needs_shared
from tests.reading import read_all, unenabled_formats

SAMPLES = REPO / "data_samples" / "toolbench"


def test_give_answer_trajectory_ends_in_the_final_answer():
    threads, _, _ = read_all(str(SAMPLES / "1_ChatGPT_DFS_woFilter_w2.json"))
    [thread] = threads
    assert [m.role for m in thread.messages] == [
        "developer",
        "developer",
        "user",
        "assistant",
        "assistant",
        "context",
        "assistant",
    ]
    assert thread.messages[0].content.startswith("You are AutoGPT")
    call = thread.messages[4]
    assert (call.format, call.content, call.end_turn) == (
        "forecast_for_weather:json",
        '{"city":"Lyon","days":1}',
        False,
    )
    assert thread.messages[5].name == "forecast_for_weather"
    assert thread.messages[-1].content == "Tomorrow in Lyon: sunny, 24 °C."
    assert thread.messages[-1].end_turn is True
    assert "Finish:json" not in {f.name for f in thread.settings.formats}
    meta = thread.meta
    assert (meta["query_id"], meta["win"], meta["finish_type"]) == (1, True, "give_answer")
    assert "tree" not in meta["extra_fields"] and "compare_candidates" not in meta["extra_fields"]
    assert "final_answer" not in meta["extra_fields"] and "query" not in meta["extra_fields"]
    assert any("`tree` and `compare_candidates`" in note for note in meta["notes"])
    assert "left out message(s) that only earlier samples hold: 1 user" in meta["notes"]


def test_give_up_keeps_a_declared_finish_call():
    threads, _, _ = read_all(str(SAMPLES / "2_ChatGPT_DFS_woFilter_w2.json"))
    [thread] = threads
    assert thread.meta["finish_type"] == "give_up" and thread.meta["win"] is False
    last = thread.messages[-1]
    assert (last.format, last.content) == ("Finish:json", '{"return_type":"give_up_and_restart"}')
    assert unenabled_formats(thread) == []


def test_files_without_a_conversation_and_unknown_roles_are_quarantined():
    _, rejected, stats = read_all(str(SAMPLES))
    assert stats.read_balanced and stats.records_read == 4 and stats.threads == 2
    codes = {r.locator.rsplit("/", 1)[1]: (r.code, r.message) for r in rejected}
    code, message = codes["3_ChatGPT_DFS_woFilter_w2.json"]
    assert code == "empty_conversation" and "valid_data is false" in message
    code, message = codes["4_ChatGPT_DFS_woFilter_w2.json"]
    assert code == "unknown_role" and "train_messages[0][3].role is 'observation'" in message


def test_an_undefined_function_is_called_with_a_note(tmp_path):
    data = orjson.loads((SAMPLES / "1_ChatGPT_DFS_woFilter_w2.json").read_bytes())
    data["answer_generation"]["function"] = data["answer_generation"]["function"][1:]
    path = tmp_path / "7_answer.json"
    path.write_bytes(orjson.dumps(data))
    [thread], _, _ = read_all(str(path))
    assert unenabled_formats(thread) == ["forecast_for_weather:json"]
    assert (
        "calls 'forecast_for_weather', which answer_generation.function does not define"
        in (thread.meta["notes"])
    )


def check_answer_files(
    folder, records: int, rejected_in: list[str], finish_types: dict[str, int]
) -> None:
    threads, rejected, stats = read_all(str(folder))
    assert stats.records_read == records and stats.read_balanced
    assert len(threads) == records - len(rejected_in)
    assert sorted(r.locator.rsplit("/", 2)[1] for r in rejected) == rejected_in
    assert {r.code for r in rejected} == {"empty_conversation"}
    finish = {}
    for thread in threads:
        missing = unenabled_formats(thread)
        assert all(
            f"calls {fmt.split(':')[0]!r}, which answer_generation.function does not define"
            in thread.meta.get("notes", [])
            for fmt in missing
        )
        finish[thread.meta["finish_type"]] = finish.get(thread.meta["finish_type"], 0) + 1
        assert thread.messages[0].content.startswith("You are AutoGPT")
        assert len(orjson.dumps(thread.meta)) < 20_000  # the search tree is not copied
    assert finish == finish_types
    assert sum(t.messages[-1].format == "Finish:json" for t in threads) == finish["give_up"]


def test_real_answer_files(data):
    # the copy holds 4 of the 15 answer files, one of them with no conversation
    folder = data / "realdata" / "toolbench" / "answer"
    check_answer_files(folder, 4, ["G1_answer"], {"give_answer": 2, "give_up": 1})


def test_all_the_real_answer_files():
    """All 15 answer files of ../shared (tests/data copies 4); skips without them."""
    shared = needs_shared("realdata/toolbench/answer")
    folder = shared / "realdata" / "toolbench" / "answer"
    check_answer_files(folder, 15, ["G1_answer", "G3_answer"], {"give_answer": 9, "give_up": 4})


def test_instruction_files_are_not_detected_as_conversations(data):
    runner = CliRunner()
    for path in sorted((data / "realdata" / "toolbench" / "instruction").glob("*.json")):
        result = runner.invoke(main, ["formats", "--detect", str(path)])
        assert result.exit_code == 0
        detected = result.output.splitlines()[0].rsplit("-> ", 1)[1]
        # query-only lists are prompts to answer; the others no format reads
        assert detected in ("unknown", "prompts"), result.output


@pytest.mark.parametrize(
    ("sample", "with_name"),
    [
        # system, user, the assistant's thought, (tool result), the final answer
        ("1_ChatGPT_DFS_woFilter_w2.json", {0: True, 2: True, 3: True, 5: False, 6: True}),
        # system, user, a call with no text (`name` clashed with the call's), the tool
        # result, the text before the kept Finish call
        ("2_ChatGPT_DFS_woFilter_w2.json", {0: True, 2: True, 3: True, 4: False, 5: True}),
    ],
)
def test_message_keys_never_set_message_fields(tmp_path, sample, with_name):
    """A Parquet round trip adds `name: null` to every message, and a stray
    `format`/`weight` key is data, not an instruction: the thread is the same as without
    them (no internal_error), and the keys are kept in the message's meta."""
    original = (SAMPLES / sample).read_bytes()
    path = tmp_path / sample  # the same path for both reads: the same thread id
    path.write_bytes(original)
    [plain], _, _ = read_all(str(path))
    data = orjson.loads(original)
    for message in data["answer_generation"]["train_messages"][-1]:
        message.setdefault("name", None)
        message |= {"format": "evil:json", "weight": 0}
    path.write_bytes(orjson.dumps(data))
    threads, rejected, _ = read_all(str(path))
    assert [(r.code, r.message) for r in rejected] == []
    [thread] = threads

    def shape(t):
        return [(m.role, m.format, m.end_turn, m.weight, m.name, m.content) for m in t.messages]

    assert shape(thread) == shape(plain)
    assert "evil:json" not in {f.name for f in thread.settings.formats}
    kept = {"format": "evil:json", "weight": 0}
    assert thread.meta["message_meta"] == {
        str(index): {"name": None, **kept} if name else kept for index, name in with_name.items()
    }
