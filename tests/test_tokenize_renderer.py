"""The labels contract of DESIGN §4, bullet by bullet, on tiny threads and a word-level
tokenizer (one token per word, so every token is readable): what is rendered, what is
trained, where messages end, and that batching changes nothing."""

from __future__ import annotations

import orjson
import pytest
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

from pipeline.mms import Message, Thread
from pipeline.output.tokenizer import write_tokenizer
from pipeline.tokenize import IGNORE, MMS_SPECIAL_TOKENS, EncodedThread, Renderer, load_tokenizer
from pipeline.tokenize.special import PAD
from tests.conftest import SHARED
from tests.reading import read_all
from tests.tokenizer_fixtures import repo_threads, shared_present, tokenizer_file

WORDS = [
    "[UNK]",
    "<s>",
    "</s>",
    *("platform", "developer", "user", "assistant", "context"),
    *("markdown", "json", "browser", "Hi", "Hello", "there", "sunny", "call", "ok"),
    *("<|", "|>", "</", "<", ">", "role", "s", "end_turn", "?", ":", "{", "}"),
]
"""A word-level vocabulary: `<s>`/`</s>` are the base tokenizer's own special tokens; `<|`,
`role`, `|>` ... are what literal special-token text in content splits into."""
W = {word: number for number, word in enumerate(WORDS)}


def base_tokenizer(vocab: dict[str, int] = W, split: str = "punctuation") -> Tokenizer:
    """A word-level base tokenizer with `<s>` and `</s>` as special tokens."""
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = (
        pre_tokenizers.Whitespace() if split == "punctuation" else pre_tokenizers.WhitespaceSplit()
    )
    tokenizer.add_special_tokens(["<s>", "</s>"])
    return tokenizer


@pytest.fixture(scope="module")
def renderer() -> Renderer:
    return Renderer(base_tokenizer())


def thread(*messages: Message, id: str = "t") -> Thread:
    return Thread(id, list(messages))


def view(renderer: Renderer, encoded: EncodedThread) -> str:
    """The tokens as words, trained ones in [brackets]; checks the trainer convention
    (a label is the token's id or IGNORE) on the way."""
    words = []
    for token_id, label in zip(encoded.input_ids, encoded.labels, strict=True):
        assert label in (token_id, IGNORE)
        word = renderer.tokenizer.id_to_token(token_id)
        words.append(f"[{word}]" if label == token_id else word)
    return " ".join(words)


def test_mms_tokens_are_new_special_ids_after_the_base_vocabulary(renderer):
    size = base_tokenizer().get_vocab_size(with_added_tokens=True)
    assert renderer.special_ids.as_dict() == {
        token: size + offset for offset, token in enumerate(MMS_SPECIAL_TOKENS)
    }
    added = renderer.tokenizer.get_added_tokens_decoder()
    assert all(added[size + k].special for k in range(len(MMS_SPECIAL_TOKENS)))


def test_an_mms_token_the_base_already_has_keeps_its_id():
    base = base_tokenizer()
    base.add_special_tokens([AddedToken("<|content|>", special=True)])
    content_id = base.token_to_id("<|content|>")
    renderer = Renderer(base)
    size = base.get_vocab_size(with_added_tokens=True)
    assert renderer.special_ids.content == content_id
    others = [renderer.special_ids.role, renderer.special_ids.name, renderer.special_ids.format]
    assert others == [size, size + 1, size + 2]
    assert renderer.special_ids.end_turn == size + 3


@pytest.mark.parametrize("present", [(), ("<|content|>",), MMS_SPECIAL_TOKENS])
def test_the_augmented_tokenizer_is_the_base_with_the_mms_tokens_added(tmp_path, present):
    """What tokenizers' own add_special_tokens makes of the base, whichever MMS tokens the
    base already has; written (as text) byte for byte as tokenizers writes it, when the
    base is a file tokenizers wrote. (This base has no config naming a pad, eos or unk
    token, so `<|pad|>` is added after the MMS tokens.)"""
    base = base_tokenizer()
    base.add_special_tokens([AddedToken(t, special=True) for t in present])
    (tmp_path / "tokenizer.json").write_text(base.to_str(pretty=True))
    loaded = load_tokenizer(tmp_path / "tokenizer.json")
    renderer = Renderer(loaded)
    written = write_tokenizer(tmp_path / "out", renderer, loaded)
    missing = [t for t in MMS_SPECIAL_TOKENS if t not in present] + [PAD]
    base.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in missing])
    assert renderer.tokenizer.to_str() == base.to_str()
    assert written.read_text() == base.to_str(pretty=True)
    assert renderer.special_ids.as_dict() == {t: base.token_to_id(t) for t in MMS_SPECIAL_TOKENS}


