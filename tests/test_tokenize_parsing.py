"""The renderer's inverse (pipeline/tokenize/parsing.py): what a model generates after the
generation prompt, back to MMS assistant messages. The property: every trained span of a
rendered row, parsed as the completion the model learns to write there, gives back the row's
trained assistant messages (format, content, end_turn) and the stop the labels train; for
random threads (special-token literals in content included) and for real output rows, parsed
with the tokenizer the output ships as a server loads it."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.mms import Message, Thread
from pipeline.tokenize import Renderer, load_tokenizer
from pipeline.tokenize.parsing import (
    Completion,
    CompletionParseError,
    CompletionParser,
    PartialMessage,
    ToolCall,
    parse_completion,
    parse_spans,
    tool_call,
    trained_spans,
)
from pipeline.tokenize.renderer import final_turn_start
from pipeline.tokenize.special import MMS_SPECIAL_TOKENS
from tests.conftest import REPO
from tests.tokenizer_fixtures import tokenize_inputs, tokenizer_file

SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
RENDERERS = {
    policy: Renderer(load_tokenizer(SAMPLE_TOKENIZER), policy=policy)
    for policy in ("assistant", "last_assistant")
}
RENDERER = RENDERERS["assistant"]


def ids_of(renderer: Renderer, *parts: str) -> list[int]:
    """The ids of a completion written as parts: an MMS token, or text encoded as text."""
    specials = renderer.special_ids.as_dict()
    ids: list[int] = []
    for part in parts:
        if part in specials:
            ids.append(specials[part])
        else:
            ids += renderer._text.encode_ids([part])[0]
    return ids


# ---------------------------------------------------------------------- what parses


def test_a_turn_that_ends():
    completion = parse_completion("markdown<|content|>Hello!<|end_turn|>")
    assert completion == Completion((Message.assistant("Hello!"),), "end_turn")
    assert completion.ended_turn and not completion.halted and completion.tool_calls == []


def test_a_tool_call_halts_and_gives_its_name_and_arguments():
    completion = parse_completion('weather:json<|content|>{"location": "Tokyo"}<|role|>')
    (message,) = completion.messages
    assert message == Message.assistant('{"location": "Tokyo"}', "weather:json", end_turn=False)
    assert completion.halted and completion.stop == "halt"
    assert completion.tool_calls == [ToolCall("weather", {"location": "Tokyo"}, "weather:json")]


def test_a_continuation_after_a_halt_is_another_assistant_message():
    text = (
        "reasoning<|content|>Look it up.<|role|>assistant<|format|>"
        'weather:json<|content|>{"q": 1}<|role|>assistant<|format|>'
        "markdown<|content|>Done.<|end_turn|>"
    )
    completion = parse_completion(text)
    assert [(m.format, m.content, m.end_turn) for m in completion.messages] == [
        ("reasoning", "Look it up.", False),
        ("weather:json", '{"q": 1}', False),
        ("markdown", "Done.", True),
    ]
    assert completion.ended_turn and [c.name for c in completion.tool_calls] == ["weather"]


def test_ids_keep_content_that_spells_an_mms_token_text_cannot():
    """Content that spells `<|end_turn|>` is text in the ids (never the special id), so ids
    parse exactly; text reads every literal as the token: ambiguous, documented."""
    content = "Use <|end_turn|> to stop, <|role|> to halt."
    ids = ids_of(RENDERER, "markdown", "<|content|>", content, "<|end_turn|>")
    assert parse_completion(ids, RENDERER).messages == (Message.assistant(content),)
    with pytest.raises(CompletionParseError):
        parse_completion(RENDERER.tokenizer.decode(ids, skip_special_tokens=False))


def test_ids_as_arrays_and_tensors_and_pads_after_the_stop():
    np = pytest.importorskip("numpy")
    ids = ids_of(RENDERER, "json", "<|content|>", "[1]", "<|end_turn|>")
    pad = RENDERER.added_pad[1]
    expected = (Message.assistant("[1]", "json"),)
    assert parse_completion(np.array([*ids, pad, pad]), RENDERER).messages == expected
    torch = pytest.importorskip("torch")
    assert parse_completion(torch.tensor(ids), RENDERER).messages == expected
    with pytest.raises(TypeError, match="one sequence"):
        parse_completion(torch.tensor([ids, ids]), RENDERER)


def test_a_completion_cut_short_is_an_error_unless_partial():
    with pytest.raises(
        CompletionParseError, match=r"got the end of the output \(cut short: max_new_tokens\?"
    ):
        parse_completion("weather:json<|content|>{")
    cut = parse_completion("weather:json<|content|>{", partial=True)
    assert cut.stop is None and cut.messages == ()
    assert cut.unfinished == PartialMessage("weather:json", "{")
    # a server halting on start sees the format as soon as <|content|> is written
    assert parse_completion("browser:js<|content|>", partial=True).unfinished == PartialMessage(
        "browser:js", ""
    )
    assert parse_completion("brow", partial=True).unfinished == PartialMessage("brow", None)
    header = parse_completion("md<|content|>a<|role|>assis", partial=True)
    assert header.messages[0].end_turn is False and header.unfinished == PartialMessage(None, None)


def test_a_header_when_the_prompt_did_not_end_with_format():
    text = "<|role|>assistant<|format|>json<|content|>{}<|end_turn|>"
    completion = parse_completion(text, prompt_ended_with_format=False)
    assert completion.messages == (Message.assistant("{}", "json"),)
    with pytest.raises(CompletionParseError, match="expected a header"):
        parse_completion("json<|content|>{}<|end_turn|>", prompt_ended_with_format=False)


# ---------------------------------------------------------------------- malformed output


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a completion (the format's name first), got the end of the completion"),
        ("<|content|>hi<|end_turn|>", "expected the format's name"),
        (
            "markdown<|end_turn|>",
            "expected <|content|> after the format 'markdown', got <|end_turn|> at character 8",
        ),
        ("markdown hi<|end_turn|>", "got <|end_turn|> at character 11"),
        (
            "md<|name|>x<|content|>hi<|end_turn|>",
            "expected <|content|> after the format 'md', got <|name|>",
        ),
        (
            "md<|content|>a<|content|>b<|end_turn|>",
            "expected <|end_turn|> (turn ended) or <|role|> (halt) after the content, got <|content|> at character 14",
        ),
        ("md<|content|>a<|format|>b<|end_turn|>", "got <|format|>"),
        (
            "md<|content|>a<|end_turn|><|role|>",
            "expected the end of the completion after <|end_turn|>, got <|role|>",
        ),
        (
            "md<|content|>a<|role|>context<|name|>weather<|content|>19C",
            "role 'assistant' after <|role|>, got text 'context' at character 22",
        ),
        ("md<|content|>a<|role|><|role|>", "role 'assistant' after <|role|>, got <|role|>"),
        (
            "md<|content|>a<|role|>assistant<|content|>b<|end_turn|>",
            "<|format|> after <|role|>assistant, got <|content|>",
        ),
        ("md<|content|>a<|role|>assistant<|format|><|content|>b", "expected the format's name"),
    ],
)
def test_malformed_text_says_what_was_expected_and_where(text, message):
    with pytest.raises(CompletionParseError) as caught:
        parse_completion(text)
    assert str(caught.value).startswith("malformed completion: expected ")
    assert message in str(caught.value)
    assert caught.value.unit == "character"


def test_malformed_ids_name_the_token_index_and_keep_what_parsed():
    ids = ids_of(RENDERER, "md", "<|content|>", "a", "<|role|>", "user", "<|content|>")
    with pytest.raises(CompletionParseError) as caught:
        parse_completion(ids, RENDERER)
    error = caught.value
    assert (
        error.unit == "token"
        and ids[error.position : error.position + 1] == ids_of(RENDERER, "user")[:1]
    )
    assert f"at token {error.position}" in str(error)
    assert error.parsed == (Message.assistant("a", "md", end_turn=False),)


def test_a_stray_special_or_unknown_id_is_named():
    pad = RENDERER.added_pad[1]
    ids = ids_of(RENDERER, "md", "<|content|>", "a")
    with pytest.raises(CompletionParseError, match=r"the special token <\|pad\|> \(id \d+\)"):
        parse_completion([*ids, pad, *ids_of(RENDERER, "<|end_turn|>")], RENDERER)
    with pytest.raises(CompletionParseError, match=r"id 999999 \(the vocabulary has"):
        parse_completion([*ids, 999999], RENDERER)
    with pytest.raises(TypeError, match="needs the tokenizer"):
        parse_completion(ids)


def test_tool_call_errors_are_clear():
    with pytest.raises(CompletionParseError, match="JSON arguments for the tool call 'w:json'"):
        tool_call(Message.assistant("{not json", "w:json", end_turn=False))
    with pytest.raises(CompletionParseError, match="of format 'browser:js'"):
        tool_call(Message.assistant("open()", "browser:js", end_turn=False))
    with pytest.raises(CompletionParseError, match="a user message"):
        tool_call(Message.user("{}"))
    assert tool_call(Message.assistant("[]", "ns:get:json", end_turn=False)) == ToolCall(
        "ns:get", [], "ns:get:json"
    )


# ---------------------------------------------------------------------- the property


Span = tuple[bool, list[tuple[str, str, bool]], str | None]
"""A trained span: whether it opens with a header `<|role|>assistant<|format|>`, its
messages (format, content, end_turn), and its stop (None: no stop)."""


def expected_spans(thread: Thread, policy: str) -> list[Span]:
    """The trained spans DESIGN §4 gives a thread: its trained assistant messages, one span
    per run of them that continue each other (end_turn false, then another trained assistant
    message: the header trains), ending with `<|end_turn|>` or with the halt `<|role|>` (also
    before an untrained assistant message, weight 0, that continues it: every trained span
    ends in a stop). A span opens with the header when an untrained message it continues
    comes before it."""
    messages = thread.messages
    first = final_turn_start(messages) if policy == "last_assistant" else 0
    trained = [
        m.role == "assistant" and m.trained and index >= first for index, m in enumerate(messages)
    ]
    spans: list[Span] = []
    for index, message in enumerate(messages):
        if not trained[index]:
            continue
        entry = (message.format or "markdown", message.content, bool(message.end_turn))
        previous = messages[index - 1] if index else None
        continues = previous is not None and previous.role == "assistant" and not previous.end_turn
        if continues and trained[index - 1]:
            spans[-1][1].append(entry)
        else:
            spans.append((continues, [entry], None))
        following = messages[index + 1] if index + 1 < len(messages) else None
        if message.end_turn:
            stop = "end_turn"
        elif following is not None and following.role == "assistant" and trained[index + 1]:
            stop = None  # continued by this span: its next message says how it stops
        else:
            stop = "halt"  # before another role, or an assistant message weighted 0
        spans[-1] = (spans[-1][0], spans[-1][1], stop)
    return spans


def parsed_spans(ids: list[int], labels: list[int], tokenizer) -> list[Span]:
    """The row's trained spans parsed, in the same shape; a span with no stop ends with its
    last message unfinished (end_turn false: an untrained continuation follows)."""
    found: list[Span] = []
    parser = CompletionParser(tokenizer)
    headers = [parser.opens_with_role(span) for span in trained_spans(ids, labels)]
    for header, completion in zip(headers, parse_spans(ids, labels, tokenizer), strict=True):
        entries = [(m.format, m.content, m.end_turn) for m in completion.messages]
        if completion.unfinished is not None:
            unfinished = completion.unfinished
            entries.append((unfinished.format, unfinished.content, False))
        found.append((header, entries, completion.stop))
    return found


def check_row(thread: Thread, ids: list[int], labels: list[int], tokenizer, policy: str) -> None:
    assert parsed_spans(ids, labels, tokenizer) == expected_spans(thread, policy), thread.id


SPECIAL_LITERALS = st.sampled_from([*MMS_SPECIAL_TOKENS, "<|pad|>", "</s>", "<|eot_id|>"])
PLAIN = st.text(max_size=12)
SPELLING = st.lists(st.one_of(PLAIN, SPECIAL_LITERALS), max_size=4).map("".join)
"""Text that may spell special tokens (the renderer encodes them as text)."""


def threads(text: st.SearchStrategy[str]) -> st.SearchStrategy[Thread]:
    formats = st.one_of(
        st.sampled_from(["markdown", "json", "weather:json", "browser:js", "reasoning"]),
        text.filter(bool),
    )
    assistant = st.builds(
        Message.assistant,
        text,
        format=formats,
        end_turn=st.booleans(),
        weight=st.sampled_from([None, None, 0.0]),  # 0: never trained
    )
    other = st.one_of(
        st.builds(Message.user, text),
        st.builds(Message.developer, text),
        st.builds(Message.context, text, name=st.one_of(st.none(), st.just("weather"))),
    )
    return st.lists(st.one_of(assistant, other), min_size=1, max_size=8).map(
        lambda messages: Thread("t", messages)
    )


WEIGHT_0_BETWEEN = Thread(
    "weight-0",
    [
        Message.user("q"),
        Message.assistant("a", "reasoning", end_turn=False),
        Message.assistant("{}", "w:json", end_turn=False, weight=0),
        Message.assistant("b", end_turn=False),
    ],
)
"""A span halted before an untrained continuation (its <|role|> trained), and one opening
with the header."""


@given(thread=threads(SPELLING), policy=st.sampled_from(["assistant", "last_assistant"]))
@example(thread=WEIGHT_0_BETWEEN, policy="assistant")
def test_every_trained_span_of_a_random_thread_parses_back_to_its_messages(thread, policy):
    encoded = RENDERERS[policy].encode(thread)
    check_row(thread, encoded.input_ids, encoded.labels, RENDERERS[policy], policy)


@given(thread=threads(PLAIN))
@example(thread=WEIGHT_0_BETWEEN)
def test_spans_parse_the_same_from_text_when_no_content_spells_a_token(thread):
    """Decoded with the special tokens kept, a span parses to the same messages as its ids,
    unless some text spells an MMS token (text's known ambiguity)."""
    texts = [m.content + (m.format or "") for m in thread.messages]
    if any(token in text for text in texts for token in MMS_SPECIAL_TOKENS):
        return
    encoded = RENDERER.encode(thread)
    spans = trained_spans(encoded.input_ids, encoded.labels)
    for span, from_ids in zip(
        spans, parse_spans(encoded.input_ids, encoded.labels, RENDERER), strict=True
    ):
        text = RENDERER.tokenizer.decode(span, skip_special_tokens=False)
        header = text.startswith("<|role|>")
        assert parse_completion(text, prompt_ended_with_format=not header, partial=True) == from_ids


# ---------------------------------------------------------------------- real output rows


def _tokenize(tmp_path: Path, tokenizer: Path, *inputs: Path, policy: str = "assistant") -> Path:
    out = tmp_path / f"out-{policy}"
    args = ["tokenize", *map(str, inputs), "--tokenizer", str(tokenizer), "-o", str(out)]
    result = CliRunner().invoke(main, [*args, "--train-on", policy])
    assert result.exit_code == 0, result.output
    return out


def _check_output(out: Path, policy: str) -> int:
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    rows = [
        row
        for shard in sorted((out / "data").glob("*.parquet"))
        for row in pq.read_table(shard).to_pylist()
    ]
    for row in rows:
        messages = [
            Message.from_dict({k: v for k, v in m.items() if v is not None or k == "name"})
            for m in row["messages"]
        ]
        check_row(Thread(row["id"], messages), row["input_ids"], row["labels"], tokenizer, policy)
    return len(rows)


@pytest.mark.parametrize("policy", ["assistant", "last_assistant"])
def test_every_row_of_a_sample_output_parses_back_with_the_shipped_tokenizer(tmp_path, policy):
    samples = REPO / "data_samples"
    inputs = [
        samples / name for name in ("openai", "hermes", "mms", "anthropic", "sharegpt", "gemini")
    ]
    out = _tokenize(tmp_path, SAMPLE_TOKENIZER, *inputs, policy=policy)
    assert _check_output(out, policy) > 20


@pytest.mark.parametrize("family", ["bytelevel-llama3", "bytelevel-qwen2", "sentencepiece-phi3"])
def test_every_row_of_a_real_output_parses_back(tmp_path, family):
    """The Llama-3, Qwen2.5 and Phi-3 tokenizers (real when ../shared is present, else the
    small ones of their shapes) on real files with tool calls (else the repository's)."""
    inputs = tokenize_inputs(
        tmp_path,
        "llamafactory/glaive_toolcall_en_demo.json",
        "openai_finetune_examples/weather_chat_fine_tuning.jsonl",
        "toolbench/answer",
    )
    out = _tokenize(tmp_path, tokenizer_file(family).parent, *inputs)
    assert _check_output(out, "assistant") > 200


# ---------------------------------------------------------------------- the serving guide


def _serving_snippet() -> str:
    guide = (REPO / "docs" / "guides" / "serve.md").read_text(encoding="utf-8")
    return guide.split("```python\n", 1)[1].split("```", 1)[0]  # the site's serving recipe


def _run_snippet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, generate=None) -> dict:
    """The serving guide's snippet against a sample output and a tiny random model (its
    `generate` replaced by `generate` when given), with a `run_tool` of the test's."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from tests.tiny_llama import tiny_llama

    out = _tokenize(tmp_path, SAMPLE_TOKENIZER, REPO / "data_samples" / "mms")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    if not (out / "tokenizer" / "generation_config.json").is_file():
        stops = tokenizer.convert_tokens_to_ids(["<|end_turn|>", "<|role|>"])
        transformers.GenerationConfig(eos_token_id=stops).save_pretrained(out / "tokenizer")
    checkpoint = tmp_path / "checkpoint"
    tiny_llama(len(tokenizer)).save_pretrained(checkpoint)
    code = _serving_snippet().replace("OUT/tokenizer", str(out / "tokenizer"))
    code = code.replace('"CHECKPOINT"', repr(str(checkpoint)))
    calls = []
    namespace = {"run_tool": lambda name, arguments: calls.append((name, arguments)) or "19°C"}
    if generate is not None:
        real = transformers.AutoModelForCausalLM.from_pretrained

        def loaded(*args, **kwargs):
            model = real(*args, **kwargs)
            model.generate = lambda **inputs: generate(tokenizer, **inputs)
            return model

        monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", loaded)
    exec(compile(code, "guides/serve.md#serving", "exec"), namespace)
    namespace["calls"] = calls
    return namespace


@pytest.mark.slow
def test_the_readme_serving_snippet_runs_with_a_tiny_random_model(tmp_path, monkeypatch, capsys):
    """A random model writes garbage: the snippet catches the CompletionParseError, which
    says what was expected and where."""
    namespace = _run_snippet(tmp_path, monkeypatch)
    if namespace["completion"] is None:
        printed = capsys.readouterr().out
        assert printed.startswith("malformed completion: expected "), printed
        assert " at token " in printed
    else:
        assert isinstance(namespace["completion"], Completion)


def test_the_readme_serving_snippet_turns_a_tool_call_into_a_context_message(tmp_path, monkeypatch):
    """The same snippet on what a trained model writes: a tool call and the halt."""
    torch = pytest.importorskip("torch")

    def generate(tokenizer, input_ids, attention_mask, generation_config):
        stops = generation_config.eos_token_id
        assert sorted(stops) == sorted(
            tokenizer.convert_tokens_to_ids(["<|end_turn|>", "<|role|>"])
        )
        text = 'weather:json<|content|>{"location": "Tokyo"}<|role|>'
        new = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert new[-1] in stops
        return torch.cat([input_ids, torch.tensor([new])], dim=1)

    namespace = _run_snippet(tmp_path, monkeypatch, generate)
    assert namespace["completion"].halted
    assert namespace["calls"] == [("weather", {"location": "Tokyo"})]
    assert namespace["messages"][-2:] == [
        {
            "role": "assistant",
            "format": "weather:json",
            "content": '{"location": "Tokyo"}',
            "end_turn": False,
        },
        {"role": "context", "name": "weather", "content": "19°C"},
    ]
