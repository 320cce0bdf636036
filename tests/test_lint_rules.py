"""Each lint rule fires where it must and stays silent where it must not (false positives
matter as much as misses). Threads go through the public `lint()` as MMS JSONL."""

from __future__ import annotations

import orjson
import pytest

from pipeline.jobs.read import ReadSpec
from pipeline.lint import RULES, LintConfig, Linter
from pipeline.lint.diagnostic import ThreadRef
from pipeline.lint.rule import Finding, Rule
from pipeline.lint.rules import RULES_BY_CODE
from pipeline.lint.rules.dataset import LabelAnswers
from pipeline.lint.rules.examples import (
    assistant,
    context,
    developer,
    thread,
    tool_format,
    user,
)
from pipeline.mms import Message, Thread
from tests.linting import findings, fired

CALL = assistant('{"city":"Oslo"}', "get_weather:json", end_turn=False)
DECLARE = developer("Call `get_weather:json` for weather questions.")
SETTINGS = {"formats": [tool_format("get_weather")]}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_each_rules_documented_bad_example_fires_and_good_example_does_not(tmp_path, rule):
    assert fired(tmp_path, rule.bad, rule.code), f"{rule.code}: bad example does not fire"
    assert fired(tmp_path, rule.good, rule.code) == [], f"{rule.code}: good example fires"


# --------------------------------------------------------------------------- MMS1xx


def test_unknown_role_is_reported_with_thread_id_locator_and_message_index(tmp_path):
    record = thread(user("Hi"), {"role": "robot", "content": "Beep."}, id="robot-1")
    (diagnostic,) = fired(tmp_path, [record], "MMS101")
    assert diagnostic.thread_id == "robot-1"
    assert diagnostic.locator.endswith("threads.jsonl:1")
    assert diagnostic.message_index == 1
    assert "robot" in diagnostic.message and diagnostic.severity == "error"


def test_each_field_problem_of_a_record_is_its_own_mms102_finding(tmp_path):
    record = thread(
        {"role": "user", "content": "Hi", "format": "markdown"},
        {"role": "assistant", "content": 7, "end_turn": "yes"},
    )
    messages = sorted(d.message for d in fired(tmp_path, [record], "MMS102"))
    assert messages == [
        "messages[0].format: not allowed on a user message",
        "messages[1].content: expected string, got 7",
        'messages[1].end_turn: expected bool, got "yes"',
    ]


def test_a_record_without_an_id_is_reported_under_the_id_it_would_have_had(tmp_path):
    (d,) = fired(tmp_path, [{"messages": [{"role": "tool", "content": "x"}]}], "MMS101")
    assert d.thread_id and len(d.thread_id) == 16


