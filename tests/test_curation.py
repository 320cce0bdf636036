# ruff: noqa: RUF001 (the Chinese test threads hold full-width punctuation)
"""The curation stages through `mms curate` and `mms run`: PII redaction keeps
every thread valid and every tool call parseable, decontamination finds every planted
evaluation item (verbatim, re-cased, with a sentence added) and not the same topic in
other words, languages are tagged and kept by a list, the quality rules flag what they
name, a curator's plugin drops are counted like ours and its failure is a clear error,
and the same config gives the same bytes with any number of workers."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import ftfy.badness
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline import read
from pipeline.cli import main
from pipeline.curation import phones as phones_module
from pipeline.curation import pii_find
from pipeline.curation.contamination import NgramIndex, words
from pipeline.curation.language import message_language, thread_language, thread_languages
from pipeline.curation.mojibake import bad_texts, re2_syntax
from pipeline.curation.pii import find_pii, may_hold_pii
from pipeline.curation.quality import QualitySettings, Turn, quality_flags, quality_flags_many
from pipeline.mms import Thread, validate_thread_dict
from tests.conftest import REPO

MT_BENCH = REPO / "data_samples" / "mt-bench" / "question.jsonl"
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"


def mms(*args: object):
    return CliRunner().invoke(main, [str(arg) for arg in args])


def chat(user: str, answer: str, **meta: object) -> dict:
    thread = {
        "messages": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    }
    return {**thread, **meta}


def write(path: Path, records: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def threads_of(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def dropped_of(out: Path) -> list[dict]:
    dropped = out.with_name(out.name.replace(".jsonl", ".dropped.jsonl"))
    return threads_of(dropped) if dropped.exists() else []


# ------------------------------------------------------------------------------ PII


def _card_number(rng: random.Random) -> str:
    """A Luhn-valid Visa number."""
    digits = [4] + [rng.randrange(10) for _ in range(14)]
    total = 0
    for index, digit in enumerate(reversed(digits)):
        value = digit * 2 if index % 2 == 0 else digit
        total += value - 9 if value > 9 else value
    return "".join(map(str, digits)) + str((10 - total % 10) % 10)


PII_VALUES = st.one_of(
    st.builds(
        lambda name, host: f"{name}@{host}.com",
        st.from_regex(r"[a-z]{3,8}", fullmatch=True),
        st.from_regex(r"[a-z]{3,8}", fullmatch=True),
    ),
    st.builds(lambda seed: _card_number(random.Random(seed)), st.integers(0, 10**6)),
    st.sampled_from(
        ["8.8.8.8", "203.0.113.77".replace("203.0.113.77", "93.184.216.34"), "2001:4860:4860::8888"]
    ),
    st.sampled_from(["AKIAIOSFODNN7EXAMPLE", "ghp_" + "a1" * 18, "+1 415 555 2671"]),
)


@settings(max_examples=25, deadline=None)
@given(
    values=st.lists(PII_VALUES, min_size=1, max_size=4),
    key=st.sampled_from(["to", "email", "note"]),
)
def test_redaction_keeps_threads_valid_and_tool_calls_parseable(tmp_path_factory, values, key):
    """PII in user text, in a tool call's argument values and in its JSON result: after
    redaction none of it is left there, the same value has the same placeholder, keys are
    untouched, every thread validates and every tool call's JSON parses."""
    folder = tmp_path_factory.mktemp("pii")
    first = values[0]
    record = {
        "messages": [
            {"role": "user", "content": f"Please contact {' and '.join(values)} (again: {first})"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "send", "arguments": json.dumps({key: first, "n": 1})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"sent_to": first})},
            {"role": "assistant", "content": "Done."},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "send",
                    "parameters": {"type": "object", "properties": {key: {"type": "string"}}},
                },
            }
        ],
    }
    source = write(folder / "in.jsonl", [record])
    out = folder / "out.jsonl"
    pii = folder / "pii.yaml"
    pii.write_text("pii: {assistant: redact}\n")
    result = mms("curate", source, "-o", out, "--config", pii)
    assert result.exit_code == 0, result.output
    (thread,) = threads_of(out)
    validate_thread_dict(thread)
    user = next(m for m in thread["messages"] if m["role"] == "user")
    assert all(value not in user["content"] for value in values)
    placeholders = [part.split(">")[0] for part in user["content"].split("<")[1:]]
    assert placeholders[0] == placeholders[-1]  # the same value, the same placeholder
    call = next(m for m in thread["messages"] if m.get("format") == "send:json")
    arguments = json.loads(call["content"])
    assert set(arguments) == {key, "n"} and arguments[key] == f"<{placeholders[0]}>"
    result_message = next(m for m in thread["messages"] if m["role"] == "context")
    assert json.loads(result_message["content"]) == {"sent_to": f"<{placeholders[0]}>"}
    assert Thread.from_dict(thread).id == thread["id"]


