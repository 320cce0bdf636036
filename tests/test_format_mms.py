"""The MMS input format through the public API: samples, the spec repository's example
file, lineage, kept extras, and invalid threads rejected with every field at fault."""

from __future__ import annotations

import orjson
import pyarrow.parquet as pq

import pipeline
from pipeline import Message, Thread
from tests.conftest import REPO
from tests.reading import read_all


def test_samples_cover_every_role_settings_and_multi_message_turns():
    threads, rejected, stats = read_all(str(REPO / "data_samples" / "mms"))
    assert rejected == [] and stats.read_balanced and stats.threads == len(threads) == 8
    roles = {m.role for t in threads for m in t.messages}
    assert roles == {"platform", "developer", "user", "assistant", "context"}
    assert any(m.name for t in threads for m in t.messages if m.role == "context")
    formats = [f for t in threads if t.settings for f in t.settings.formats]
    assert any(f.halt_on_completion for f in formats)
    assert {f.sampler for f in formats if isinstance(f.sampler, str)} == {"json", "jsonl"}
    assert any(isinstance(f.sampler, dict) for f in formats)
    assert any(
        a.role == b.role == "assistant" and a.end_turn is False
        for t in threads
        for a, b in zip(t.messages, t.messages[1:], strict=False)
    )


def test_spec_repository_shape_keeps_extras_in_meta():
    path = (REPO / "data_samples" / "mms" / "spec_repository_shape.json").as_posix()
    threads, rejected, _ = read_all(path)
    assert rejected == []
    first = threads[0]
    assert first.messages[3] == Message.context(
        "sonder (noun): the realization that each passerby has a life as vivid and complex as your own."
    )
    assert first.meta["extra_fields"] == {"messages[2].halted_on_completion": True}
    # lineage names the file relative to the input named: a file input by its base name
    name = "spec_repository_shape.json"
    assert first.meta["source"] == name and first.meta["locator"] == f"{name}#0"
    assert first.meta["source_format"] == "mms"
    again, _, _ = read_all(path)
    assert [t.id for t in again] == [t.id for t in threads]  # stable ids from (source, locator)
    assert len({t.id for t in threads}) == 2


def test_real_spec_example_file_gives_five_valid_threads(data):
    # tests/data holds a stand-in of the same shape (see its PROVENANCE.txt)
    threads, rejected, stats = read_all(str(data / "formats" / "mms" / "src__example.json"))
    assert rejected == [] and len(threads) == 5 and stats.records_read == 5
    for thread in threads:
        thread.validate()
        assert thread.messages[0].role == "developer"
        assert thread.messages[-1].end_turn is True
        halted = [k for k in thread.meta["extra_fields"] if k.endswith("halted_on_completion")]
        assert halted, thread.meta
    tool_calls = [
        m for t in threads for m in t.messages if m.role == "assistant" and not m.end_turn
    ]
    assert {m.format for m in tool_calls} >= {"search:json", "browse:js", "translate:json"}


def test_rereading_output_moves_old_lineage_to_upstream(tmp_path):
    out = tmp_path / "threads.jsonl"
    pipeline.convert([str(REPO / "data_samples" / "mms")], out)
    threads, rejected, _ = read_all(out.as_posix())
    assert rejected == []
    assert threads[0].meta["locator"] == "threads.jsonl:1"
    assert threads[0].meta["upstream"]["locator"].endswith("spec_repository_shape.json#0")


def test_own_parquet_output_reads_back(tmp_path):
    threads, _, _ = read_all(str(REPO / "data_samples" / "mms"))
    path = tmp_path / "threads.parquet"
    pq.write_table(pipeline.threads_to_arrow(threads), path)
    back, rejected, _ = read_all(path.as_posix())
    assert rejected == []
    assert [t.messages for t in back] == [t.messages for t in threads]
    assert [t.settings for t in back] == [t.settings for t in threads]
    assert back[2].meta["upstream"] == {
        k: threads[2].meta[k] for k in ("source", "locator", "source_format")
    }


def test_invalid_threads_are_rejected_with_every_field(tmp_path):
    path = tmp_path / "t.jsonl"
    lines = [
        {"id": 7, "messages": [{"role": "user", "content": "hi"}]},
        {
            "messages": [
                {"role": "user", "content": "x", "format": "json"},
                {"role": "assistant", "content": "y", "end_turn": "yes"},
            ]
        },
        "a bare string",
        {"id": "n", "messages": [{"role": "user", "content": "x", "format": None}]},
    ]
    path.write_bytes(b"\n".join(orjson.dumps(line) for line in lines))
    threads, rejected, stats = read_all(path.as_posix(), format="mms")
    assert [t.id for t in threads] == ["7", "n"]
    assert [(r.locator, r.code) for r in rejected] == [
        (f"{path.as_posix()}:2", "invalid_thread"),
        (f"{path.as_posix()}:3", "not_an_object"),
    ]
    assert [d["path"] for d in rejected[0].details] == [
        "messages[0].format",
        "messages[1].end_turn",
    ]
    assert rejected[0].stage == "normalize:mms"
    assert stats.read_balanced and stats.records_read == 4


def test_thread_built_in_python_round_trips_through_read(tmp_path):
    thread = Thread("x", [Message.developer("Use `json`."), Message.assistant("{}", format="json")])
    path = tmp_path / "one.jsonl"
    path.write_bytes(thread.to_json() + b"\n")
    (back,), _, _ = read_all(path.as_posix())
    assert back.messages == thread.messages and back.id == "x"


def test_odd_meta_in_the_input_is_kept_not_a_crash(tmp_path):
    path = tmp_path / "t.jsonl"
    record = {
        "messages": [{"role": "user", "content": "x", "lang": "en"}],
        "meta": {"notes": "a string note", "extra_fields": 5, "source": "crawl-7"},
    }
    path.write_bytes(orjson.dumps(record))
    (thread,), rejected, _ = read_all(path.as_posix())
    assert rejected == []
    assert thread.meta["notes"] == ["a string note", "kept 1 non-MMS field(s) in meta.extra_fields"]
    assert thread.meta["extra_fields"] == {"meta.extra_fields": 5, "messages[0].lang": "en"}
    assert thread.meta["upstream"] == {"source": "crawl-7"}