def test_unknown_role_in_another_input_format_is_mms101(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(
        '{"messages": [{"role": "user", "content": "Hi"}, {"role": "robot", "content": "x"}]}\n'
    )
    from pipeline.jobs.lint import lint
    from pipeline.lint import LintConfig

    report = lint(str(path), ReadSpec("openai"), config=LintConfig(select=("MMS1",)))
    (d,) = report.diagnostics
    assert (d.code, d.message_index) == ("MMS101", 1) and "[unknown_role]" in d.message


def test_unreadable_line_is_mms105_with_its_line(tmp_path):
    good = thread(user("Hi"), assistant("Hello!"))
    (d,) = fired(tmp_path, [good, '{"id": "x", "messages": [', good], "MMS105")
    assert d.locator.endswith("threads.jsonl:2") and "[invalid_json]" in d.message


def test_no_assistant_message_fires_once_per_thread(tmp_path):
    ds = fired(tmp_path, [thread(developer("Be brief."), user("Hi"), user("Hello?"))], "MMS103")
    assert [(d.message_index, d.severity) for d in ds] == [(None, "warning")]
    assert fired(tmp_path, [thread(user("Hi"), assistant("Hello!"))], "MMS103") == []


def test_empty_content_is_an_error_only_on_assistant_messages(tmp_path):
    record = thread(developer(""), user("   "), assistant("\n"), user("ok"), assistant("fine"))
    found = [(d.message_index, d.severity) for d in fired(tmp_path, [record], "MMS104")]
    assert found == [(0, "warning"), (1, "warning"), (2, "error")]


# --------------------------------------------------------------------------- MMS2xx


def test_a_format_named_only_inside_a_fenced_code_block_is_not_enabled(tmp_path):
    fenced = developer("Example config:\n```\nformats: `get_weather:json`\n```\nBe helpful.")
    assert fired(tmp_path, [thread(fenced, user("Weather?"), CALL)], "MMS201")


def test_a_developer_message_after_the_assistant_message_does_not_enable_it(tmp_path):
    record = thread(user("Weather?"), CALL, DECLARE)
    (d,) = fired(tmp_path, [record], "MMS201")
    assert d.message_index == 1 and "message 2 enables it, but only after" in d.message


@pytest.mark.parametrize(
    "enabler",
    [
        DECLARE,
        {"role": "platform", "content": "Tools: `get_weather:json`."},
        developer("Tools: `` get_weather:json `` (double backticks)."),
        developer("```\nnot this\n```\nbut `get_weather:json` outside the fence"),
    ],
)
def test_platform_or_developer_code_spans_enable_the_format(tmp_path, enabler):
    assert fired(tmp_path, [thread(enabler, user("Weather?"), CALL)], "MMS201") == []


def test_settings_formats_enable_a_format(tmp_path):
    record = thread(user("Weather?"), CALL, settings=SETTINGS)
    assert fired(tmp_path, [record], "MMS201") == []


def test_markdown_is_the_default_capability_and_a_near_miss_span_enables_nothing(tmp_path):
    assert fired(tmp_path, [thread(user("Hi"), assistant("Hello"))], "MMS201") == []
    near = developer("Use `get_weather` or `get_weather:json `x.")
    assert fired(tmp_path, [thread(near, user("Weather?"), CALL)], "MMS201")


def test_user_enabled_format_is_mms202_not_mms201(tmp_path):
    record = thread(user("Use `get_weather:json`."), CALL)
    codes = {d.code for d in findings(tmp_path, [record], "MMS2")}
    assert codes == {"MMS202"}
    assert fired(tmp_path, [thread(DECLARE, user("Use `get_weather:json`."), CALL)], "MMS202") == []


def test_context_enabled_format_is_mms203_not_mms201(tmp_path):
    record = thread(user("Read it."), context("use `get_weather:json`", "browser"), CALL)
    codes = {d.code for d in findings(tmp_path, [record], "MMS2")}
    assert codes == {"MMS203"}


def test_format_outside_given_settings_fires_but_markdown_does_not(tmp_path):
    other = assistant('{"tz":"CET"}', "get_time:json", end_turn=False)
    record = thread(developer("Use `get_time:json`."), user("Time?"), other, settings=SETTINGS)
    (d,) = fired(tmp_path, [record], "MMS204")
    assert "`get_weather:json`" in d.message and d.message_index == 2
    markdown_only = thread(DECLARE, user("Hi"), assistant("Hello"), settings=SETTINGS)
    assert fired(tmp_path, [markdown_only], "MMS204") == []
    assert fired(tmp_path, [thread(user("Hi"), CALL)], "MMS204") == []  # no settings given


@pytest.mark.parametrize(
    ("name", "fires"),
    [
        ("get_weather:json", False),
        ("json", False),
        ("snake_case2", False),
        ("getWeather:json", True),
        ("web-search:json", True),
        ("get_weather:JSON", True),
        ("Finish:json", True),
    ],
)
def test_format_name_shape(tmp_path, name, fires):
    record = thread(developer(f"Use `{name}`."), user("Go"), assistant("{}", name, end_turn=False))
    found = fired(tmp_path, [record], "MMS206")
    assert bool(found) is fires
    if fires:
        assert found[0].message_index == 2


def test_format_named_without_backticks_hints_mms207_besides_mms201(tmp_path):
    record = thread(developer("Answer in JSON, please."), user("Primes?"), assistant("[2]", "json"))
    codes = sorted(d.code for d in findings(tmp_path, [record], "MMS2"))
    assert codes == ["MMS201", "MMS207"]
    (d,) = fired(tmp_path, [record], "MMS207")
    assert "'JSON'" in d.message and "developer message 0" in d.message


@pytest.mark.parametrize(
    "text",
    [
        "Reply in `json`.",  # enabled: nothing to hint
        "Reply in jsonl lines.",  # another word
        "Reply in markdown; the example:\n```\njson\n```",  # only inside code
    ],
)
def test_no_backtick_hint_where_there_is_no_plain_mention(tmp_path, text):
    record = thread(developer(text), user("Primes?"), assistant("[2]", "json"))
    assert fired(tmp_path, [record], "MMS207") == []


# --------------------------------------------------------------------------- MMS3xx


def test_tool_call_followed_by_user_fires_but_context_or_thread_end_does_not(tmp_path):
    (d,) = fired(tmp_path, [thread(DECLARE, user("W?"), CALL, user("-3"))], "MMS301")
    assert d.message_index == 2 and "user message" in d.message
    assert (
        fired(tmp_path, [thread(DECLARE, user("W?"), CALL, context("-3", "get_weather"))], "MMS301")
        == []
    )
    assert fired(tmp_path, [thread(DECLARE, user("W?"), CALL)], "MMS301") == []
    plain = thread(user("W?"), assistant("Let me see", end_turn=False), user("ok"))
    assert fired(tmp_path, [plain], "MMS301") == []


def test_halting_format_followed_by_assistant_needs_halt_on_completion(tmp_path):
    answer = assistant("It is cold.")
    halting = thread(DECLARE, user("W?"), CALL, answer, settings=SETTINGS)
    (d,) = fired(tmp_path, [halting], "MMS303")
    assert d.message_index == 3
    no_halt = {"formats": [{"name": "get_weather:json", "halt_on_completion": False}]}
    assert (
        fired(tmp_path, [thread(DECLARE, user("W?"), CALL, answer, settings=no_halt)], "MMS303")
        == []
    )


# --------------------------------------------------------------------------- MMS4xx


def test_json_formats_and_json_samplers_must_hold_json(tmp_path):
    dev = developer("Use `json`, `get_weather:json` and `sql`.")
    settings = {"formats": [{"name": "sql", "sampler": "json"}, "json", "get_weather:json"]}
    record = thread(
        dev,
        user("Go"),
        assistant("{'a': 1}", "json"),
        assistant('{"city": "Oslo"', "get_weather:json", end_turn=False),
        context("ok", "get_weather"),
        assistant("SELECT 1", "sql"),
        assistant("not json at all, but markdown"),
        settings=settings,
    )
    assert [d.message_index for d in fired(tmp_path, [record], "MMS401")] == [2, 3, 5]


def test_jsonl_reports_the_first_bad_line(tmp_path):
    record = thread(
        developer("Use `jsonl`."), user("Go"), assistant('{"a": 1}\n\n{"b": 2}\nnope\n[3', "jsonl")
    )
    (d,) = fired(tmp_path, [record], "MMS402")
    assert d.message.startswith("line 4 of `jsonl`")


def _schema_thread(arguments: str, schema: object, fmt: str = "get_weather:json"):
    return thread(
        developer(f"Use `{fmt}`."),
        user("W?"),
        assistant(arguments, fmt, end_turn=False),
        meta={"tool_schemas": {"get_weather": schema}},
    )


SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"city": "Oslo", "days": 3}', None),
        ('{"days": 3}', "'city' is a required property"),
        ('{"city": "Oslo", "days": 0}', "$.days: 0 is less than the minimum of 1"),
        ('{"city": 5}', "$.city: 5 is not of type 'string'"),
        ('{"city": "Oslo", "when": "now"}', "Additional properties are not allowed"),
        ("not json", None),  # MMS401's business
    ],
)
def test_tool_arguments_are_validated_against_the_declared_schema(tmp_path, arguments, problem):
    found = fired(tmp_path, [_schema_thread(arguments, SCHEMA)], "MMS403")
    if problem is None:
        assert found == []
    else:
        (d,) = found
        assert problem in d.message and d.severity == "error" and d.message_index == 2


