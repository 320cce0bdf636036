"""The prompt JSON input format (seed 000): placeholders rendered with the variable
defaults, select variables expanded (capped, deterministic), the expected output enabled
as a response format, metadata in meta, the seed's own broken example quarantined with
the error position and its trailing commas forgiven with a note."""

from __future__ import annotations

from collections import Counter

import orjson
from click.testing import CliRunner

from pipeline.capabilities import enabled_formats
from pipeline.cli import main
from pipeline.formats import FORMATS
from pipeline.formats.base import ConvertOptions
from tests.conftest import REPO
from tests.reading import read_all, write_records

SAMPLES = REPO / "data_samples" / "prompt-json"
TONE = {
    "name": "tone",
    "type": "single-select",
    "default": "formal",
    "allowed_values": ["formal", "friendly", "terse"],
}
TOPICS = {
    "name": "topics",
    "type": "multi-select",
    "default": ["billing", "delivery"],
    "allowed_values": ["billing", "delivery", "returns"],
}
SELECTS = {
    "model_prompt": "Answer the customer in a {{tone}} tone about {{ topics }}.",
    "metadata": {"variables": [TONE, TOPICS]},
}


def threads_of(tmp_path, *records, **options):
    threads, rejected, _ = read_all(
        write_records(tmp_path, *records), options=ConvertOptions(**options)
    )
    assert rejected == [], rejected
    return threads


def rejection(tmp_path, record):
    threads, rejected, _ = read_all(write_records(tmp_path, record), format="prompt-json")
    assert threads == [] and len(rejected) == 1
    return rejected[0]


def prompt(**metadata):
    return {"model_prompt": "Do the task.", "metadata": metadata}


def test_samples_convert_with_the_expected_quarantine_codes():
    threads, rejected, stats = read_all(SAMPLES)
    assert stats.read_balanced and stats.records_read == 8 and len(threads) == 5
    assert Counter(r.code for r in rejected) == {
        "invalid_json": 1,
        "invalid_thread": 1,
        "missing_field": 1,
    }
    assert all(thread.meta["prompt_only"] is True for thread in threads)
    assert all(thread.messages[0].role == "developer" for thread in threads)


def test_the_seed_example_is_quarantined_with_the_position_of_its_first_error():
    _, rejected, _ = read_all(SAMPLES / "seed_example.json")
    (only,) = rejected
    assert only.code == "invalid_json"
    assert "line 8 column 61" in only.message  # the `…` after the model_version strings


def test_the_seed_example_with_only_trailing_commas_converts_with_a_note():
    threads, rejected, _ = read_all(SAMPLES / "seed_example_trailing_commas.json")
    assert rejected == []
    (thread,) = threads
    notes = thread.meta["notes"]
    assert "accepted 4 trailing comma(s), which JSON does not allow (line 8, 26, 41, 47)" in notes
    assert thread.messages[0].content == (
        "cadena de texto con marcadores de posición {{nombre_de_variable}}"
    )
    assert any("{{nombre_de_variable}} name no declared variable" in note for note in notes)
    assert thread.meta["variables"] == {
        "nombre de la variable 1": "cadena de texto",
        "nombre de la variable 2": "valor1",
        "nombre de la variable 3": "valor1, valor2",
    }
    assert thread.meta["prompt"]["parameters"]["max_tokens"] == 256


def test_defaults_render_and_multi_select_defaults_join(tmp_path):
    (thread,) = threads_of(tmp_path, SELECTS)
    assert [m.role for m in thread.messages] == ["developer"]
    assert thread.messages[0].content == (
        "Answer the customer in a formal tone about billing, delivery."
    )
    assert thread.meta["variables"] == {"tone": "formal", "topics": "billing, delivery"}
    assert thread.meta["prompt_only"] is True
    assert thread.meta["prompt"]["variables"] == [TONE, TOPICS]


def test_expand_selects_gives_one_thread_per_combination_in_declaration_order(tmp_path):
    threads = threads_of(tmp_path, SELECTS, expand_selects=100)
    assert len(threads) == 9
    assert [t.meta["variables"] for t in threads[:4]] == [
        {"tone": "formal", "topics": "billing"},
        {"tone": "formal", "topics": "delivery"},
        {"tone": "formal", "topics": "returns"},
        {"tone": "friendly", "topics": "billing"},
    ]
    assert threads[4].messages[0].content == (
        "Answer the customer in a friendly tone about delivery."
    )
    ids = [t.id for t in threads]
    assert len(set(ids)) == 9
    base = ids[0].split("?")[0]
    assert ids[0] == f"{base}?tone=formal&topics=billing"
    assert ids[-1] == f"{base}?tone=terse&topics=returns"
    assert (
        "expanded the select variable(s) 'tone', 'topics' into 9 combination(s)"
        in (threads[0].meta["notes"])
    )
    assert not any("were cut" in note for note in threads[0].meta["notes"])


def test_expand_selects_caps_and_says_how_many_were_cut(tmp_path):
    threads = threads_of(tmp_path, SELECTS, expand_selects=4)
    assert [t.meta["variables"]["tone"] for t in threads] == ["formal"] * 3 + ["friendly"]
    assert "expand_selects=4 kept 4 of 9 combinations; 5 were cut" in threads[0].meta["notes"]
    again = threads_of(tmp_path, SELECTS, expand_selects=4)
    assert [t.to_json_line() for t in again] == [t.to_json_line() for t in threads]


