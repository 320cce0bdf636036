"""Labels policies and source weights (DESIGN §4): `assistant` trains every assistant
message, `last_assistant` only the thread's final assistant turn; under both, a message its
source weighted 0 trains nothing, and every trained message's stop token is trained.

References: properties on generated threads (every stop token of a trained message is
trained, a weight-0 message has no trained token, `last_assistant` is `assistant` with
everything before the final turn masked), transformers' `{% generation %}` mask of the
shipped chat template, and trained text written out by hand for real threads."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.mms import Message, Thread
from pipeline.tokenize import IGNORE, LABEL_POLICIES, EncodedThread, Renderer, load_tokenizer
from pipeline.tokenize.hf_files import chat_template
from pipeline.tokenize.renderer import final_turn_start
from tests.conftest import REPO
from tests.reading import read_all
from tests.tokenizer_fixtures import tokenizer_file

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
WEIGHTED_SAMPLE = REPO / "data_samples" / "openai" / "chat_completions.jsonl"


@pytest.fixture(scope="module")
def renderers() -> dict[str, Renderer]:
    base = load_tokenizer(SAMPLE_TOKENIZER)
    return {policy: Renderer(base, policy=policy) for policy in LABEL_POLICIES}


# --------------------------------------------------------------------------- generated threads

_WORDS = st.sampled_from(["", "a", "yes", "Oslo", "{}", "42", "hello world"])
_MESSAGE = st.one_of(
    st.builds(Message.user, _WORDS),
    st.builds(Message.developer, _WORDS),
    st.builds(Message.context, _WORDS, st.sampled_from([None, "search"])),
    st.builds(
        Message.assistant,
        _WORDS,
        format=st.sampled_from(["markdown", "get:json"]),
        end_turn=st.booleans(),
        weight=st.sampled_from([None, None, 0, 0.5]),
    ),
)
THREADS = st.builds(
    lambda messages: Thread("generated", messages), st.lists(_MESSAGE, min_size=1, max_size=8)
)


def _spans(thread: Thread, encoded: EncodedThread) -> list[range]:
    """Each message's token positions."""
    starts = [0, *encoded.message_ends[:-1]]
    return [range(a, b) for a, b in zip(starts, encoded.message_ends, strict=True)]


def _stop_token(thread: Thread, encoded: EncodedThread, index: int) -> int | None:
    """The position of the token that stops assistant message `index`: its <|end_turn|>,
    else the <|role|> that opens the next message of another role (or the one appended at
    the end); None when the next message is the assistant going on."""
    spans = _spans(thread, encoded)
    message = thread.messages[index]
    if message.end_turn:
        return spans[index][-1]
    following = thread.messages[index + 1] if index + 1 < len(thread.messages) else None
    if following is None:
        return len(encoded.input_ids) - 1
    return None if following.role == "assistant" else spans[index + 1][0]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(thread=THREADS)
def test_every_trained_message_trains_its_stop_token_and_weight_zero_trains_nothing(
    renderers, thread
):
    for policy, renderer in renderers.items():
        encoded = renderer.encode(thread)
        labels, ids = encoded.labels, encoded.input_ids
        assert all(label in (IGNORE, token) for label, token in zip(labels, ids, strict=True))
        spans = _spans(thread, encoded)
        for index, message in enumerate(thread.messages):
            if message.role != "assistant":
                continue
            trained = [p for p in spans[index] if labels[p] != IGNORE]
            stop = _stop_token(thread, encoded, index)
            if message.weight == 0:
                # its <|role|> alone, when it is the halt of a trained message it continues
                previous = thread.messages[index - 1] if index else None
                halts = (
                    previous is not None
                    and previous.role == "assistant"
                    and previous.end_turn is False
                    and any(labels[p] != IGNORE for p in spans[index - 1])
                )
                assert trained == ([spans[index][0]] if halts else []), (policy, index)
                if stop is not None:
                    assert labels[stop] == IGNORE, (policy, index, "the halt of a weight-0 message")
            elif trained and stop is not None:
                assert labels[stop] != IGNORE, (policy, index, "an untrained stop token")
        last = final_turn_start(thread.messages)
        if last < len(thread.messages):
            final = max(i for i, m in enumerate(thread.messages) if m.role == "assistant")
            if thread.messages[final].weight != 0:
                assert any(labels[p] != IGNORE for p in spans[final]), (policy, "final turn")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(thread=THREADS)
def test_last_assistant_is_assistant_with_everything_before_the_final_turn_masked(
    renderers, thread
):
    every = renderers["assistant"].encode(thread)
    last = renderers["last_assistant"].encode(thread)
    assert last.input_ids == every.input_ids
    start = final_turn_start(thread.messages)
    first_token = ([0, *every.message_ends])[start] if start < len(thread.messages) else None
    expected = [
        label if first_token is not None and position >= first_token else IGNORE
        for position, label in enumerate(every.labels)
    ]
    assert last.labels == expected