def test_jsonl_calls_are_validated_line_by_line(tmp_path):
    record = _schema_thread('{"city": "Oslo"}\n{"town": "Lima"}', SCHEMA, "get_weather:jsonl")
    (d,) = fired(tmp_path, [record], "MMS403")
    assert d.message.startswith("arguments of `get_weather:jsonl` (line 2) do not match")


def test_an_invalid_declared_schema_is_a_warning_not_an_error(tmp_path):
    record = _schema_thread(
        '{"city": "Oslo"}', {"type": "object", "properties": {"city": {"type": "str"}}}
    )
    (d,) = fired(tmp_path, [record], "MMS403")
    assert d.severity == "warning" and "not a valid JSON Schema" in d.message


def test_calls_without_a_declared_schema_are_not_checked(tmp_path):
    assert fired(tmp_path, [thread(DECLARE, user("W?"), CALL)], "MMS403") == []


@pytest.mark.parametrize(
    ("content", "fires"),
    [
        ("Hello!<|im_end|>", True),
        ("[INST] hi [/INST]", True),
        ("Done.</s>", True),
        ("<\uff5cend\u2581of\u2581sentence\uff5c>", True),
        ("The `<|im_end|>` token ends a turn.", False),
        ("```\n<|eot_id|>\n```", False),
        ("a | b | c, x<y>z, <s>struck</s>", True),  # </s> is still reported
        ("a | b | c and x < y > z", False),
    ],
)
def test_special_token_literals_outside_code(tmp_path, content, fires):
    assert bool(fired(tmp_path, [thread(user("Hi"), assistant(content))], "MMS404")) is fires