def test_pii_in_answers_is_tagged_or_drops_the_thread(tmp_path):
    source = write(
        tmp_path / "in.jsonl",
        [chat("Who?", "Write to ann@example.com"), chat("Hi", "Hello there, how can I help?")],
    )
    tagged = mms("curate", source, "-o", tmp_path / "t.jsonl", "--redact-pii")
    assert tagged.exit_code == 0, tagged.output
    first, _ = threads_of(tmp_path / "t.jsonl")
    assert "ann@example.com" in first["messages"][1]["content"]
    assert first["meta"]["pii"] == {"redacted": {}, "found": {"EMAIL": 1}}
    (tmp_path / "drop.yaml").write_text("stages:\n  pii: {assistant: drop}\n")
    dropped = mms("curate", source, "-o", tmp_path / "d.jsonl", "--config", tmp_path / "drop.yaml")
    assert dropped.exit_code == 0, dropped.output
    assert len(threads_of(tmp_path / "d.jsonl")) == 1
    assert [d["code"] for d in dropped_of(tmp_path / "d.jsonl")] == ["pii"]


def test_a_value_redacted_in_a_tool_result_is_redacted_in_the_answer(tmp_path):
    """With the defaults (answers tagged), an address and a phone number a tool result
    holds are redacted in the answer quoting them too, with the same placeholders."""
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    result = '{"mail": "ann@example.com", "tel": "+1 415 555 2671", "score": 4155552671}'
    record = {
        "messages": [
            {"role": "user", "content": "Who is the contact?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": result},
            {"role": "assistant", "content": "Write to ann@example.com or call +1 415 555 2671."},
        ],
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {}}}],
    }
    source = write(tmp_path / "in.jsonl", [record])
    run = mms("curate", source, "-o", tmp_path / "out.jsonl", "--redact-pii")
    assert run.exit_code == 0, run.output
    (thread,) = threads_of(tmp_path / "out.jsonl")
    context = next(m for m in thread["messages"] if m["role"] == "context")
    assert json.loads(context["content"]) == {
        "mail": "<EMAIL_1>",
        "tel": "<PHONE_1>",
        "score": 4155552671,
    }
    assert thread["messages"][-1]["content"] == "Write to <EMAIL_1> or call <PHONE_1>."
    assert thread["meta"]["pii"] == {"redacted": {"EMAIL": 2, "PHONE": 2}, "found": {}}


@pytest.mark.parametrize(
    ("text", "regions", "phones"),
    [
        ("Ring 07700 900461 tonight", ("US", "GB"), ["07700 900461"]),
        ("Appelez le 01 42 68 53 00", ("FR",), ["01 42 68 53 00"]),
        ("Dial 0044 20 7946 0958", ("US",), ["0044 20 7946 0958"]),
        ("ran at 2022-01-01 08:30:00 on 10.0.19041.1288, took 1234567.891", ("US", "GB"), []),
        ("order #100234567, ref 91518698-c057-fbd8-0644-1136d53019ec", ("US", "GB"), []),
    ],
)
def test_phones_by_region_and_what_is_no_phone(text, regions, phones):
    found = [text[s.start : s.end] for s in find_pii(text, regions) if s.kind == "PHONE"]
    assert found == phones


def test_only_the_kinds_asked_for_are_looked_for(monkeypatch):
    """`kinds: [EMAIL, IP]` never asks libphonenumber nor the secrets' expressions."""

    def unexpected(*args: object) -> None:
        raise AssertionError("not asked for")

    monkeypatch.setattr(phones_module, "phone_number", unexpected)
    monkeypatch.setattr(pii_find, "secret_spans", unexpected)
    text = "ann@example.com at 8.8.8.8, +1 415 555 2671, ghp_" + "a1" * 18
    assert [s.kind for s in find_pii(text, kinds=("EMAIL", "IP"))] == ["EMAIL", "IP"]


def test_regions_are_read_from_the_config(tmp_path):
    source = write(tmp_path / "in.jsonl", [chat("Ring me on 07700 900461", "OK")])
    (tmp_path / "pii.yaml").write_text("pii: {regions: [GB, FR]}\n")
    out = tmp_path / "out.jsonl"
    result = mms("curate", source, "-o", out, "--config", tmp_path / "pii.yaml")
    assert result.exit_code == 0, result.output
    assert threads_of(out)[0]["messages"][0]["content"] == "Ring me on <PHONE_1>"


