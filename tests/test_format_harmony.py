"""The Harmony format (gpt-oss transcripts), in and out: the samples and the real files
convert; rendering a parsed transcript gives it back (exactly, where the grammar allows);
generated transcripts and parameter schemas survive the round trip; bad transcripts are
quarantined with their codes; `mms convert --from harmony` and `mms export --to harmony`.

`.txt` transcripts are read here as the sources hook reads them (a whole-file
TextDocument of kind `harmony`, pipeline/sources/harmony_files.py), so these tests do not
depend on the hook being installed."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import pipeline.cli
from pipeline.cli import main
from pipeline.formats import FORMATS, ConvertOptions
from pipeline.formats.harmony.mapping import Kind, canonical_header
from pipeline.formats.harmony.render import HarmonyRenderError, thread_to_harmony
from pipeline.formats.harmony.tools import Namespace, write_tools_section
from pipeline.formats.harmony.transcript import CALL, END, RETURN, format_message
from pipeline.formats.harmony.ts_schema import read_declarations, write_declaration
from pipeline.mms import Message, Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import ReadLimits, Record, TextDocument
from pipeline.sources.compression import open_binary
from pipeline.sources.harmony_files import HARMONY_KIND, is_harmony_file, starts_like_harmony
from pipeline.sources.text_documents import iter_text_document
from tests.conftest import REPO
from tests.reading import read_all, unenabled_formats, write_records

HARMONY = FORMATS["harmony"]
SAMPLES = REPO / "data_samples" / "harmony"
REAL = "formats/harmony"
REAL_FILES = (
    "test-data__test_browser_and_function_tool.txt",
    "test-data__test_render_functions_with_parameters.txt",
    "test-data__test_tool_response_parsing.txt",
)
EXACT_SAMPLES = ("weather_tool_call.txt", "prompt_only.txt")
"""Samples in the openai/harmony renderer's own layout: rendered back byte for byte."""


def text_record(path: Path) -> Record:
    """A `.txt` transcript read whole, as the sources hook reads it."""
    with open_binary(str(path)) as stream:
        (record,) = iter_text_document(str(path), stream, ReadLimits(), HARMONY_KIND)
    assert isinstance(record, Record)
    return record


def convert(value: Any, options: ConvertOptions | None = None) -> Thread:
    """The one thread of a record (a transcript, a TextDocument or a JSON record)."""
    (thread,) = HARMONY.to_threads(
        Record("t.jsonl", "t.jsonl:1", value), options or ConvertOptions()
    )
    return thread


def reread(thread: Thread, source: Record) -> Thread:
    """The thread rendered to Harmony and read again from where it came from."""
    text = thread_to_harmony(thread)
    value = source.value
    if isinstance(value, TextDocument):
        value = TextDocument(HARMONY_KIND, text)
    elif isinstance(value, dict):
        value = {**value, "text": text}
    else:
        value = text
    (again,) = HARMONY.to_threads(Record(source.source, source.locator, value), ConvertOptions())
    return again


def same(first: Thread, second: Thread) -> bool:
    """Equal threads, but for notes about the source's irregularities (an unterminated
    message is closed when written back)."""
    a, b = first.to_dict(), second.to_dict()
    for data in (a, b):
        data["meta"].pop("notes", None)
    return a == b


def shape(thread: Thread) -> list[tuple[str, str | None]]:
    return [(m.role, m.format if m.role == "assistant" else m.name) for m in thread.messages]


# ----------------------------------------------------------------------------- samples