def test_extra_special_tokens_come_from_the_config(tmp_path):
    record = thread(user("Hi"), assistant("Bye <END>"))
    assert fired(tmp_path, [record], "MMS404") == []
    assert fired(tmp_path, [record], "MMS404", special_tokens=("<END>",))


@pytest.mark.parametrize(
    ("content", "fires"),
    [
        ("Write about {{topic}}.", True),
        ("Hello {{$name}}", True),
        ("{% if x %}y{% endif %}", True),
        ("[[AI]]", True),
        ("Use `{{name}}` in Jinja.", False),
        ("```jinja\n{{ name }}\n```", False),
        ("Go templates print the dot with {{ . }}.", False),
        ("A set {{1, 2}} and a dict {'a': {'b': 1}}", False),
    ],
)
def test_unrendered_placeholders_outside_code(tmp_path, content, fires):
    assert bool(fired(tmp_path, [thread(user(content), assistant("ok"))], "MMS405")) is fires


def test_missing_template_variables_in_meta_are_reported(tmp_path):
    record = thread(user("Hi"), assistant("ok"), meta={"missing_variables": ["topic", "length"]})
    (d,) = fired(tmp_path, [record], "MMS405")
    assert d.message_index is None and "topic, length" in d.message


# --------------------------------------------------------------------------- MMS5xx


def test_duplicates_are_reported_on_every_copy_after_the_first(tmp_path):
    same = [thread(user("Hi"), assistant("Hello!"), id=f"t{i}", meta={"n": i}) for i in range(3)]
    other = thread(user("Hi"), assistant("Hello!"), id="t9", settings=SETTINGS)
    found = fired(tmp_path, [*same, other], "MMS501")
    source = found[0].source
    assert source is not None and found[0].locator == f"{source}:2"
    assert [(d.thread_id, d.message) for d in found] == [
        ("t1", f"duplicate of {source}:1 (same messages and settings)"),
        ("t2", f"duplicate of {source}:1 (same messages and settings)"),
    ]


def _json_threads(count: int, used: int, wordings: tuple[str, ...]) -> list[dict]:
    return [
        thread(
            developer(wordings[i % len(wordings)]),
            user(f"Data {i}?"),
            assistant(f'{{"n": {i}}}', "json") if i < used else assistant(str(i)),
            id=f"t{i}",
        )
        for i in range(count)
    ]


WORDINGS = ("Reply in `json` if asked.", "You may use `json`.", "`json` is allowed.")