PII_ALPHABET = st.sampled_from(
    list("0123456789٠١٢٣٤٥٦٧٨٩०१२३४५६७८९０１２３")
    + list(" \u00a0\u2009\u3000\t\n.-()+:@_")
    + list("abcAKIAghpsk")
)


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(
        st.one_of(
            PII_VALUES,
            st.builds(  # a phone number spaced as people write it
                lambda spaces: "+1{}415{}555{}2671".format(*spaces),
                st.lists(
                    st.sampled_from(list(" \u00a0\u2009\u202f\u3000-.")), min_size=3, max_size=3
                ),
            ),
            st.text(PII_ALPHABET, max_size=24),
            st.text(max_size=8),
        ),
        max_size=6,
    )
)
def test_a_text_the_detectors_find_pii_in_is_never_skipped(pieces):
    """The stage runs the detectors only on texts `may_hold_pii` flags (one RE2 scan over a
    batch): whatever `find_pii` finds, written with any script's digits and any space,
    the scan flags its text."""
    text = " ".join(pieces)
    if find_pii(text):
        assert may_hold_pii([text]) == [True]


# ------------------------------------------------------------------ decontamination


def _mt_bench_prompts() -> list[str]:
    """The evaluation prompts as mms reads them (a record it quarantines holds none): each
    question's first turn, and its follow-up turns."""
    prompts = []
    for thread in read([str(MT_BENCH)]):
        prompts += [m.content for m in thread.messages if m.role == "user"]
        for follow_up in thread.meta.get("follow_ups") or []:
            prompts += [m["content"] for m in follow_up if m.get("role") == "user"]
    return prompts


def test_threads_holding_an_evaluation_prompt_are_dropped_and_paraphrases_kept(tmp_path):
    prompts = _mt_bench_prompts()[:4]
    records = [
        chat(prompts[0], "Here it is."),  # verbatim
        chat(prompts[1].upper(), "Sure."),  # re-cased
        chat("Quick one. " + prompts[2] + " Thanks a lot!", "Okay."),  # a sentence around it
        chat("Could you write a friendly greeting for people who join a garden club?", "Hi!"),
        chat("Tell me about trains and how long trips take.", "They vary."),
    ]
    source = write(tmp_path / "train.jsonl", records)
    out = tmp_path / "out.jsonl"
    result = mms("curate", source, "-o", out, "--against", MT_BENCH)
    assert result.exit_code == 0, result.output
    assert len(threads_of(out)) == 2  # the topics in other words stay
    drops = dropped_of(out)
    assert [d["code"] for d in drops] == ["contaminated"] * 3
    assert all(d["matched"].startswith("question.jsonl:") for d in drops)


@settings(max_examples=20, deadline=None)
@given(
    picks=st.lists(st.integers(0, 1000), min_size=1, max_size=5),
    noise=st.lists(
        st.sampled_from(["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]), max_size=30
    ),
)
def test_every_planted_evaluation_item_is_found(tmp_path_factory, picks, noise):
    prompts = _mt_bench_prompts()
    folder = tmp_path_factory.mktemp("planted")
    planted = [prompts[pick % len(prompts)] for pick in picks]
    records = [chat(" ".join(noise) + " " + text + " " + " ".join(noise), "ok") for text in planted]
    records.append(chat(" ".join(noise) or "nothing here at all", "ok"))
    out = folder / "out.jsonl"
    result = mms("curate", write(folder / "in.jsonl", records), "-o", out, "--against", MT_BENCH)
    assert result.exit_code == 0, result.output
    assert len(dropped_of(out)) == len(planted) and len(threads_of(out)) == 1


WORDS = ("tea", "cup", "blue", "sea", "the", "a", "fox", "jumps", "over", "dog", "café", "Ünï")


def _reference_matches(items: list[str], text: str, n: int) -> set[int]:
    """The items owning an n-gram `text` holds (an item shorter than n owns itself as a
    whole): each gram, compared as a tuple of words, is owned by the first item having it."""
    owners: dict[tuple[str, ...], int] = {}
    for item, item_text in enumerate(items):
        item_words = words(item_text)
        size = min(n, len(item_words))
        for k in range(len(item_words) - size + 1 if size else 0):
            owners.setdefault(tuple(item_words[k : k + size]), item)
    said = words(text)
    sizes = {len(gram) for gram in owners}
    return {
        owners[gram]
        for size in sizes
        for k in range(len(said) - size + 1)
        if (gram := tuple(said[k : k + size])) in owners
    }


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=9), min_size=1, max_size=6),
    st.lists(st.lists(st.sampled_from(WORDS), max_size=30), min_size=1, max_size=8),
    st.integers(2, 5),
)
def test_a_batch_of_texts_matches_as_each_text_alone(items, texts, n):
    """Looking up many texts at once (the stage's batch) finds, for every text, exactly
    the items a word-by-word comparison finds: no gram crosses from one text into the
    next, and short items match as a whole."""
    index = NgramIndex(n=n)
    item_texts = [" ".join(item) for item in items]
    for number, text in enumerate(item_texts):
        index.add(str(number), text)
    training = [" ".join(text).upper() for text in texts]
    for text, found in zip(training, index.matches_many(training), strict=True):
        assert {int(item) for item in found} == _reference_matches(item_texts, text, n)
        assert found == index.matches(text)