def test_a_tokenizer_json_without_added_tokens_is_written_with_them(tmp_path):
    """`added_tokens` may be left out of a tokenizer.json: the written one gains the key."""
    base = Tokenizer(models.WordLevel(W, unk_token="[UNK]"))
    data = orjson.loads(base.to_str())
    del data["added_tokens"]
    (tmp_path / "tokenizer.json").write_bytes(orjson.dumps(data))
    loaded = load_tokenizer(tmp_path / "tokenizer.json")
    renderer = Renderer(loaded)
    written = Tokenizer.from_file(str(write_tokenizer(tmp_path / "out", renderer, loaded)))
    base.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in (*MMS_SPECIAL_TOKENS, PAD)]
    )
    assert written.to_str() == base.to_str()
    assert renderer.special_ids.as_dict() == {
        t: len(W) + k for k, t in enumerate(MMS_SPECIAL_TOKENS)
    }


# ------------------------------------------------------------------ §4 labels, bullet by bullet


def test_assistant_header_is_prompt_and_its_format_content_and_end_turn_are_trained(renderer):
    encoded = renderer.encode(thread(Message.user("Hi"), Message.assistant("Hello there")))
    assert view(renderer, encoded) == (
        "<|role|> user <|content|> Hi "
        "<|role|> assistant <|format|> [markdown] [<|content|>] [Hello] [there] [<|end_turn|>]"
    )
    assert (encoded.num_tokens, encoded.num_trained) == (12, 5)
    assert encoded.message_ends == [4, 12]


def test_an_assistant_after_one_that_ended_its_turn_has_an_untrained_header(renderer):
    encoded = renderer.encode(
        thread(Message.user("Hi"), Message.assistant("Hello"), Message.assistant("ok"))
    )
    assert view(renderer, encoded).endswith(
        "[<|end_turn|>] <|role|> assistant <|format|> [markdown] [<|content|>] [ok] [<|end_turn|>]"
    )


def test_after_end_turn_false_the_next_assistant_header_is_trained(renderer):
    encoded = renderer.encode(
        thread(
            Message.user("Hi"),
            Message.assistant("Hello", end_turn=False),
            Message.assistant("{ }", format="json"),
        )
    )
    assert view(renderer, encoded) == (
        "<|role|> user <|content|> Hi "
        "<|role|> assistant <|format|> [markdown] [<|content|>] [Hello] "
        "[<|role|>] [assistant] [<|format|>] [json] [<|content|>] [{] [}] [<|end_turn|>]"
    )


def test_after_end_turn_false_only_the_role_opening_the_next_message_is_trained(renderer):
    encoded = renderer.encode(
        thread(
            Message.user("sunny ?"),
            Message.assistant("call", format="browser", end_turn=False),
            Message.context("sunny", name="browser"),
            Message.assistant("sunny"),
        )
    )
    assert view(renderer, encoded) == (
        "<|role|> user <|content|> sunny ? "
        "<|role|> assistant <|format|> [browser] [<|content|>] [call] "
        "[<|role|>] context <|name|> browser <|content|> sunny "
        "<|role|> assistant <|format|> [markdown] [<|content|>] [sunny] [<|end_turn|>]"
    )


@pytest.mark.parametrize("role", ["user", "developer", "platform"])
def test_the_halt_signal_is_the_role_token_whatever_message_follows(renderer, role):
    encoded = renderer.encode(
        thread(Message.assistant("Hi", end_turn=False), Message(role, "Hello there"))
    )
    assert view(renderer, encoded).endswith(f"[Hi] [<|role|>] {role} <|content|> Hello there")


def test_a_thread_ending_without_end_turn_gets_a_trained_role_token_appended(renderer):
    ending = thread(Message.user("Hi"), Message.assistant("call", format="json", end_turn=False))
    encoded = renderer.encode(ending)
    assert view(renderer, encoded) == (
        "<|role|> user <|content|> Hi "
        "<|role|> assistant <|format|> [json] [<|content|>] [call] [<|role|>]"
    )
    assert encoded.message_ends == [4, encoded.num_tokens - 1]
    assert renderer.render_text(ending).endswith("<|content|>call<|role|>")