def test_capability_never_absent_needs_enough_threads(tmp_path):
    (d,) = fired(tmp_path, _json_threads(10, 10, WORDINGS), "MMS502")
    assert d.thread_id == "t0" and "all 10 threads" in d.message
    assert fired(tmp_path, _json_threads(10, 9, WORDINGS), "MMS502") == []
    assert fired(tmp_path, _json_threads(9, 9, WORDINGS), "MMS502") == []
    assert fired(tmp_path, _json_threads(4, 4, WORDINGS), "MMS502", dataset_min_threads=4)


def test_few_phrasings_counts_distinct_wordings_with_names_masked(tmp_path):
    assert fired(tmp_path, _json_threads(12, 6, WORDINGS[:2]), "MMS503")
    assert fired(tmp_path, _json_threads(12, 6, WORDINGS), "MMS503") == []
    assert fired(tmp_path, _json_threads(12, 6, WORDINGS[:2]), "MMS503", min_phrasings=2) == []
    # the same sentence for different tools is one phrasing per tool, not a new one
    tools = [
        thread(developer(f"Call `{name}:json` for {name}."), user("Go"), assistant("x"), id=name)
        for name in ("alpha", "beta", "gamma")
        for _ in range(4)
    ]
    assert fired(tmp_path, tools, "MMS503", dataset_min_threads=4) != []


def test_dataset_rules_see_settings_only_capabilities_without_phrasings(tmp_path):
    record = [thread(user(f"W{i}?"), CALL, settings=SETTINGS, id=f"s{i}") for i in range(10)]
    assert fired(tmp_path, record, "MMS503") == []
    assert fired(tmp_path, record, "MMS502")


def test_converter_declaration_wording_does_not_hide_a_duplicate_but_handwritten_does_differ(
    tmp_path,
):
    """A converter-written declaration (meta.declaration) counts by what it declares; a
    developer message a person wrote counts word for word."""
    chat = (user("Weather?"), CALL)
    declared = {"declaration": {"message": 0, "key": "0123456789abcdef"}}
    first = thread(developer("Tools: `get_weather:json`."), *chat, id="a", meta=declared)
    reworded = thread(developer("You may call `get_weather:json`."), *chat, id="b", meta=declared)
    other_tools = {"declaration": {"message": 0, "key": "fedcba9876543210"}}
    more = thread(developer("Call `get_weather:json`."), *chat, id="c", meta=other_tools)
    handwritten = thread(developer("Tools: `get_weather:json`."), *chat, id="d")
    reworded_by_hand = thread(developer("You may call `get_weather:json`."), *chat, id="e")
    copied_by_hand = thread(developer("Tools: `get_weather:json`."), *chat, id="f")
    found = fired(
        tmp_path,
        [first, reworded, more, handwritten, reworded_by_hand, copied_by_hand],
        "MMS501",
    )
    assert [d.thread_id for d in found] == ["b", "f"]


@pytest.mark.parametrize("schema", [5, ["a"], {"$schema": 5}, {"type": "object", "pattern": "["}])
def test_schemas_that_are_not_json_schema_are_warnings_never_crashes(tmp_path, schema):
    (d,) = fired(tmp_path, [_schema_thread('{"city": "Oslo"}', schema)], "MMS403")
    assert d.severity == "warning" and "not a valid JSON Schema" in d.message


def test_a_rule_that_fails_on_a_thread_reports_it_and_the_run_goes_on():
    from pipeline.lint import Linter, Rule
    from pipeline.mms import Thread

    def broken(view, config):
        if view.id == "boom":
            raise KeyError("no such thing")
        return []

    rule = Rule("MMS499", "broken", "warning", "s", "r", [], [], check=broken)
    linter = Linter(rules=[rule])
    threads = [Thread.from_dict(thread(user("Hi"), id=name)) for name in ("ok", "boom", "ok2")]
    found = [d for t in threads for d in linter.check_thread(t)]
    (d,) = found
    assert (d.thread_id, d.code, d.severity) == ("boom", "MMS499", "error")
    assert "KeyError" in d.message and "please report it" in d.message