# ------------------------------------------------------------------ language, quality


def test_languages_are_tagged_and_kept_by_a_list(tmp_path):
    records = [
        chat("What is the capital of France?", "The capital of France is Paris."),
        chat("法国的首都是哪里？请告诉我。", "法国的首都是巴黎，这是一个美丽的城市。"),
        chat("Wie spät ist es jetzt in Berlin?", "Es ist gerade drei Uhr nachmittags."),
        chat("ok", "yes"),  # too short to tell: kept
    ]
    out = tmp_path / "out.jsonl"
    result = mms("curate", write(tmp_path / "in.jsonl", records), "-o", out, "--languages", "en,zh")
    assert result.exit_code == 0, result.output
    kept = threads_of(out)
    assert [t["meta"].get("language") for t in kept] == ["en", "zh", None]
    assert [d["code"] for d in dropped_of(out)] == ["language:de"]


OTHER_LANGUAGES_IN_ASCII = (
    ("it", "I ragazzi sono in casa a giocare con il cane"),
    ("it", "Mi puoi dire come si fa la pasta in casa per due persone?"),
    ("it", "Io sono in ufficio fino a tardi e non posso venire stasera"),
    ("it", "Qual e la capitale della Francia e quanti abitanti ha?"),
    ("es", "Me llamo Ana y vivo en una casa con mi familia"),
    ("es", "Puedes explicarme como funciona el motor de un coche?"),
    ("es", "Hoy he comido en un restaurante muy bueno con mis amigos"),
    ("es", "Cual es la mejor manera de aprender a programar en Python?"),
    ("pt", "Eu gosto de ler livros a noite antes de dormir"),
    ("pt", "Voce pode me ajudar a escrever um email para o meu chefe?"),
    ("pt", "As criancas foram para a escola de manha cedo"),
    ("fr", "Je voudrais savoir comment on fait une tarte aux pommes"),
    ("fr", "Il fait beau aujourd'hui, on va se promener au parc?"),
    ("fr", "Pouvez-vous me dire ou se trouve la gare la plus proche?"),
    ("de", "Ich habe heute keine Zeit, kannst du morgen vorbeikommen?"),
    ("de", "Was ist der beste Weg, um Deutsch zu lernen?"),
    ("de", "Das Wetter ist heute so schoen, wir gehen an den See"),
    ("nl", "Dit is een test van de taal in het Nederlands voor jou"),
    ("nl", "Kun je me helpen met mijn huiswerk voor morgen of niet?"),
    ("nl", "We gaan vanavond naar de film, heb je zin om mee te gaan?"),
    ("da", "Jeg har en hund og en kat, og de er gode venner"),
    ("da", "Kan du hjaelpe mig med at skrive et brev til min chef?"),
    ("no", "Det er for kaldt i dag til at gaa en tur i parken"),
    ("no", "Hva er den beste maaten aa laere norsk paa?"),
    ("sv", "Jag vill veta hur man lagar en god middag till min familj"),
    ("id", "Saya ingin belajar bahasa Inggris dengan cepat dan mudah"),
    ("id", "Apa kabar? Saya sudah makan siang di kantor tadi"),
    ("tl", "Ako ay pupunta sa palengke mamaya para bumili ng isda"),
    ("tl", "Ano ang pinakamagandang paraan para matuto ng Ingles?"),
    ("sw", "Habari yako? Mimi ninaenda sokoni kununua matunda leo"),
    ("tr", "Bu aksam arkadaslarimla sinemaya gidecegim, sen de gel"),
    ("pl", "To jest moj dom i to jest moja rodzina, ktora mieszka tutaj"),
    ("pl", "Czy mozesz mi pomoc napisac list do mojego szefa?"),
    ("ro", "Am fost la magazin sa cumpar paine si lapte pentru micul dejun"),
)
"""Chat sentences of 14 languages typed without accents (written for these tests)."""


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(
            st.lists(
                st.sampled_from(
                    [text for _, text in OTHER_LANGUAGES_IN_ASCII]
                    + [
                        "Tell me who you are.",
                        "这是一个测试句子，我们在这里写中文。",
                        "```x = 1```",
                        "ok",
                    ]
                ),
                max_size=12,
            ).map(" ".join),
            max_size=4,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_threads_judged_in_a_batch_are_judged_as_alone(threads):
    """The model asked once for every message of a batch (then once for the ones it is
    unsure of) names each thread and message as asking for that thread alone does."""
    assert thread_languages(threads) == [thread_language(texts) for texts in threads]


def test_plain_english_is_told_without_the_model_and_nothing_else_is():
    """English chat turns the model gets wrong on their own are English (they are told by
    their function words, without the model), and no sentence of another language typed
    in ASCII is taken for English by that rule."""
    for text in (
        "Tell me who you are.",
        "Wow, how do you know so much?",
        "How do you cook sous vide?",
    ):
        assert message_language(text) == "en", text
    taken = [text for _, text in OTHER_LANGUAGES_IN_ASCII if message_language(text) == "en"]
    assert taken == []


def test_short_chinese_turns_the_model_takes_for_others_are_chinese(tmp_path):
    """fastText names these alpaca_zh turns Japanese, Wu and Vietnamese; Japanese with its
    kana stays Japanese."""
    records = [
        chat("生成与电动汽车相关的适当关键词。", "电动汽车、充电桩、续航里程、锂电池。"),
        chat("阅读以下情景并提出适当的问题。", "腐败往往源自人类内心的贪婪欲望。"),
        chat(
            "日本の首都はどこですか？教えてください。",
            "日本の首都は東京です。とても大きな都市です。",
        ),
    ]
    out = tmp_path / "out.jsonl"
    result = mms("curate", write(tmp_path / "in.jsonl", records), "-o", out, "--languages", "zh")
    assert result.exit_code == 0, result.output
    kept = threads_of(out)
    assert [t["meta"]["language"] for t in kept] == ["zh", "zh"]
    assert [d["code"] for d in dropped_of(out)] == ["language:ja"]


def test_quality_rules_flag_what_they_name(tmp_path):
    long_cut = (
        "First you open the box and take out the parts, then you lay them on a clean table. "
        "Next you read the manual twice, check every screw against the list, and sort the "
        "panels by size. After that you join the two side panels with the long bolts and"
    )
    records = [
        chat("Tell me a joke", "As an AI language model, I cannot tell jokes."),
        chat("Hi", " "),
        chat("Write a poem", "the sea is blue. " * 40),
        chat(
            "Please repeat after me: the quick brown fox jumps",
            "Please repeat after me: the quick brown fox jumps",
        ),
        chat("Say café", "CafÃ© au lait is my favourite."),
        chat("Explain", long_cut),
        chat("How are you?", "I am well, thank you. How can I help you today?"),
    ]
    out = tmp_path / "out.jsonl"
    result = mms("curate", write(tmp_path / "in.jsonl", records), "-o", out, "--quality", "drop")
    assert result.exit_code == 0, result.output
    assert [d["code"] for d in dropped_of(out)] == [
        "quality:refusal",
        "quality:empty_answer",
        "quality:repetition",
        "quality:copies_user",
        "quality:mojibake",
        "quality:cut_off",
    ]
    assert len(threads_of(out)) == 1


def test_each_quality_finding_names_its_answer_measure_value_and_limit(tmp_path):
    """`meta.quality` lists, per rule and answer, the message, the measure, its value and
    its limit (or the text matched); the list of dropped threads shows the first."""
    records = [
        chat("Hi", " "),
        {"messages": [
            {"role": "user", "content": "Tell me a joke"},
            {"role": "assistant", "content": "As an AI language model, I cannot tell jokes."},
            {"role": "user", "content": "Write a poem"},
            {"role": "assistant", "content": "the sea is blue. " * 40},
        ]},
    ]  # fmt: skip
    out = tmp_path / "out.jsonl"
    result = mms("curate", write(tmp_path / "in.jsonl", records), "-o", out, "--quality", "tag")
    assert result.exit_code == 0, result.output
    empty, two = (thread["meta"]["quality"] for thread in threads_of(out))
    assert empty == [
        {"rule": "empty_answer", "message": 1, "measure": "visible_chars", "value": 0, "limit": 2}
    ]
    assert two[0] == {
        "rule": "repetition", "message": 3, "measure": "top_2gram_share",
        "value": two[0]["value"], "limit": 0.4,
    }  # fmt: skip
    assert two[0]["value"] > 0.4
    assert two[1] == {
        "rule": "refusal", "message": 1, "measure": "phrase",
        "value": "as an ai language model", "limit": None,
    }  # fmt: skip
    dropped = tmp_path / "dropped.jsonl"
    assert mms("curate", tmp_path / "in.jsonl", "-o", dropped, "--quality", "drop").exit_code == 0
    listed = dropped_of(dropped)
    assert [d["code"] for d in listed] == ["quality:empty_answer", "quality:repetition"]
    assert {key: listed[0][key] for key in empty[0]} == empty[0]


PROSE = (
    "First you open the box and take out the parts, then you lay them on a clean table. "
    "Next you read the manual twice, check every screw against the list, and sort the "
    "panels by size. "
)


@pytest.mark.parametrize(
    "ending",
    [
        "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72",
        "So the total is 2 + 3 + 7 = 12\nThe answer is 12",
        "Things to pack:\n1. A torch\n2. Two spare batteries\n- a warm coat",
        "```python\nfor part in parts:\n    print(part)\n```\nRun it\n    print(parts)",
        "| part | count |\n|---|---|\n| screw | 12 |\n| panel | 4",
        "Send it to us #diy #tables",
    ],
)
def test_answers_that_end_without_a_period_by_nature_are_not_cut_off(ending):
    """A final-answer line, a list, code, a table or hashtags end a sound answer."""
    assert quality_flags([Turn(PROSE + ending, "Explain", True)], QualitySettings()) == []


@pytest.mark.parametrize(
    "answer",
    [
        '{"name": "box", "parts": [' + '{"kind": "screw", "size": 4}, ' * 30 + "{}]}",
        "name: box\nparts: many\nsize: large\ncolour: blue\nweight: heavy\nprice: low\n" * 8,
    ],
)
def test_json_and_yaml_answers_neither_repeat_nor_stop(answer):
    assert quality_flags([Turn(answer, "Describe the box as data", True)], QualitySettings()) == []


@pytest.mark.parametrize(
    "ending",
    [
        "After that you join the two side panels with the long bolts and",
        "3. Be clear about your intentions: if you want to see them again, say so and",
        "接着把两块侧板用长螺栓连接起来，拧紧每一颗螺丝，然后把",
    ],
)
def test_prose_and_sentences_in_list_items_that_stop_are_cut_off(ending):
    found = quality_flags([Turn(PROSE + ending, "Explain", True)], QualitySettings())
    assert found == ["cut_off"]


@pytest.mark.parametrize(
    ("user", "answer", "flagged"),
    [
        ("Classify the review as 1 (positive) or 0 (negative).\n\nGreat phone!", "1", False),
        ("这句话是否正确？回答是或否。\n\n太阳从西边升起。", "否", False),
        ("Pick one:\nA. red\nB. blue", "B", False),
        ("Write a poem about the sea.", "1", True),
        ("Is this a question?", ".", True),
    ],
)
def test_a_one_token_label_to_a_closed_prompt_is_not_empty(user, answer, flagged):
    found = quality_flags([Turn(answer, user, True)], QualitySettings())
    assert found == (["empty_answer"] if flagged else [])


SENTENCES = (
    "the sea is blue.",
    "As an AI language model, I cannot do that.",
    "CafÃ© au lait",
    "café au lait",
    "you lay them on a clean table, then",
    "```\nprint(1)\nprint(1)\n```",
    " ",
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.lists(st.sampled_from(SENTENCES), max_size=60).map(" ".join),
                st.sampled_from(("", "the sea is blue.", "Tell me about café au lait")),
            ),
            min_size=1,
            max_size=3,
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from((1.0, 2.0)),
)
def test_answers_judged_in_a_batch_are_judged_as_alone(threads, factor):
    """The quality rules over a batch of threads (one RE2 scan, one n-gram count for all
    answers) flag each thread exactly as judging it alone does."""
    rules = QualitySettings(repetition_factor=factor, repetition_min_words=5)
    turns = [
        [
            Turn(answer, user, place == len(thread) - 1)
            for place, (answer, user) in enumerate(thread)
        ]
        for thread in threads
    ]
    assert quality_flags_many(turns, rules) == [quality_flags(each, rules) for each in turns]