def test_sample_transcripts_convert_with_tools_reasoning_results_and_prompts():
    weather = HARMONY.to_threads(text_record(SAMPLES / "weather_tool_call.txt"), ConvertOptions())
    (thread,) = weather
    assert shape(thread) == [
        ("platform", None),
        ("developer", None),
        ("developer", None),
        ("user", None),
        ("assistant", "reasoning"),
        ("assistant", "get_current_weather:json"),
        ("context", "get_current_weather"),
        ("assistant", "markdown"),
    ]
    assert thread.messages[1].content == "Use a friendly tone and answer in one sentence."
    assert "`get_current_weather:json`" in thread.messages[2].content
    assert thread.messages[5].content == '{"format":"celsius","location":"Tokyo, Japan"}'
    assert thread.meta["tool_schemas"]["get_current_weather"]["properties"]["format"] == {
        "type": "string",
        "enum": ["celsius", "fahrenheit"],
        "default": "celsius",
    }
    assert unenabled_formats(thread) == []
    assert [m.end_turn for m in thread.messages if m.role == "assistant"] == [False, False, True]

    (browser,) = HARMONY.to_threads(
        text_record(SAMPLES / "browser_builtin_tool.txt"), ConvertOptions()
    )
    assert ("assistant", "browser.search:json") in shape(browser)
    assert ("context", "browser.search") in shape(browser)
    assert browser.meta["message_meta"]["4"] == {
        "harmony": {"channel": "analysis", "content_type": "code"}
    }
    assert unenabled_formats(browser) == []

    (prompt,) = HARMONY.to_threads(text_record(SAMPLES / "prompt_only.txt"), ConvertOptions())
    assert prompt.meta["prompt_only"] is True and prompt.messages[-1].role == "user"


def test_jsonl_records_hold_transcripts_as_text_fields_or_bare_strings():
    threads, rejected, stats = read_all(SAMPLES / "records.jsonl")
    assert set(stats.formats.values()) == {"harmony"} and stats.read_balanced
    assert [t.id for t in threads][0::2] == ["two-calls-1", "json-answer-1"]
    two_calls = threads[0]
    assert two_calls.meta["extra_fields"] == {"dataset": "hand-written"}
    assert two_calls.meta["message_meta"]["4"] == {"harmony": {"channel": "commentary"}}
    assert ("assistant", "markdown") in shape(threads[1])
    assert shape(threads[2])[-1] == ("assistant", "json")
    assert sorted(r.code for r in rejected) == ["invalid_tools", "unknown_role"]
    for thread in threads:
        assert unenabled_formats(thread) == []


def test_reasoning_is_dropped_on_request():
    text = (SAMPLES / "weather_tool_call.txt").read_text()
    kept = convert(text)
    dropped = convert(text, ConvertOptions(reasoning="drop"))
    assert len(dropped.messages) == len(kept.messages) - 1
    assert all(m.format != "reasoning" for m in dropped.messages)
    assert "dropped the assistant's reasoning (--reasoning drop)" in dropped.meta["notes"]


@pytest.mark.parametrize(
    "name", sorted(p.name for p in SAMPLES.glob("*.txt") if "bad" not in p.name)
)
def test_sample_transcripts_read_back_the_same_and_canonical_ones_byte_for_byte(name):
    record = text_record(SAMPLES / name)
    (thread,) = HARMONY.to_threads(record, ConvertOptions())
    assert same(reread(thread, record), thread)
    if name in EXACT_SAMPLES:
        assert thread_to_harmony(thread) == record.value.text.rstrip("\n")


# ----------------------------------------------------------------------------- real files


def real_path(data: Path, name: str) -> Path:
    return data / REAL / name


@pytest.mark.parametrize("name", REAL_FILES)
def test_every_real_file_converts_and_reads_back_the_same(data, name):
    record = text_record(real_path(data, name))
    assert HARMONY.sniff(record.value).score == 1.0
    assert is_harmony_file(str(real_path(data, name)))
    (thread,) = HARMONY.to_threads(record, ConvertOptions())
    assert unenabled_formats(thread) == []
    again = reread(thread, record)
    assert same(again, thread)
    assert thread_to_harmony(again) == thread_to_harmony(thread)


def test_real_files_render_back_to_their_text_but_for_what_the_grammar_drops(data):
    """Byte for byte, except: the newline after the closing generation prompt (blank
    space outside messages), and the `<|end|>` a message cut short by the end of the
    file gets."""
    for name in REAL_FILES:
        text = real_path(data, name).read_text()
        rendered = thread_to_harmony(convert(TextDocument(HARMONY_KIND, text)))
        if name == "test-data__test_tool_response_parsing.txt":
            assert rendered == text + END
        else:
            assert rendered == text.rstrip("\n")