def test_expand_selects_from_the_cli(tmp_path):
    source = write_records(tmp_path, SELECTS)
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        main, ["convert", str(source), "-o", str(out), "--expand-selects", "2"]
    )
    assert result.exit_code == 0, result.output
    lines = [orjson.loads(line) for line in out.read_text().splitlines()]
    assert [line["meta"]["variables"]["topics"] for line in lines] == ["billing", "delivery"]
    assert {line["meta"]["source_format"] for line in lines} == {"prompt-json"}


def test_a_prompt_without_select_variables_is_one_thread_even_when_expanding(tmp_path):
    record = {"model_prompt": "Greet {{name}}.", "metadata": {"variables": [{"name": "name"}]}}
    (thread,) = threads_of(tmp_path, record, expand_selects=5)
    assert "?" not in thread.id
    assert thread.messages[0].content == "Greet {{name}}."
    assert "placeholder(s) {{name}} have no default value; left as written" in thread.meta["notes"]


def test_code_output_enables_the_language_in_backticks(tmp_path):
    (thread,) = threads_of(
        tmp_path, prompt(expected_output={"type": "code", "language": "JavaScript"})
    )
    assert thread.meta["response_format"] == "javascript"
    assert [m.role for m in thread.messages] == ["developer", "developer"]
    assert "javascript" in enabled_formats(thread.messages[1].content)


def test_a_prompt_that_already_enables_its_format_gets_no_extra_sentence(tmp_path):
    record = {
        "model_prompt": "Reply in `json` with the fields name and age.",
        "metadata": {"expected_output": {"type": "text", "format": "JSON"}},
    }
    (thread,) = threads_of(tmp_path, record)
    assert len(thread.messages) == 1 and thread.meta["response_format"] == "json"


def test_limited_output_states_the_allowed_values(tmp_path):
    (thread,) = threads_of(
        tmp_path,
        prompt(expected_output={"type": "limited", "allowed_values": ["yes", "no"]}),
    )
    declaration = thread.messages[1].content
    assert "plaintext" in enabled_formats(declaration)
    assert '"yes", "no"' in declaration
    assert thread.meta["response_format"] == "plaintext"


def test_text_output_needs_no_format_and_unknown_types_are_noted(tmp_path):
    text, unknown = threads_of(
        tmp_path,
        prompt(expected_output={"type": "text"}),
        prompt(expected_output={"type": "poem"}),
    )
    assert len(text.messages) == 1 and "response_format" not in text.meta
    assert "response_format" not in unknown.meta
    assert any("'poem' is not text, code or limited" in note for note in unknown.meta["notes"])


def test_metadata_goes_to_meta_and_an_embedded_avatar_only_as_its_hash(tmp_path):
    blob = "iVBORw0KGgo" + "A" * 400
    record = {
        "version": 7,
        "model_prompt": "Do it.",
        "metadata": {
            "prompt_name": "p",
            "creator": {"name": "Ana"},
            "parameters": {"temperature": 0.3},
            "timestamp": "2024-01-02T03:04:05Z",
            "model_version": "gpt-4",
            "avatar_type": "base64",
            "avatar": blob,
            "license": "CC-BY",
        },
        "owner": "team-a",
    }
    (thread,) = threads_of(tmp_path, record)
    meta = thread.meta
    assert meta["prompt"]["name"] == "p" and meta["prompt"]["version"] == 7
    assert meta["prompt"]["creator"] == {"name": "Ana"}
    assert meta["prompt"]["parameters"] == {"temperature": 0.3}
    assert meta["prompt"]["avatar"]["chars"] == len(blob)
    assert len(meta["prompt"]["avatar"]["sha256"]) == 64
    assert blob.encode() not in thread.to_json_line()
    assert meta["extra_fields"] == {"metadata.license": "CC-BY", "owner": "team-a"}


def test_schema_errors_name_the_path(tmp_path):
    wrong_type = rejection(tmp_path, prompt(parameters={"temperature": "hot"}))
    assert wrong_type.code == "missing_field"
    assert wrong_type.message == "metadata.parameters.temperature: 'hot' is not of type 'number'"
    bad_kind = rejection(
        tmp_path,
        {"model_prompt": "x {{d}}", "metadata": {"variables": [{"name": "d", "type": "date"}]}},
    )
    assert bad_kind.code == "invalid_thread"
    assert bad_kind.message.startswith("metadata.variables[0].type: 'date' is not one of")
    empty = rejection(tmp_path, {"model_prompt": ""})
    assert empty.code == "invalid_thread" and empty.message.startswith("model_prompt: ''")


def test_placeholder_values_are_substituted_once_never_evaluated(tmp_path):
    record = {
        "model_prompt": "{{a}} and {{b}}",
        "metadata": {
            "variables": [
                {"name": "a", "default": "{{b}}"},
                {"name": "b", "default": "{{ ''.__class__.__mro__ }}"},
            ]
        },
    }
    (thread,) = threads_of(tmp_path, record)
    assert thread.messages[0].content == "{{b}} and {{ ''.__class__.__mro__ }}"


def test_sniff_is_sure_only_for_a_string_model_prompt():
    sniff = FORMATS["prompt-json"].sniff
    assert sniff({"model_prompt": "x"}).score == 1.0
    assert sniff({"model_prompt": ["x"]}).score == 0.0
    assert sniff({"prompt": "x"}).score == 0.0