@settings(max_examples=200, deadline=None)
@given(st.text(" \t\n\u00a0\u2003ab.", max_size=8), st.integers(0, 4))
def test_an_answer_is_empty_below_its_count_of_visible_characters(text, least):
    """`empty_answer` flags an answer with fewer than `min_answer_chars` characters that
    are not white space (Unicode's), whatever the spaces around or between them."""
    rules = QualitySettings(rules=("empty_answer",), min_answer_chars=least)
    flagged = quality_flags([Turn(text, "", True)], rules) == ["empty_answer"]
    assert flagged == (len("".join(text.split())) < least)


MOJIBAKE_ALPHABET = "aeé ÃÂ©®€œ™°²³×ØÙ–—‚„‘’“”•‹›ВГРСЂâóàäê\n"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(MOJIBAKE_ALPHABET, max_size=12), min_size=1, max_size=20))
@example([" Ã€", "Ã©", "ÂŸ", "вЂ", "‚Äî", "Ø· Ù„", "naïve café", "à²"])
def test_ftfy_badness_spelled_for_re2_finds_what_ftfy_finds(texts):
    """ftfy's badness expression rewritten for RE2 (searched over a batch by Arrow)
    matches exactly the texts ftfy's own search does, and so does the batch search."""
    expression = re2_syntax(ftfy.badness.BADNESS_RE)
    found = pc.match_substring_regex(pa.array(texts, pa.string()), expression).to_pylist()
    assert found == [ftfy.badness.is_bad(text) for text in texts]
    assert bad_texts(texts) == found