def test_real_browser_and_function_tools(data):
    thread = convert(text_record(real_path(data, REAL_FILES[0])).value)
    assert shape(thread) == [("platform", None), ("developer", None)]
    assert thread.meta["prompt_only"] is True
    assert [f.name for f in thread.settings.formats] == [
        "browser.search:json",
        "browser.open:json",
        "browser.find:json",
        "lookup_weather:json",
    ]
    assert thread.messages[0].content.startswith("You are ChatGPT")
    assert "namespace browser {" in thread.messages[0].content  # the platform's own text
    assert thread.meta["tool_schemas"]["browser.open"]["properties"]["id"] == {
        "type": ["number", "string"],
        "default": -1,
    }


def test_real_kitchensink_parameters_become_json_schema(data):
    thread = convert(text_record(real_path(data, REAL_FILES[1])).value)
    assert thread.messages[1].content == "Always respond in riddles"
    schemas = thread.meta["tool_schemas"]
    assert "get_location" not in schemas  # `() => any`: no parameters
    assert thread.meta["tool_descriptions"]["get_location"] == "Gets the location of the user."
    assert schemas["kitchensink"] == {
        "type": "object",
        "description": "params object",
        "properties": {
            "string": {
                "type": "string",
                "title": "STRING",
                "description": "A string",
                "examples": ["hello", "world"],
            },
            "string_nullable": {
                "type": ["string", "null"],
                "description": "A nullable string",
                "default": "the default",
            },
            "string_enum": {"type": "string", "enum": ["a", "b", "c"]},
            "oneof_string_or_number": {
                "description": "a oneof",
                "default": 20,
                "oneOf": [
                    {"type": "string", "default": "default_string_in_oneof"},
                    {"type": "number", "description": "numbers can happen too"},
                ],
            },
        },
    }


def test_real_lone_tool_response_without_closing_token(data):
    thread = convert(text_record(real_path(data, REAL_FILES[2])).value)
    assert thread.messages == [
        Message.context('{"result": "https://openai.com/"} ', "browser.search")
    ]
    assert any("no closing token" in note for note in thread.meta["notes"])


# ----------------------------------------------------------------------------- rejections


DEVELOPER_TOOLS = "<|start|>developer<|message|># Tools\n\n## functions\n\n{body}<|end|>"


@pytest.mark.parametrize(
    ("text", "code", "says"),
    [
        ("<|start|>user What?<|end|>", "missing_field", "has no <|message|>"),
        ("<|start|>user<|message|>a<|end|>junk", "missing_field", "text outside any message"),
        ("hello<|start|>user<|message|>a<|end|>", "missing_field", "before message 1"),
        (
            "<|start|>user<|message|>a<|start|>assistant<|message|>b<|end|>",
            "missing_field",
            "is not closed",
        ),
        ("<|start|>user<|message|>a<|end|><|start|>user", "missing_field", "generation prompt is"),
        ("<|start|><|message|>a<|end|>", "missing_field", "names no role"),
        ("<|start|>assistant<|channel|><|message|>a<|end|>", "missing_field", "channel name"),
        ("<|start|>assistant to=x a b<|message|>{}<|call|>", "missing_field", "unexpected words"),
        ("<|start|>robot<|message|>beep<|end|>", "unknown_role", "'robot'"),
        ("<|start|>tool<|message|>42<|end|>", "unknown_role", "'tool'"),
        (
            DEVELOPER_TOOLS.format(
                body="namespace functions {\n\ntype f = (_: {\nx string,\n}) => any;\n"
            ),
            "invalid_tools",
            "never closed",
        ),
        (
            DEVELOPER_TOOLS.format(
                body="namespace functions {\n\ntype f = (_: {\nx string,\n}) => any;\n\n} // namespace functions"
            ),
            "invalid_tools",
            "expected ':'",
        ),
        (
            DEVELOPER_TOOLS.format(
                body="namespace tools {\n\ntype f = () => any;\n\n} // namespace tools"
            ),
            "invalid_tools",
            "holds `namespace tools`",
        ),
        (
            DEVELOPER_TOOLS.format(
                body="namespace functions {\n\ntype f = (_: Promise<string>) => any;\n\n} // namespace functions"
            ),
            "invalid_tools",
            "expected a type",
        ),
        ("", "empty_conversation", "no messages"),
        ("<|start|>assistant", "empty_conversation", "no messages"),
    ],
)
def test_bad_transcripts_are_rejected_with_a_stable_code(text, code, says):
    with pytest.raises(RecordRejected) as caught:
        convert(text)
    assert caught.value.code == code
    assert says in caught.value.message


