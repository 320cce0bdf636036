"""PPE `.ai.yaml` scripts: the pre-parser (separators, chains, repeated role keys, the list
form, `!fn` blocks, directives, `$if`), dialogues and branches as threads, generation
slots as prompt-only threads, characters, templates with front-matter defaults, JSON
answers, unrenderable constructs, specific errors, scripts of the real ones' shapes
(stand-ins in tests/data), and every real script (../shared)."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest
from click.testing import CliRunner

from pipeline.capabilities import enabled_formats
from pipeline.cli import main
from pipeline.formats import FORMATS
from pipeline.formats.ppe import parse_script
from pipeline.formats.ppe.steps import (
    Chain,
    Conditional,
    Directive,
    Function,
    Message,
    Separator,
)
from pipeline.quarantine import RecordRejected
from pipeline.sources import TextDocument
from tests.conftest import REPO, needs_shared
from tests.reading import read_all

SAMPLES = REPO / "data_samples" / "ppe"
PPE = "formats/ppe"
ORIGINALS = (
    "examples__char-dobby.ai.yaml",
    "examples__extract-calc-result.ai.yaml",
    "examples__recipe.ai.yaml",
    "examples__resolve-math-problem.ai.yaml",
    "examples__split-text-paragraphs__split-text-paragraphs.qwen25-7b.ai.yaml",
    "examples__translator-simple.ai.yaml",
    "lib__char.ai.yaml",
    "lib__input.ai.yaml",
    "lib__translator.ai.yaml",
)
"""The offline-ai/cli scripts of ../shared/formats/ppe."""


def convert(tmp_path, text, name="script.ai.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return read_all(path)[:2]


def threads_of(tmp_path, text):
    threads, rejected = convert(tmp_path, text)
    assert rejected == [], rejected
    return threads


def rejection(tmp_path, text):
    threads, rejected = convert(tmp_path, text)
    assert threads == [] and len(rejected) == 1
    return rejected[0]


def roles(thread):
    return [(m.role, m.content) for m in thread.messages]


def by_id_suffix(threads):
    return {t.id.partition("#")[2]: t for t in threads}


def constructs(thread):
    return [(u["construct"], u["where"]) for u in thread.meta.get("unrenderable", [])]


# ----------------------------------------------------------------------------- pre-parser

SCRIPT = """\
---
name: demo # front-matter comment
---
system: Be brief.
"A bare string is a user message." # comment
user: first
user: second
# a comment line between items
assistant: |-
  one
  # not a comment: block text
--- # separator with a comment
$set:
  a: 1
$AI
$ret('')
-> translator(target_lang="pt") -> $print # chain comment
***
- user[@dobby]: hi
- - ---
- !fn |-
  [js]hi() { return 1 }
- !fn# |-
  toString(value) { return JSON.stringify(value) }
- $if: "a == 1"
  then: -> json(output=output)
  else:
    - user: x
    - ---
    - user: y
$if: ok
then:
  user: a
  user: b