# ---------------------------------------------------------------------------- plugins

PLUGINS = """
def no_urls(thread, max_urls=0):
    urls = sum(m.content.count("http") for m in thread.messages)
    return "has urls" if urls > max_urls else None

def explodes(thread):
    raise ValueError("boom")
"""


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    (tmp_path / "my_filters.py").write_text(PLUGINS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_filters"
    sys.modules.pop("my_filters", None)


def test_a_plugins_drops_are_counted_like_ours(tmp_path, plugin_module):
    records = [
        chat("See http://a.example", "ok"),
        chat("Plain", "fine"),
        chat("x", "http://b http://c"),
    ]
    out = tmp_path / "out.jsonl"
    result = mms(
        "curate",
        write(tmp_path / "in.jsonl", records),
        "-o",
        out,
        "--plugin",
        f"{plugin_module}:no_urls",
    )
    assert result.exit_code == 0, result.output
    assert len(threads_of(out)) == 1
    assert [d["code"] for d in dropped_of(out)] == ["plugin:no_urls:has urls"] * 2
    assert "2 read" not in result.output and "3 threads = 1 written + 2 dropped" in result.output


def test_a_failing_plugin_is_a_clear_error(tmp_path, plugin_module):
    source = write(tmp_path / "in.jsonl", [chat("a", "b")])
    failed = mms(
        "curate", source, "-o", tmp_path / "o.jsonl", "--plugin", f"{plugin_module}:explodes"
    )
    assert failed.exit_code == 1
    assert "plugin my_filters:explodes raised ValueError: boom on thread" in failed.output
    missing = mms(
        "curate", source, "-o", tmp_path / "o.jsonl", "--plugin", f"{plugin_module}:nothing"
    )
    assert missing.exit_code == 2 and "cannot be loaded" in missing.output
    assert "Traceback" not in failed.output + missing.output


# ------------------------------------------------------------------------------- runs


def _run_config(folder: Path, source: Path, workers: int, plugin: str) -> Path:
    """A curating run's config in `folder/w{workers}/run.yaml`, its output `out` there (the
    same names whatever the workers: the reports name them)."""
    config = folder / f"w{workers}" / "run.yaml"
    config.parent.mkdir()
    config.write_text(
        f"name: curated\ninputs:\n  - path: {source}\noutput: {config.parent / 'out'}\n"
        "stages:\n  lint: {fail_on: never}\n  pii: {}\n  language: {languages: [en]}\n"
        f"  quality: {{action: drop}}\n  decontaminate: {{against: [{MT_BENCH}]}}\n"
        f"  plugins: [{{use: '{plugin}:no_urls'}}]\n"
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}}}\nengine: {{workers: {workers}}}\n"
    )
    return config