@pytest.mark.parametrize(
    ("value", "code"),
    [(42, "not_an_object"), ({"text": 5}, "missing_field"), ([], "not_an_object")],
)
def test_records_without_a_transcript_are_rejected(value, code):
    with pytest.raises(RecordRejected) as caught:
        convert(value)
    assert caught.value.code == code


def test_the_malformed_sample_is_quarantined():
    with pytest.raises(RecordRejected) as caught:
        HARMONY.to_threads(text_record(SAMPLES / "bad_unterminated_header.txt"), ConvertOptions())
    assert caught.value.code == "missing_field"


# ----------------------------------------------------------------------------- sniff


@pytest.mark.parametrize(
    "value",
    [
        "<|start|>user<|message|>hi<|end|>",
        "\n  <|start|>user<|message|>hi<|end|>",
        {"text": "<|start|>user<|message|>hi<|end|>", "id": 3},
        TextDocument(HARMONY_KIND, "<|start|>user<|message|>hi<|end|>"),
    ],
)
def test_sniff_is_sure_of_text_starting_with_start(value):
    assert HARMONY.sniff(value).score == 1.0


@pytest.mark.parametrize(
    "value",
    [
        "<|im_start|>user\nhi<|im_end|>",
        {"messages": [{"role": "user", "content": "<|start|>"}]},
        {"text": "USER: hi"},
        TextDocument("ppe", "<|start|>user<|message|>hi<|end|>"),
        "say <|start|> later",
        None,
        42,
    ],
)
def test_sniff_declines_everything_else(value):
    assert HARMONY.sniff(value).score == 0.0


def test_harmony_files_are_told_by_their_first_bytes(tmp_path):
    harmony = tmp_path / "chat.txt"
    harmony.write_bytes(b"\xef\xbb\xbf\n<|start|>user<|message|>hi<|end|>")
    packed = tmp_path / "chat.txt.gz"
    packed.write_bytes(gzip.compress(b"<|start|>user<|message|>hi<|end|>"))
    notes = tmp_path / "PROVENANCE.txt"
    notes.write_text("# where these files come from\n")
    assert is_harmony_file(str(harmony)) and is_harmony_file(str(packed))
    assert not is_harmony_file(str(notes)) and not is_harmony_file(str(tmp_path / "gone.txt"))
    assert not starts_like_harmony(b"<|im_start|>")


# ----------------------------------------------------------------------------- rendering


def test_threads_from_other_formats_render_with_canonical_headers():
    thread = Thread(
        "t1",
        [
            Message.developer("Be brief."),
            Message.user("Weather in Oslo?"),
            Message.assistant("Look it up.", format="reasoning", end_turn=False),
            Message.assistant('{"city":"Oslo"}', format="get_weather:json", end_turn=False),
            Message.context('{"temp": 3}', "get_weather"),
            Message.assistant("3 °C."),
        ],
    )
    assert thread_to_harmony(thread) == (
        "<|start|>developer<|message|># Instructions\n\nBe brief.<|end|>"
        "<|start|>user<|message|>Weather in Oslo?<|end|>"
        "<|start|>assistant<|channel|>analysis<|message|>Look it up.<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json"
        '<|message|>{"city":"Oslo"}<|call|>'
        "<|start|>functions.get_weather to=assistant<|channel|>commentary"
        '<|message|>{"temp": 3}<|end|>'
        "<|start|>assistant<|channel|>final<|message|>3 °C.<|return|>"
    )


def test_jsonl_calls_are_written_one_call_each():
    thread = Thread(
        "t2",
        [
            Message.user("Two cities."),
            Message.assistant('{"city":"A"}\n{"city":"B"}', format="w:jsonl", end_turn=False),
        ],
    )
    assert thread_to_harmony(thread).count(CALL) == 2