"""


def test_parse_script_reads_the_body_line_by_line():
    script = parse_script(SCRIPT)
    assert script.front_matter == {"name": "demo"}
    assert list(script.steps) == [
        Message("system", "Be brief.", 4),
        Message("user", "A bare string is a user message.", 5),
        Message("user", "first", 6),
        Message("user", "second", 7),
        Message("assistant", "one\n# not a comment: block text", 9),
        Separator(12, "---"),
        Directive("$set", {"a": 1}, 13),
        Directive("$AI", None, 15),
        Directive("$ret", "$ret('')", 16),
        Chain('translator(target_lang="pt") -> $print', 17),
        Separator(18, "***"),
        Message("user", "hi", 19, to="@dobby"),
        Separator(20, "---"),
        Function("!fn", "[js]hi() { return 1 }", 21),
        Function("!fn#", "toString(value) { return JSON.stringify(value) }", 23),
        Conditional(
            "a == 1",
            (Chain("json(output=output)", 26),),
            (Message("user", "x", 28), Separator(29, "---"), Message("user", "y", 30)),
            25,
        ),
        Conditional("ok", (Message("user", "a", 33), Message("user", "b", 34)), (), 31),
    ]


def test_parse_script_without_front_matter_and_with_loops():
    script = parse_script("- user: hi\n- $for: 3\n  as:\n    value: item\n  do:\n    - user: x\n")
    assert script.front_matter == {}
    assert script.steps == (
        Message("user", "hi", 1),
        Directive("$for", 3, 2, {"as": {"value": "item"}, "do": [{"user": "x"}]}),
    )


@pytest.mark.parametrize(
    ("text", "code", "words"),
    [
        ("---\nname: x\nuser: hi\n", "invalid_yaml", "line 1: the front-matter opened"),
        ("---\n- a\n---\nuser: hi\n", "missing_field", "the front-matter is an array"),
        ("user: hi\nassistant: 'open\n", "invalid_yaml", "line 2, column 12"),
        ("system: x\nthen: y\n", "missing_field", "line 2: `then:` follows no `$if`"),
        ("system: x\nuser:\n  a: 1\n", "missing_field", "line 2: `user:` holds an object"),
        ("user: hi\n  assistant: no\n", "invalid_yaml", "line 2"),
        ("  user: hi\n", "invalid_yaml", "line 1: indented text belongs to no item"),
        (
            "user: ok\nassistant: !!python/object/apply:os.system ['true']\n",
            "unsafe_yaml",
            "line 2, column 12",
        ),
    ],
)
def test_parse_errors_name_the_line(text, code, words):
    with pytest.raises(RecordRejected) as caught:
        parse_script(text)
    assert caught.value.code == code
    assert words in caught.value.message


def test_alias_bombs_are_refused_across_items():
    bomb = "a: &a ['x','x','x','x','x','x','x','x','x','x']\n" + "".join(
        f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
        for p, c in zip("abcdef", "bcdefg", strict=True)
    )
    with pytest.raises(RecordRejected) as caught:
        parse_script(f"user: hi\n$set:\n  {bomb.replace(chr(10), chr(10) + '  ')}")
    assert caught.value.code == "invalid_yaml"
    assert "line 2: YAML rejected: the document expands to more than" in caught.value.message


# ----------------------------------------------------------------------------- samples


def test_samples_convert_with_the_expected_quarantine_codes():
    threads, rejected, stats = read_all(SAMPLES)
    assert stats.read_balanced and stats.records_read == 8
    assert set(stats.formats.values()) == {"ppe"}
    assert Counter(r.code for r in rejected) == {
        "invalid_yaml": 1,
        "unknown_role": 1,
        "unrenderable_template": 1,
    }
    messages = {r.source.rsplit("/", 1)[-1]: r.message for r in rejected}
    assert messages["bad_unknown_role.ai.yaml"].startswith("line 6: role `robot`")
    assert "line 5, column 7" in messages["bad_broken_yaml.ai.yaml"]
    assert "`[[@file(notes/report.txt)]]` at line 5" in messages["bad_file_call.ai.yaml"]
    assert len(threads) == 9


def test_dialogues_share_the_preamble_and_end_at_generation_slots(tmp_path):
    threads = threads_of(tmp_path, (SAMPLES / "math_dialogues.ai.yaml").read_text())
    first, second = threads
    assert first.id.endswith("#dialogue-1") and second.id.endswith("#dialogue-2")
    preamble = [
        ("developer", "You are a patient arithmetic tutor. Give the number first."),
        ("user", "Keep every answer short."),
    ]
    assert roles(first) == [
        *preamble,
        ("user", "What is 10 plus 18?"),
        ("assistant", "28. Ten plus eighteen is twenty-eight."),
        ("user", "And 28 minus 8?"),
        ("assistant", "20."),
    ]
    assert "prompt_only" not in first.meta and first.messages[-1].end_turn is True
    assert roles(second) == [*preamble, ("user", "What is 7 times 6?")]
    assert second.meta["prompt_only"] is True
    assert second.meta["ppe"]["generation"] == {"variable": "answer", "line": 16}
    assert constructs(second) == [
        ("$print: ?=answer", "line 17"),
        ("-> checker(strict=true) -> $print", "line 18"),
    ]
    assert "1 message(s) after the generated turn depend on it; left out" in second.meta["notes"]
    left_out = (
        "left out the dialogue at line 20: `[[@calculator(5+2)]]` at line 21 calls another "
        "script or directive at run time; never run, nothing it names is opened"
    )
    assert left_out in first.meta["notes"] and left_out in second.meta["notes"]
    assert first.meta["parameters"] == {"temperature": 0.2, "max_tokens": 256}


def test_if_branches_with_messages_give_one_thread_each(tmp_path):
    threads = threads_of(tmp_path, (SAMPLES / "unit_converter_list_form.ai.yaml").read_text())
    found = by_id_suffix(threads)
    assert list(found) == ["dialogue-1", "dialogue-2-if15-then", "dialogue-2-if15-else"]
    assert roles(found["dialogue-1"])[1:] == [
        ("user", "Convert 3 miles to kilometres."),
        ("assistant", "4.83 km"),
    ]
    then, otherwise = found["dialogue-2-if15-then"], found["dialogue-2-if15-else"]
    assert roles(then)[1:] == [("user", "How many feet are in 3 miles?")]
    assert then.meta["ppe"]["generation"]["parameters"] == "temperature=0"
    assert roles(otherwise)[1:] == [("user", "Which unit is miles?"), ("user", "Thanks!")]
    assert otherwise.meta["prompt_only"] is True
    function = ("!fn [js]toKm(miles) { return miles * 1.609 }", "line 9")
    assert constructs(then) == [function, ("$if: this.unit === 'miles'", "line 15")]
    assert "takes it as false" in otherwise.meta["unrenderable"][1]["reason"]
    assert function not in constructs(found["dialogue-1"])[1:]


def test_branch_combinations_are_capped(tmp_path):
    branches = "".join(f"- $if: c{n}\n  then:\n    - user: yes {n}\n" for n in range(4))
    threads = threads_of(tmp_path, f"- system: s\n{branches}")
    assert len(threads) == 8
    assert len({t.id for t in threads}) == 8
    assert (
        "only the first 8 combinations of `$if` branches are converted" in threads[0].meta["notes"]
    )
    assert roles(threads[0])[1:] == [("user", f"yes {n}") for n in range(4)]


def test_character_roles_speak_as_the_assistant(tmp_path):
    threads = threads_of(tmp_path, (SAMPLES / "dobby_character.ai.yaml").read_text())
    first, second = threads
    developer = first.messages[0].content
    assert developer.startswith("Play Dobby.") and "- likes:\n  - socks" in developer
    assert roles(first)[1:] == [
        ("user", "Who are you?"),
        ("assistant", "Dobby is a free elf, sir!"),
        ("user", "What does Dobby like?"),
    ]
    assert first.meta["message_meta"] == {"2": {"speaker": "dobby"}, "3": {"to": "@dobby"}}
    assert first.meta["ppe"]["generation"]["speaker"] == "Dobby"
    assert any("lib/char.ai.yaml), which is never opened" in n for n in first.meta["notes"])
    assert second.meta["response_format"] == "plaintext"
    assert '"French", "German"' in second.messages[1].content


def test_unknown_roles_name_the_line(tmp_path):
    found = rejection(tmp_path, "---\ntype: char\nname: Dobby\n---\nuser: hi\nharry: hello\n")
    assert found.code == "unknown_role"
    assert found.message == (
        "line 6: role `harry` is not system, user or assistant nor a character of this "
        "script (Dobby)"
    )


def test_golang_templates_render_with_input_defaults_and_prefixes(tmp_path):
    (thread,) = threads_of(tmp_path, (SAMPLES / "weather_golang.ai.yaml").read_text())
    assert roles(thread) == [
        ("developer", "You are a friendly weather assistant."),
        ("user", "What will the weather be in Oslo for the next 3 days? Units: {{.units}}"),
        ("assistant", "In {{.city}} I only know the forecast template, not the weather."),
        ("user", "Then tell me about Oslo in general."),
    ]
    assert thread.meta["missing_variables"] == ["units"]
    assert thread.meta["ppe"]["template_format"] == "golang"
    assert thread.meta["prompt_only"] is True


def test_fstring_templates_and_json_answers(tmp_path):
    (thread,) = threads_of(tmp_path, (SAMPLES / "volcano_facts_fstring_json.ai.yaml").read_text())
    assert [m.role for m in thread.messages] == [
        "developer",
        "developer",
        "user",
        "assistant",
        "user",
    ]
    assert thread.messages[2].content == "Give 2 facts about volcanoes."
    assert thread.messages[4].content == "Now 2 facts about {subject}."
    assert thread.meta["missing_variables"] == ["subject"]
    assert "json" in enabled_formats(thread.messages[1].content)
    assert "facts: string[]" in thread.messages[1].content
    answer = thread.messages[3]
    assert answer.format == "json" and orjson.loads(answer.content)["facts"][0].startswith("Etna")
    assert thread.meta["response_format"] == "json"
    assert "output" not in thread.meta.get("extra_fields", {})


def test_hf_templates_use_front_matter_values_and_keep_missing_placeholders(tmp_path):
    (thread,) = threads_of(
        tmp_path,
        "---\nname: Dobby\nprompt:\n  mood: happy\n---\n"
        'system: "Play {{name}}, who is {{mood}}."\n'
        'user: "{{question}}"\n',
    )
    assert roles(thread) == [
        ("developer", "Play Dobby, who is happy."),
        ("user", "{{question}}"),
    ]
    assert thread.meta["missing_variables"] == ["question"]


def test_a_dialogue_that_needs_a_call_is_left_out_and_alone_is_quarantined(tmp_path):
    found = rejection(tmp_path, "user: Summarise [[/<R>(.+)</R>/:Answer]] please\n")
    assert found.code == "unrenderable_template"
    assert "`[[/<R>(.+)</R>/:Answer]]` at line 1" in found.message
    slot = rejection(tmp_path, "user: '[[question]]'\n")
    assert slot.code == "unrenderable_template"
    assert "`[[question]]` at line 1 is filled by a model call" in slot.message


def test_template_function_calls_are_unrenderable(tmp_path):
    found = rejection(
        tmp_path,
        "---\ncontent: {a: 1}\n---\n!fn# |-\n  toString(v) { return JSON.stringify(v) }\n"
        'user: "{{toString(content)}}"\n',
    )
    assert found.code == "unrenderable_template"
    assert "toString" in found.message and "line 6" in found.message


def test_a_script_without_messages_names_its_constructs(tmp_path):
    found = rejection(tmp_path, "$set:\n  a: 1\n-> other\n$echo: done\n")
    assert found.code == "unrenderable_template"
    assert found.message == (
        "the script holds no messages, only constructs that are never run: "
        "`$set` at line 1, `-> other` at line 3, `$echo` at line 4"
    )
    empty = rejection(tmp_path, "system: You help.\n---\n")
    assert empty.code == "empty_conversation"


def test_ai_directives_and_directive_messages(tmp_path):
    first, second = threads_of(
        tmp_path,
        "- system: Be brief.\n"
        "- ---\n"
        "- user: Hi\n"
        "- $AI:\n"
        "    temperature: 0.5\n"
        "- user: And then?\n"
        "- ---\n"
        "- user: Hello\n"
        "- assistant: Hello!\n"
        "- ---\n"
        "- user: Go\n"
        '- "$!consoleInput"\n',
    )
    assert roles(first)[1:] == [("user", "Hi")]
    assert first.meta["prompt_only"] is True
    assert first.meta["ppe"]["generation"] == {"directive": "$AI", "line": 4}
    assert constructs(first) == [('$AI: {"temperature":0.5}', "line 4")]
    assert "1 message(s) after the generated turn depend on it; left out" in first.meta["notes"]
    assert roles(second)[1:] == [("user", "Hello"), ("assistant", "Hello!")]
    assert (
        "left out the dialogue at line 10: `$!consoleInput` at line 12 adds a message from a "
        "directive's result, which is never run"
    ) in second.meta["notes"]


def test_front_matter_prompt_messages_come_first(tmp_path):
    (thread,) = threads_of(
        tmp_path,
        "---\ndescription: You are Dobby.\nprompt:\n  messages:\n"
        "    - role: system\n      content: '{{description}}'\n---\nuser: Who are you?\n",
    )
    assert roles(thread) == [("developer", "You are Dobby."), ("user", "Who are you?")]


def test_deep_nesting_is_refused(tmp_path):
    nested = "".join(f"{'  ' * n}- $if: c{n}\n{'  ' * n}  then:\n" for n in range(400))
    found = rejection(tmp_path, f"user: hi\n{nested}{'  ' * 400}- user: deep\n")
    assert found.code == "invalid_yaml" and found.message.startswith("line ")


@pytest.mark.parametrize(
    ("value", "score"),
    [
        (TextDocument("ppe", "user: hi\n"), 1.0),
        (TextDocument("skprompt", "{{$input}}"), 0.0),
        ({"user": "hi"}, 0.0),
        ("user: hi", 0.0),
    ],
)
def test_sniff(value, score):
    assert FORMATS["ppe"].sniff(value).score == score


# ------------------------------------------------------------------- real files' shapes
# tests/data/formats/ppe holds hand-written stand-ins of the nine offline-ai/cli scripts
# (see its PROVENANCE.txt, which names the original each one copies the shape of); the
# originals, in ../shared, are converted by test_the_original_scripts_convert_with_the_cli.


def stand_ins(data):
    threads, rejected, stats = read_all(data / PPE)
    assert stats.read_balanced and stats.records_read == 9
    assert set(stats.formats.values()) == {"ppe"}
    files: dict[str, list] = {}
    for thread in threads:
        files.setdefault(thread.meta["source"].rsplit("/", 1)[-1], []).append(thread)
    return files, {r.source.rsplit("/", 1)[-1]: r for r in rejected}


def test_character_and_plain_scripts(data):
    files, _ = stand_ins(data)
    (cat,) = files["char-lighthouse-cat.ai.yaml"]
    assert cat.messages[0].content.startswith("Play Biscuit.")
    assert "BISCUIT KEEPS THE LAMP" in cat.messages[0].content  # character.home.description
    assert roles(cat)[1:] == [
        ("user", "Who are you?"),
        ("assistant", "Biscuit is the lighthouse cat. Biscuit keeps the lamp."),
    ]
    assert "prompt_only" not in cat.meta

    (extract,) = files["extract-total.ai.yaml"]
    assert roles(extract)[0] == ("developer", "You read receipts and answer in JSON only.")
    assert "json" in enabled_formats(extract.messages[1].content)
    assert extract.messages[-1].content.endswith("as one JSON object:\n{{content}}")
    assert extract.meta["response_format"] == "json"
    assert extract.meta["missing_variables"] == ["content"]

    (split,) = files["split-into-sections.ai.yaml"]
    assert split.messages[0].content.startswith("You are given a long text without headings")
    assert roles(split)[1] == ("user", "Text:\n{{content}}")
    assert split.meta["ppe"]["generation"] == {"variable": "sections", "line": 36}
    assert constructs(split) == [("-> json(output)", "line 37")]  # the last line, no newline
    assert "the script inherits from type `sectioning`" in split.meta["notes"][0]

    (proofreader,) = files["proofreader.ai.yaml"]
    assert proofreader.messages[0].content.startswith("Play Proofreader.")  # character.name
    assert proofreader.messages[-1].content == (
        "{{content}}\nProofread the above as {{language}} text."
    )
    assert proofreader.meta["missing_variables"] == ["content", "language"]
    assert proofreader.meta["response_format"] == "json"


def test_scripts_with_messages_only_in_if_branches(data):
    files, _ = stand_ins(data)
    (planner,) = files["meal-planner.ai.yaml"]
    assert planner.id.endswith("#dialogue-1-if29-then")
    assert planner.messages[-1].content == "Plan a {{occasion}} dinner for {{guests}}."
    assert planner.meta["ppe"]["generation"] == {"variable": "menu", "line": 32}
    assert constructs(planner) == [
        ("$if: this.guests?.length", "line 29"),
        ("$if: this.json", "line 33"),
    ]

    then, otherwise = files["solve-word-problem.ai.yaml"]
    assert roles(then)[1:] == [("user", "{{content}}")]
    assert ("-> extract-total", "line 20") in constructs(then)
    assert roles(otherwise)[1:] == [
        ("assistant", "Give me a word problem and I will work it out with you.")
    ]
    assert "prompt_only" not in otherwise.meta

    then, otherwise = files["lib__rewriter.ai.yaml"]
    assert then.meta["prompt_only"] is True
    assert roles(then)[0] == (
        "developer",
        "You rewrite text in the tone you are asked for, and change nothing else.",
    )
    user = then.messages[1].content
    assert user.startswith("Rewrite with care and finish before the delimiter")
    assert '"<|DONE|>"' in user  # front-matter defaults fill the template
    assert 'Rewrite `"The meeting moved to Thursday."` in a formal tone.' in user
    file_condition = then.meta["unrenderable"][0]
    assert (file_condition["construct"], file_condition["where"]) == ("$if: this.file", "line 52")
    assert file_condition["reason"].endswith("its branches hold no messages and are not run ($set)")
    assert roles(otherwise)[1:] == [
        ("assistant", "I rewrite text in any tone you like. What shall I rewrite?")
    ]


def test_library_scripts(data):
    files, rejected = stand_ins(data)
    (persona,) = files["lib__persona.ai.yaml"]
    assert roles(persona)[0][1].startswith("You play a persona in a conversation,")
    assert persona.meta["missing_variables"] == ["character", "description", "name"]
    assert persona.meta["prompt_only"] is True
    assert constructs(persona) == [("$if: !this.name && this.character", "line 39")]
    found = rejected["lib__wait-for-input.ai.yaml"]
    assert found.code == "unrenderable_template"
    assert found.message == (
        "the script holds no messages, only constructs that are never run: "
        "`!fn` at line 20, `$set` at line 30, `$echo` at line 33"
    )
    assert set(rejected) == {"lib__wait-for-input.ai.yaml"}


def test_scripts_convert_with_the_cli(data, tmp_path):
    out = tmp_path / "threads.jsonl"
    result = CliRunner().invoke(
        main, ["convert", str(data / PPE), "--from", "auto", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    lines = out.read_bytes().splitlines()
    assert len(lines) == 10
    assert {orjson.loads(line)["meta"]["source_format"] for line in lines} == {"ppe"}


def test_the_original_scripts_convert_with_the_cli(tmp_path):
    """Every one of the nine offline-ai/cli scripts the stand-ins copy the shape of: ten
    threads, and lib/input.ai.yaml (no message, only constructs) quarantined."""
    shared = needs_shared(*(f"{PPE}/{name}" for name in ORIGINALS))
    out = tmp_path / "threads.jsonl"
    result = CliRunner().invoke(
        main, ["convert", str(shared / PPE), "--from", "auto", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len(lines) == 10
    assert {line["meta"]["source_format"] for line in lines} == {"ppe"}
    sources = Counter(line["meta"]["source"].rsplit("/", 1)[-1] for line in lines)
    assert set(sources) == set(ORIGINALS) - {"lib__input.ai.yaml"}
    rejected = (tmp_path / "threads.rejected.jsonl").read_bytes().splitlines()
    assert [orjson.loads(line)["source"].rsplit("/", 1)[-1] for line in rejected] == [
        "lib__input.ai.yaml"
    ]


def test_front_matter_of_the_wrong_shape_is_reported_with_its_path(tmp_path):
    found = rejection(tmp_path, "---\ninput:\n  - 42\n---\nuser: hi\n")
    assert found.code == "missing_field"
    assert found.message == "front-matter input[0]: 42 is not valid under any of the given schemas"
    found = rejection(tmp_path, "---\nprompt:\n  messages:\n    - {role: system}\n---\nuser: hi\n")
    assert found.message == "front-matter prompt.messages[0]: 'content' is a required property"