def test_a_run_curates_with_the_same_bytes_for_any_workers(tmp_path, plugin_module):
    prompts = _mt_bench_prompts()
    records = [
        chat(f"Mail {n}@example.com about item {n}", f"Answer number {n} is done.")
        for n in range(30)
    ]
    records += [
        chat(prompts[0], "Here is the note you asked for."),
        chat("法国的首都是哪里？请告诉我。", "是巴黎。这是法国的首都。"),
        chat("see http://x", "ok"),
    ]
    folder = tmp_path / "in"
    folder.mkdir()
    for index in range(3):
        write(folder / f"part{index}.jsonl", records[index::3])
    outputs = []
    for workers in (1, 2):
        result = mms("run", _run_config(tmp_path, folder, workers, plugin_module))
        assert result.exit_code == 0, result.output
        out = tmp_path / f"w{workers}" / "out"
        outputs.append(
            {
                p.relative_to(out).as_posix(): p.read_bytes()
                for p in out.rglob("*")
                if p.is_file() and p.name != "manifest.json" and p.name != "README.md"
            }
        )
    assert outputs[0] == outputs[1]
    manifest = orjson.loads((tmp_path / "w1" / "out" / "manifest.json").read_bytes())
    counts = manifest["counts"]
    assert counts["threads_dropped"] == {
        "contaminated": 1,
        "language:zh": 1,
        "plugin:no_urls:has urls": 1,
    }
    assert counts["threads_tagged"]["pii:redacted:EMAIL"] == 30
    assert counts["balanced"] is True
    stats = orjson.loads((tmp_path / "w1" / "out" / "reports" / "stats.json").read_bytes())
    assert stats["run"]["tagged"] == counts["threads_tagged"]