@pytest.mark.parametrize(
    ("message", "says"),
    [
        (Message.context("retrieved text"), "without a name"),
        (Message.user("a <|end|> inside"), "<|end|>"),
        (Message.assistant("x", format="bad name"), "cannot be written"),
    ],
)
def test_threads_harmony_cannot_hold_are_refused(message, says):
    with pytest.raises(HarmonyRenderError, match=says):
        thread_to_harmony(Thread("t3", [Message.user("hi"), message]))


def test_kept_header_deviations_are_ignored_once_they_no_longer_fit():
    thread = convert(
        "<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>commentary<|message|>Working on it.<|end|>"
    )
    assert thread.meta["message_meta"]["1"] == {"harmony": {"channel": "commentary"}}
    thread.messages[1] = Message.assistant("plan", format="reasoning")
    thread.meta["message_meta"]["1"] = {"harmony": {"channel": "final"}}  # would make it an answer
    assert "<|channel|>analysis<|message|>plan" in thread_to_harmony(thread)


# ----------------------------------------------------------------------------- properties

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ABC,.()'", min_size=1, max_size=30).map(
    lambda s: " ".join(s.split()) or "x"
)
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
CONTENT = st.text(max_size=40).filter(lambda s: "<|" not in s)
INT64 = st.integers(-(2**63), 2**63 - 1)
"""Call arguments' integers: the builder reads larger ones as floats (orjson)."""
PRIMITIVE = st.sampled_from(
    [
        {"type": "string"},
        {"type": "number"},
        {"type": "boolean"},
        {"type": ["string", "null"]},
        {"type": "array"},
        {},
    ]
) | st.lists(NAMES, min_size=1, max_size=3, unique=True).map(
    lambda values: {"type": "string", "enum": values}
)


def _default_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A default value the schema's type allows (none for open or composite types)."""
    if schema.get("enum"):
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string" or kind == ["string", "null"]:
        return WORDS
    if kind == "number":
        return st.integers(-5, 500)
    if kind == "boolean":
        return st.booleans()
    return st.nothing()