def test_the_final_turn_spans_tool_calls_and_results_but_not_an_ended_turn():
    user, ended = Message.user("q"), Message.assistant("a")
    call, result = Message.assistant("{}", "get:json", end_turn=False), Message.context("r")
    assert final_turn_start([user, ended, user, call, result, call, result, ended]) == 3
    assert final_turn_start([user, ended, result, ended]) == 3  # a turn ended before
    assert final_turn_start([user, ended, user]) == 1  # trailing prompt: the last answer
    assert final_turn_start([user, result]) == 2  # no assistant message: nothing


# --------------------------------------------------------------------------- the shipped template

transformers = pytest.importorskip(
    "transformers", reason="transformers (the dev extra) renders the chat template"
)


@pytest.fixture(scope="module")
def hf_sample(tmp_path_factory) -> object:
    """transformers over the sample tokenizer with the MMS tokens added (as shipped)."""
    from pipeline.output.tokenizer import write_tokenizer

    base = load_tokenizer(SAMPLE_TOKENIZER)
    folder = tmp_path_factory.mktemp("sample")
    path = write_tokenizer(folder, Renderer(base), base)
    return transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))


def _template_labels(hf, thread: Thread, policy: str) -> tuple[list[int], list[int]]:
    out = hf.apply_chat_template(
        [m.to_dict() for m in thread.messages],
        chat_template=chat_template(bos=False, policy=policy),
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    ids = out["input_ids"]
    return ids, [i if m else IGNORE for i, m in zip(ids, out["assistant_masks"], strict=True)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(thread=THREADS)
def test_the_chat_template_marks_what_each_policy_trains(renderers, hf_sample, thread):
    for policy, renderer in renderers.items():
        encoded = renderer.encode(thread)
        ids, labels = _template_labels(hf_sample, thread, policy)
        assert ids == encoded.input_ids
        assert labels == encoded.labels, policy


# --------------------------------------------------------------------------- real threads


def _trained_text(renderer: Renderer, encoded: EncodedThread) -> list[str]:
    """Each run of consecutive trained tokens, decoded with the special tokens shown."""
    runs: list[list[int]] = []
    previous = False
    for label in encoded.labels:
        if label != IGNORE:
            if not previous:
                runs.append([])
            runs[-1].append(label)
        previous = label != IGNORE
    return [renderer.tokenizer.decode(run, skip_special_tokens=False) for run in runs]


@pytest.fixture(scope="module")
def llama3() -> dict[str, Renderer]:
    """The Llama-3 family (the real tokenizer when ../shared is present, else the small one
    of its shape), under each policy."""
    base = load_tokenizer(tokenizer_file("bytelevel-llama3").parent)
    return {policy: Renderer(base, policy=policy) for policy in LABEL_POLICIES}


def _sample_thread(name: str, locator: str) -> Thread:
    (thread,) = [
        t for t in read_all(REPO / "data_samples" / name)[0] if t.meta["locator"].endswith(locator)
    ]
    return thread


@pytest.fixture(scope="module")
def two_turns() -> Thread:
    """Two sample conversations one after the other (sharegpt's llamafactory_tools #3, then
    openai's parallel-calls): a call and its answer; then a turn of thought, two calls,
    their results and the answer."""
    first = _sample_thread("sharegpt/llamafactory_tools.jsonl", ":3")
    second = _sample_thread("openai/chat_completions.jsonl", ":2")
    developer = [m for m in second.messages if m.role == "developer"]
    rest = [m for m in second.messages if m.role != "developer"]
    return Thread("two-turns", [*developer, *first.messages, *rest])


CALL = 'convert_currency:json<|content|>{"amount":100,"from":"USD","to":"EUR"}<|role|>'
ANSWER = "markdown<|content|>100 USD is about 92.50 EUR.<|end_turn|>"
FINAL_CALLS = [
    "markdown<|content|>Checking both cities.<|role|>assistant<|format|>"
    'get_weather:json<|content|>{"city":"Oslo"}<|role|>',
    'get_weather:json<|content|>{"city":"Lima","unit":"c"}<|role|>',
]
FINAL_ANSWER = "markdown<|content|>Oslo is at -3 °C, Lima at 19 °C.<|end_turn|>"
"""The trained text of two_turns, written out by hand."""


def test_policies_on_a_thread_with_tool_calls(llama3, two_turns):
    """Every assistant message is trained under `assistant`; under `last_assistant` only
    the last turn: its thought, both calls with their halts, and the answer."""
    every, last = llama3["assistant"], llama3["last_assistant"]
    final = [*FINAL_CALLS, FINAL_ANSWER]
    assert _trained_text(every, every.encode(two_turns)) == [CALL, ANSWER, *final]
    assert _trained_text(last, last.encode(two_turns)) == final


def test_a_weight_zero_answer_keeps_its_calls_trained(llama3, two_turns):
    """two_turns with its final answer weighted 0: the calls before it are still trained,
    with their halts; the answer and its end of turn are not."""
    answer = dataclasses.replace(two_turns.messages[-1], weight=0.0)
    weighted = Thread(two_turns.id, [*two_turns.messages[:-1], answer])
    last = llama3["last_assistant"]
    assert _trained_text(last, last.encode(weighted)) == FINAL_CALLS
    every = llama3["assistant"]
    assert _trained_text(every, every.encode(weighted)) == [CALL, ANSWER, *FINAL_CALLS]


# --------------------------------------------------------------------------- the CLI


def _tokenize(tmp_path: Path, *args: str) -> tuple[Path, str]:
    out = tmp_path / "out"
    command = ["tokenize", str(WEIGHTED_SAMPLE), "--tokenizer", str(SAMPLE_TOKENIZER)]
    result = CliRunner().invoke(main, [*command, "-o", str(out), *args])
    assert result.exit_code == 0, result.output
    return out, result.output


@pytest.mark.parametrize("policy", LABEL_POLICIES)
def test_mms_tokenize_records_the_policy_and_verify_checks_it(tmp_path, policy):
    out, output = _tokenize(tmp_path, "--train-on", policy)
    assert "1 assistant messages weighted 0 by their source: rendered, not trained" in output
    record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    assert record["label_policy"] == policy
    config = orjson.loads((out / "tokenizer" / "tokenizer_config.json").read_bytes())
    assert f"set mms_train_on = '{policy}'" in config["chat_template"]
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
    assert "rows against the chat template" in verified.output


def test_verify_fails_when_the_recorded_policy_is_not_the_one_the_labels_follow(tmp_path):
    out, _ = _tokenize(tmp_path, "--train-on", "last_assistant")
    special = out / "tokenizer" / "mms_special_tokens.json"
    record = orjson.loads(special.read_bytes())
    special.write_bytes(orjson.dumps({**record, "label_policy": "assistant"}))
    verified = CliRunner().invoke(main, ["verify", str(out), "--no-template"])
    assert verified.exit_code == 1
    assert "labels differ from its messages rendered again" in verified.output


def test_a_weight_zero_message_is_stored_with_its_weight_and_not_trained(tmp_path):
    out, _ = _tokenize(tmp_path)
    rows = pq.read_table(next((out / "data").glob("*.parquet"))).to_pylist()
    row = next(r for r in rows if r["id"] == "plain-chat")
    weighted = [m for m in row["messages"] if m["weight"] == 0]
    assert [m["content"] for m in weighted] == ["7"]
    renderer = Renderer(load_tokenizer(out / "tokenizer"))
    trained = renderer.tokenizer.decode([v for v in row["labels"] if v != IGNORE])
    assert "7" not in trained and trained  # the other answer is still trained


def test_the_run_config_chooses_the_policy(tmp_path):
    config = tmp_path / "run.yaml"
    out = tmp_path / "out"
    config.write_text(
        "name: policy\n"
        f"output: {out}\n"
        f"inputs: [{{path: {WEIGHTED_SAMPLE}}}]\n"
        "stages:\n"
        "  lint: {fail_on: never}\n"
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, train_on: last_assistant}}\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 0, result.output
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["tokenizer"]["label_policy"] == "last_assistant"
    assert manifest["counts"]["zero_weight_messages"] == 1
    assert "policy\n`last_assistant`" in (out / "README.md").read_text(encoding="utf-8")
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output


def test_inspect_shows_the_tokens_a_policy_trains(tmp_path):
    args = ["inspect", str(WEIGHTED_SAMPLE), "--id", "plain-chat", "--tokenizer"]
    args += [str(SAMPLE_TOKENIZER), "--triples"]
    every = CliRunner().invoke(main, args)
    last = CliRunner().invoke(main, [*args, "--train-on", "last_assistant"])
    assert every.exit_code == last.exit_code == 0, every.output + last.output
    trained = [line for line in every.output.splitlines() if "\t-100\t" not in line]
    trained_last = [line for line in last.output.splitlines() if "\t-100\t" not in line]
    assert len(trained_last) <= len(trained)
    refused = CliRunner().invoke(main, ["inspect", str(WEIGHTED_SAMPLE), "--train-on", "assistant"])
    assert refused.exit_code == 2 and "--train-on applies only with --tokenizer" in refused.output