def test_a_thread_ending_its_turn_gets_nothing_appended(renderer):
    ended = thread(Message.user("Hi"), Message.assistant("ok"))
    encoded = renderer.encode(ended)
    assert encoded.message_ends[-1] == encoded.num_tokens
    assert renderer.render_text(ended).endswith("<|content|>ok<|end_turn|>")


def test_a_context_name_is_rendered_between_role_and_content_and_not_trained(renderer):
    named = renderer.encode(thread(Message.context("sunny", name="browser")))
    unnamed = renderer.encode(thread(Message.context("sunny")))
    assert view(renderer, named) == "<|role|> context <|name|> browser <|content|> sunny"
    assert view(renderer, unnamed) == "<|role|> context <|content|> sunny"


def test_nothing_of_platform_developer_user_or_context_is_trained(renderer):
    everyone = thread(
        Message.platform("Hi"),
        Message.developer("call json"),
        Message.user("Hello ?"),
        Message.context("sunny", name="browser"),
        Message.user("ok"),
    )
    encoded = renderer.encode(everyone)
    assert encoded.num_trained == 0
    assert set(encoded.labels) == {IGNORE}


def test_the_rendered_text_follows_the_spec_field_order(renderer):
    text = renderer.render_text(
        thread(
            Message.developer("Hi"),
            Message.context("sunny", name="browser"),
            Message.assistant("{}", format="json"),
        )
    )
    assert text == (
        "<|role|>developer<|content|>Hi"
        "<|role|>context<|name|>browser<|content|>sunny"
        "<|role|>assistant<|format|>json<|content|>{}<|end_turn|>"
    )


# ------------------------------------------------------------------ BOS


def saved(tmp_path, tokenizer: Tokenizer, config: dict) -> str:
    """A directory with tokenizer.json and tokenizer_config.json, as load_tokenizer reads."""
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_bytes(orjson.dumps(config))
    return str(tmp_path)


def test_bos_is_added_only_when_asked_and_never_trained(tmp_path):
    loaded = load_tokenizer(saved(tmp_path, base_tokenizer(), {"bos_token": "<s>"}))
    two = thread(Message.user("Hi"), Message.assistant("ok"))
    plain = Renderer(loaded).encode(two)
    with_bos = Renderer(loaded, bos=True)
    encoded = with_bos.encode(two)
    assert encoded.input_ids == [W["<s>"], *plain.input_ids]
    assert encoded.labels == [IGNORE, *plain.labels]
    assert encoded.message_ends == [end + 1 for end in plain.message_ends]
    assert with_bos.render_text(two) == "<s>" + Renderer(loaded).render_text(two)


def test_bos_without_a_bos_token_is_refused(tmp_path):
    loaded = load_tokenizer(saved(tmp_path, base_tokenizer(), {"eos_token": "</s>"}))
    with pytest.raises(ValueError, match="bos"):
        Renderer(loaded, bos=True)


# ------------------------------------------------------------------ content stays text


def test_literal_special_token_text_in_content_stays_text(renderer):
    encoded = renderer.encode(
        thread(Message.user("Hi <|role|> </s>"), Message.assistant("<|end_turn|> <s> ok"))
    )
    assert view(renderer, encoded) == (
        "<|role|> user <|content|> Hi <| role |> </ s > "
        "<|role|> assistant <|format|> [markdown] [<|content|>] "
        "[<|] [end_turn] [|>] [<] [s] [>] [ok] [<|end_turn|>]"
    )
    specials = {*renderer.special_ids.as_dict().values(), W["<s>"], W["</s>"]}
    assert [i for i in encoded.input_ids if i in specials] == [
        renderer.special_ids.role,
        renderer.special_ids.content,
        renderer.special_ids.role,
        renderer.special_ids.format,
        renderer.special_ids.content,
        renderer.special_ids.end_turn,
    ]


def test_a_base_vocabulary_word_spelled_like_an_mms_token_is_refused():
    """A base whose vocabulary holds `<|role|>` as an ordinary word: its text in content
    could not be told from the special id (§4), so the renderer refuses the tokenizer."""
    vocab = {**W, "<|role|>": len(W)}
    with pytest.raises(ValueError, match=r"<\|role\|> as an ordinary vocabulary entry"):
        Renderer(base_tokenizer(vocab, split="whitespace"))