@st.composite
def _annotated(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """The schema, maybe with a description and a default."""
    schema = dict(schema)
    if draw(st.booleans()):
        schema["description"] = draw(WORDS)
    default = draw(st.none() | _default_for(schema))
    if default is not None:
        schema["default"] = default
    return schema


@st.composite
def _one_of(draw: st.DrawFn) -> dict[str, Any]:
    """A property of several variants (the ` | variant // comment` lines)."""
    variants = draw(st.lists(PRIMITIVE.flatmap(_annotated), min_size=2, max_size=3))
    schema = {"oneOf": variants}
    described = draw(st.none() | WORDS)
    if described is not None:
        schema["description"] = described
    default = draw(st.none() | st.integers(0, 9))
    return schema if default is None else {**schema, "default": default}


def _object(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    def build(props: dict[str, Any], optional: set[str]) -> dict[str, Any]:
        if not props:
            return {"type": "object"}
        schema: dict[str, Any] = {"type": "object", "properties": props}
        required = [key for key in props if key not in optional]
        return {**schema, "required": required} if required else schema

    properties = children.flatmap(_annotated) | _one_of()
    return st.dictionaries(NAMES, properties, max_size=3).flatmap(
        lambda props: st.sets(st.sampled_from(sorted(props)) if props else st.nothing()).map(
            lambda optional: build(props, optional)
        )
    )


SCHEMAS = st.recursive(
    PRIMITIVE,
    lambda inner: _object(inner) | inner.map(lambda items: {"type": "array", "items": items}),
    max_leaves=6,
)
TOOLS = st.dictionaries(
    NAMES, st.tuples(st.none() | WORDS, st.none() | _object(SCHEMAS)), max_size=3
)


@given(schema=_object(SCHEMAS), description=st.none() | WORDS)
@settings(max_examples=150)
def test_parameter_schemas_survive_harmony_typescript(schema, description):
    declared = read_declarations(write_declaration("tool", description, schema))
    assert [(d.name, d.description, d.parameters) for d in declared] == [
        ("tool", description, schema)
    ]


def _namespace(name: str, description: str | None, tools: dict[str, Any]) -> Namespace:
    text = "\n".join(write_declaration(n, d, p) + "\n" for n, (d, p) in tools.items())
    return Namespace(name, description, tuple(read_declarations(text)))


def _header(kind: Kind, draw: st.DrawFn, *changes: dict[str, Any]) -> Any:
    """The kind's canonical header, or one of the `changes` a source may make to it."""
    header = canonical_header(kind)
    return dataclasses.replace(header, **draw(st.sampled_from([{}, *changes])))


@st.composite
def transcripts(draw: st.DrawFn) -> str:
    """A transcript in the openai/harmony renderer's layout: maybe a system message with
    a built-in `browser` namespace, maybe a developer message with instructions (or
    plain text) and function tools, then turns of user text, reasoning, answers and
    preambles, calls and their results (some headers written as sources write them);
    a closing answer or generation prompt."""
    parts, callable_tools = [], []
    builtin = draw(TOOLS)
    if draw(st.booleans()):
        system = draw(CONTENT)
        if builtin:
            section = write_tools_section([_namespace("browser", draw(st.none() | WORDS), builtin)])
            system = f"{system}\n\n{section}\n\n# Valid channels: analysis, commentary, final."
            callable_tools += [f"browser.{name}" for name in builtin]
        parts.append(format_message(canonical_header(Kind("platform")), system, END))
    functions = draw(TOOLS)
    callable_tools += sorted(functions)
    instructions = draw(st.none() | CONTENT)
    sections = [] if instructions is None else [f"# Instructions\n\n{instructions}"]
    if functions:
        sections.append(write_tools_section([_namespace("functions", None, functions)]))
    if sections:
        parts.append(
            format_message(canonical_header(Kind("developer")), "\n\n".join(sections), END)
        )
    elif draw(st.booleans()):
        parts.append(format_message(canonical_header(Kind("developer")), draw(CONTENT), END))
    parts.append(format_message(canonical_header(Kind("user")), draw(CONTENT), END))
    answer = Kind("answer", "markdown")
    for turn in draw(
        st.lists(st.sampled_from(["user", "reasoning", "answer", "call"]), max_size=6)
    ):
        if turn == "call" and callable_tools:
            tool = draw(st.sampled_from(callable_tools))
            arguments = draw(st.dictionaries(NAMES, INT64 | NAMES, max_size=2))
            text = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
            call = _header(
                Kind("call", tool), draw, {"channel": "analysis"}, {"content_type": "code"}
            )
            parts.append(format_message(call, text, CALL))
            result = _header(
                Kind("result", tool), draw, {"recipient": None}, {"channel": "analysis"}
            )
            parts.append(format_message(result, draw(CONTENT), END))
        elif turn in ("user", "reasoning"):
            parts.append(format_message(canonical_header(Kind(turn)), draw(CONTENT), END))
        elif turn == "answer":
            header = _header(answer, draw, {"channel": "commentary"}, {"channel": None})
            parts.append(format_message(header, draw(CONTENT), END))
    ending = draw(st.sampled_from(["answer", "assistant", "assistant<|channel|>final"]))
    if ending == "answer":
        return "".join(parts) + format_message(canonical_header(answer), draw(CONTENT), RETURN)
    return "".join(parts) + "<|start|>" + ending


@given(text=transcripts())
@settings(max_examples=200)
def test_generated_threads_render_to_their_transcript_and_read_back_equal(text):
    record = Record("generated.jsonl", "generated.jsonl:1", {"id": "generated", "text": text})
    (thread,) = HARMONY.to_threads(record, ConvertOptions())
    assert unenabled_formats(thread) == []
    assert thread_to_harmony(thread) == text
    assert same(reread(thread, record), thread)


# ----------------------------------------------------------------------------- command line


def test_mms_convert_from_harmony(tmp_path):
    out = tmp_path / "threads.jsonl"
    result = CliRunner().invoke(
        main, ["convert", str(SAMPLES / "records.jsonl"), "--from", "harmony", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "Check: 5 read = 3 converted + 2 quarantined" in result.output
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [line["meta"]["source_format"] for line in lines] == ["harmony"] * 3
    rejected = (tmp_path / "threads.rejected.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["code"] for line in rejected) == [
        "invalid_tools",
        "unknown_role",
    ]


@pytest.fixture
def export_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """`mms export` registered, as pipeline/cli/__init__.py will register it."""
    monkeypatch.setitem(pipeline.cli.COMMANDS, "export", "pipeline.cli.export:export_command")


def converted(tmp_path: Path) -> Path:
    out = tmp_path / "threads.jsonl"
    result = CliRunner().invoke(
        main, ["convert", str(SAMPLES / "records.jsonl"), "--from", "harmony", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    return out


def test_mms_export_writes_jsonl_that_reads_back_as_the_same_threads(tmp_path, export_command):
    threads = converted(tmp_path)
    out = tmp_path / "harmony.jsonl"
    result = CliRunner().invoke(main, ["export", str(threads), "--to", "harmony", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "Wrote 3 harmony transcripts" in result.output and "✓" in result.output
    exported = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [line["id"] for line in exported][0::2] == ["two-calls-1", "json-answer-1"]
    again, rejected, _ = read_all(out, format="harmony")
    first, _, _ = read_all(threads, format="mms")
    assert rejected == [] and [t.messages for t in again] == [t.messages for t in first]
    assert [t.id for t in again] == [t.id for t in first]


def test_mms_export_to_a_folder_and_to_standard_output(tmp_path, monkeypatch, export_command):
    monkeypatch.chdir(tmp_path)  # standard output's quarantine file would go here
    threads = converted(tmp_path)
    folder = tmp_path / "transcripts"
    result = CliRunner().invoke(main, ["export", str(threads), "-o", str(folder)])
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 3 and "two-calls-1.txt" in names
    assert all(is_harmony_file(str(folder / name)) for name in names)
    text = (folder / "two-calls-1.txt").read_text()
    assert text.startswith("<|start|>developer<|message|># Instructions")
    stdout = CliRunner().invoke(main, ["export", str(threads), "-o", "-"])
    assert stdout.exit_code == 0
    lines = [json.loads(line) for line in stdout.output.splitlines() if line.startswith("{")]
    assert {line["id"]: line["text"] for line in lines}["two-calls-1"] == text


def test_mms_export_names_the_threads_it_leaves_out(tmp_path, export_command):
    good = Thread("good", [Message.user("hi"), Message.assistant("hello")])
    unnamed = Thread("rag-1", [Message.context("a document"), Message.user("summarise it")])
    source = write_records(tmp_path, good.to_dict(), unnamed.to_dict(), name="threads.jsonl")
    out = tmp_path / "h.jsonl"
    result = CliRunner().invoke(main, ["export", str(source), "-o", str(out), "--strict"])
    assert result.exit_code == 1
    assert "Left out 1 thread with no harmony form" in result.output
    assert "rag-1: message 0 (context) is a context message without a name" in result.output
    assert "2 threads = 1 written + 1 left out ✓" in result.output
    assert len(out.read_bytes().splitlines()) == 1


def test_mms_export_refuses_a_txt_output_and_missing_inputs(tmp_path, export_command):
    result = CliRunner().invoke(main, ["export", str(tmp_path / "x.jsonl"), "-o", "one.txt"])
    assert result.exit_code == 2 and "one transcript" in result.output
    folder = tmp_path / "out"
    result = CliRunner().invoke(main, ["export", str(tmp_path / "gone.jsonl"), "-o", str(folder)])
    assert result.exit_code == 2 and "no such file" in result.output
    assert not folder.exists()


def test_threads_of_other_formats_export_with_their_tool_descriptions(tmp_path):
    """Every adapter keeps what each declared tool does in `meta.tool_descriptions`, so
    a Harmony transcript written from an OpenAI or ShareGPT thread describes its tools."""
    from pipeline import convert

    out = tmp_path / "threads.jsonl"
    convert(
        [str(REPO / "data_samples" / "openai"), str(REPO / "data_samples" / "sharegpt")],
        out,
        quarantine=tmp_path / "rejected.jsonl",
    )
    described = [
        Thread.from_dict(orjson.loads(line))
        for line in out.read_bytes().splitlines()
        if b"tool_descriptions" in line
    ]
    assert len(described) >= 3
    for thread in described:
        text = thread_to_harmony(thread)
        for description in thread.meta["tool_descriptions"].values():
            assert f"// {description.splitlines()[0]}" in text, thread.id