# -------------------------------------------------------------------------- realdata

REAL_FILES = (
    "llamafactory/alpaca_en_demo.json",
    "llamafactory/alpaca_zh_demo.json",
    "llamafactory/glaive_toolcall_en_demo.json",
    "llamafactory/glaive_toolcall_zh_demo.json",
    "openai_finetune_examples/weather_chat_fine_tuning.jsonl",
    "open_assistant/en_100_text.jsonl",
)


def test_real_threads_with_planted_mt_bench_questions(data, tmp_path):
    """Real threads of six public files, 40 of them copied with an MT-Bench question
    planted in their first user turn (verbatim, re-cased, or with a sentence added), all
    five stages on: exactly the planted copies are dropped as contaminated, every kept
    thread validates and every JSON content parses, the books balance, and the threads of
    the English and Chinese sets are mostly named so."""
    real = data / "realdata"  # copies of the files, see their PROVENANCE.txt
    threads = list(read([str(real / name) for name in REAL_FILES]))
    questions = [
        orjson.loads(line)["turns"][0]
        for line in (real / "fastchat" / "mt_bench_question.jsonl").read_bytes().splitlines()
    ]
    rng = random.Random(7)
    planted = []
    for index, question in enumerate(rng.sample(questions, 40)):
        copy = rng.choice([t for t in threads if t.messages[0].role == "user"]).to_dict()
        text = [question, question.upper(), question + " Please be brief."][index % 3]
        copy["messages"][0]["content"] = text
        copy["id"] = f"planted-{index}"
        planted.append(copy)
    records = [t.to_dict() for t in threads] + planted
    source = write(tmp_path / "in.jsonl", records)
    (tmp_path / "all.yaml").write_text(
        "pii: {assistant: redact}\nlanguage: {}\nquality: {action: tag}\n"
        f"decontaminate: {{against: [{real / 'fastchat' / 'mt_bench_question.jsonl'}]}}\n"
    )
    out = tmp_path / "out.jsonl"
    result = mms("curate", source, "-o", out, "--config", tmp_path / "all.yaml")
    assert result.exit_code == 0, result.output
    kept, dropped = threads_of(out), dropped_of(out)
    assert sorted(d["id"] for d in dropped) == sorted(p["id"] for p in planted)
    assert {d["code"] for d in dropped} == {"contaminated"}
    assert len(kept) + len(dropped) == len(records)
    for thread in kept:
        assert not validate_thread_dict(thread), thread["id"]
        for message in thread["messages"]:
            if (message.get("format") or "").endswith("json"):
                json.loads(message["content"])
    origin = {thread.id: Path(thread.meta["source"]).name for thread in threads}
    by_source: dict[str, list[str | None]] = {}
    for thread in kept:
        by_source.setdefault(origin[thread["id"]], []).append(thread["meta"].get("language"))
    for name, language in (("alpaca_en_demo.json", "en"), ("alpaca_zh_demo.json", "zh")):
        named = by_source[name]
        assert named.count(language) >= 0.95 * len(named), (name, named.count(language))