def test_a_rule_that_fails_on_a_thread_is_a_finding_and_the_other_rules_still_run():
    """A bug in one rule costs no finding of the others, and says where it failed."""

    def broken(view, config):
        if len(view.thread.messages) > 1:
            raise KeyError("boom")
        return iter(())

    def empty_user(view, config):
        return (
            Finding(index, "empty")
            for index, message in enumerate(view.thread.messages)
            if not message.content
        )

    rules = [
        Rule("MMS990", "broken", "warning", "fails", "", [], [], check=broken),
        Rule("MMS991", "empty", "warning", "empty content", "", [], [], check=empty_user),
    ]
    linter = Linter(rules=rules)
    thread = Thread("t", [Message("user", ""), Message("assistant", "hi")])
    found = {(d.code, d.message_index): d.message for d in linter.check_thread(thread)}
    assert found[("MMS991", 0)] == "empty"
    assert "MMS990 failed on this thread: KeyError: 'boom' (broken:" in found[("MMS990", None)]
    assert [d.code for d in linter.check_thread(Thread("u", [Message("user", "")]))] == ["MMS991"]


def test_a_duplicate_in_a_json_array_names_the_index_of_its_first_copy(tmp_path):
    from pipeline.jobs.lint import lint

    same = [thread(user("Hi"), assistant("Hello!"), id=f"t{i}") for i in range(3)]
    path = tmp_path / "threads.json"
    path.write_bytes(orjson.dumps(same))
    found = [d for d in lint(str(path)).diagnostics if d.code == "MMS501"]
    assert [d.message for d in found] == [
        f"duplicate of {path}#0 (same messages and settings)",
        f"duplicate of {path}#0 (same messages and settings)",
    ]
    assert [d.locator for d in found] == [f"{path}#1", f"{path}#2"]


# --------------------------------------------------------------------------- MMS508


def _tickets(answers: list[str]) -> list[dict]:
    return [
        thread(user(f"Ticket {i}: my invoice is wrong."), assistant(answer), id=f"t{i}")
        for i, answer in enumerate(answers)
    ]


def test_label_answers_name_the_values_and_point_at_the_most_frequent(tmp_path):
    answers = ["Billing Inquiries"] * 7 + ["Sales"] * 3 + ["A long and helpful answer " * 3]
    (d,) = fired(tmp_path, _tickets(answers), "MMS508")
    assert d.thread_id == "t0" and "10 of 11 answers (91%) are one of 2 short values" in d.message
    assert "'Billing Inquiries' (7), 'Sales' (3)" in d.message


def test_label_answers_need_enough_answered_threads_and_a_large_share(tmp_path):
    assert fired(tmp_path, _tickets(["yes", "no"] * 4), "MMS508") == []
    assert fired(tmp_path, _tickets(["yes", "no"] * 5), "MMS508", dataset_min_threads=20) == []
    varied = ["yes", "no"] * 4 + [
        f"It depends on your plan ({n}): see the pricing page." for n in (1, 2)
    ]
    assert fired(tmp_path, _tickets(varied), "MMS508") == []
    prompts = [thread(user(f"Question {i}?"), id=f"p{i}") for i in range(20)]
    assert fired(tmp_path, prompts + _tickets(["Sales"] * 9), "MMS508") == []


def test_label_answers_over_parts_find_what_one_pass_finds():
    rule, config = RULES_BY_CODE["MMS508"], LintConfig()
    labels: list[tuple[bool, str | None]] = [(True, ["Sales", "Billing"][i % 2]) for i in range(27)]
    facts = [*labels[:10], (True, None), (False, None), *labels[10:], (True, None)]
    refs = [ThreadRef(f"t{i}", "a.jsonl", f"a.jsonl:{i + 1}") for i in range(30)]
    whole = LabelAnswers(config, rule)
    for fact, ref in zip(facts, refs, strict=True):
        list(whole.observe(fact, ref))
    first, second = LabelAnswers(config, rule), LabelAnswers(config, rule)
    for fact, ref in zip(facts[:13], refs[:13], strict=True):
        list(first.observe(fact, ref))
    for fact, ref in zip(facts[13:], refs[13:], strict=True):
        list(second.observe(fact, ref))
    list(first.merge(second.state()))
    assert list(first.finish()) == list(whole.finish())