# ------------------------------------------------------------------ message ends, empty content


def test_message_ends_split_the_tokens_into_each_message_rendered_alone(renderer):
    messages = [
        Message.developer("call json"),
        Message.user("Hi ?"),
        Message.assistant("{ }", format="json", end_turn=False),
        Message.context("sunny", name="browser"),
        Message.assistant("ok"),
    ]
    encoded = renderer.encode(thread(*messages))
    starts = [0, *encoded.message_ends[:-1]]
    for message, start, end in zip(messages, starts, encoded.message_ends, strict=True):
        alone = renderer.encode(thread(message))
        assert encoded.input_ids[start:end] == alone.input_ids[: alone.message_ends[0]]
    assert encoded.message_ends[-1] == encoded.num_tokens


def test_empty_contents_render_their_markers_only(renderer):
    encoded = renderer.encode(thread(Message.user(""), Message.assistant("")))
    assert view(renderer, encoded) == (
        "<|role|> user <|content|> <|role|> assistant <|format|> [markdown] [<|content|>] "
        "[<|end_turn|>]"
    )
    assert encoded.message_ends == [3, 9]
    assert (encoded.num_tokens, encoded.num_trained) == (9, 3)


# ------------------------------------------------------------------ batching


MIXED = [
    thread(Message.developer("call json"), Message.user("Hi"), Message.assistant("Hello")),
    thread(Message.developer("call json"), Message.user("Hi"), Message.assistant("Hello"), id="u"),
    thread(Message.user("user"), Message.assistant("assistant", format="markdown"), id="roles"),
    thread(Message.user(""), Message.assistant("", end_turn=False), id="empty"),
    thread(Message.context("browser", name="browser"), id="context-only"),
    thread(
        Message.user("sunny ?"),
        Message.assistant("call", format="browser", end_turn=False),
        Message.context("sunny", name="browser"),
        Message.assistant("json", format="json", end_turn=False),
        id="halts",
    ),
    thread(Message.user("<|role|> </s> Hi"), Message.assistant("markdown"), id="literal"),
    thread(Message.assistant("ok", end_turn=False), id="alone"),
]
"""Threads sharing pieces (one system prompt twice, contents equal to role and format names),
empty and literal contents, and every halting case."""


def test_encode_batch_equals_encoding_each_thread_alone(renderer):
    batch = renderer.encode_batch(MIXED)
    alone = [renderer.encode(t) for t in MIXED]
    assert len(batch) == len(MIXED)
    assert [batch[i] for i in range(len(MIXED))] == alone
    assert batch.num_tokens.to_pylist() == [e.num_tokens for e in alone]
    assert batch.num_trained.to_pylist() == [e.num_trained for e in alone]


def test_batch_order_and_splitting_do_not_change_any_thread(renderer):
    forward = renderer.encode_batch(MIXED)
    backward = renderer.encode_batch(MIXED[::-1])
    halves = [renderer.encode_batch(MIXED[:3]), renderer.encode_batch(MIXED[3:])]
    split = [half[i] for half in halves for i in range(len(half))]
    assert [backward[len(MIXED) - 1 - i] for i in range(len(MIXED))] == split
    assert [forward[i] for i in range(len(MIXED))] == split


def test_an_empty_batch_has_no_rows(renderer):
    batch = renderer.encode_batch([])
    assert len(batch) == 0
    assert batch.input_ids.to_pylist() == []


def test_batching_changes_nothing_on_real_threads():
    """Real threads with repeated system prompts, tool calls and Chinese text
    (glaive_toolcall_zh_demo with ../shared, else the repository's threads), through the
    torchtune BPE tokenizer (or the small one of its shape)."""
    if shared_present():
        source = SHARED / "realdata" / "llamafactory" / "glaive_toolcall_zh_demo.json"
        threads = read_all(source)[0][:60]
    else:
        threads = repo_threads()
    renderer = Renderer(load_tokenizer(tokenizer_file("bytelevel-plain").parent))
    batch = renderer.encode_batch(threads)
    assert [batch[i] for i in range(len(threads))] == [renderer.encode(t) for t in threads]
    assert any(m.role == "context" for t in threads for m in t.messages)
