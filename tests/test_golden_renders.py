"""Golden render files: each `tests/golden_renders/<case>.thread.json` renders, with the
sample tokenizer, to exactly `<case>.render.txt` (the rendered text, the trained spans per
message, and every token's id and label), so any change of rendering is a readable diff.

The files are trusted through expectations that do not come from the renderer: the trained
text of every case, marked by hand from DESIGN §4 in `Case.marked`; the MMS special tokens
the thread's structure calls for, counted from §4; and the trainer convention of labels.

After an intended change of rendering, regenerate with
`MMS_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_renders.py` and review the diff.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from tokenizers import AddedToken, Tokenizer

from pipeline.mms import Thread
from pipeline.tokenize import IGNORE, EncodedThread, Renderer, load_tokenizer
from tests.conftest import REPO

GOLDEN = Path(__file__).resolve().parent / "golden_renders"
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
UPDATE = os.environ.get("MMS_UPDATE_GOLDEN") == "1"
BOS = "<s>"
"""The sample tokenizer names no BOS token: the `bos` case adds this one as a special token
(the first id after the vocabulary) and names it `bos_token` in the tokenizer config."""
OPEN, CLOSE = "⟦", "⟧"
"""Around the trained text in `Case.marked`."""


@dataclass(frozen=True)
class Case:
    name: str
    marked: str
    """The rendered text as DESIGN §4 writes it, trained text between ⟦ and ⟧ (written by
    hand from the thread file, never copied from the renderer)."""
    policy: str = "assistant"
    bos: bool = False


CASES = [
    Case(
        "plain_chat",
        "<|role|>user<|content|>What is the capital of France?"
        "<|role|>assistant<|format|>"
        "⟦markdown<|content|>The capital of France is **Paris**.<|end_turn|>⟧",
    ),
    Case(
        "system_roles",
        "<|role|>platform<|content|>Be helpful and honest."
        "<|role|>developer<|content|>Answer in one short sentence."
        "<|role|>user<|content|>Why is the sky blue?"
        "<|role|>assistant<|format|>"
        "⟦markdown<|content|>Air scatters blue light more than red light.<|end_turn|>⟧",
    ),
    # the call's arguments and the halt that opens the tool result are trained, the
    # result is not; the settings are not rendered at all
    Case(
        "tool_call",
        "<|role|>developer<|content|>Use `get_weather:json` to look up the current weather of a city."
        "<|role|>user<|content|>Is it warm in Oslo today?"
        '<|role|>assistant<|format|>⟦get_weather:json<|content|>{"city":"Oslo"}<|role|>⟧'
        'context<|name|>get_weather<|content|>{"temperature_c":18,"sky":"sunny"}'
        "<|role|>assistant<|format|>"
        "⟦markdown<|content|>Yes: it is 18°C and sunny in Oslo.<|end_turn|>⟧",
    ),
    # a thread that ends on a message that did not end its turn gets a trained <|role|>
    Case(
        "halt_at_end",
        "<|role|>developer<|content|>Use `search:json` to search the web."
        "<|role|>user<|content|>Find today's top news story."
        '<|role|>assistant<|format|>⟦search:json<|content|>{"query":"top news today"}<|role|>⟧',
    ),
    # the model chose to continue: the second header is trained
    Case(
        "assistant_continues",
        "<|role|>user<|content|>Count to three, then say done."
        "<|role|>assistant<|format|>⟦markdown<|content|>1, 2, 3."
        "<|role|>assistant<|format|>markdown<|content|>Done!<|end_turn|>⟧",
    ),
    # weight 0: nothing of that message is trained, its <|end_turn|> included
    Case(
        "weight_zero",
        "<|role|>user<|content|>Say hi."
        "<|role|>assistant<|format|>markdown<|content|>HI!!! :)<|end_turn|>"
        "<|role|>user<|content|>Say hi, politely."
        "<|role|>assistant<|format|>⟦markdown<|content|>Hello, nice to meet you.<|end_turn|>⟧",
    ),
    # a named context has <|name|>, an unnamed one none; a json response format
    Case(
        "context_json",
        "<|role|>developer<|content|>Write a title for the `$article` and respond only in `json`."
        "<|role|>context<|name|>article<|content|>The city approved new bike lanes on Tuesday."
        "<|role|>context<|content|>Published on 2024-05-01."
        "<|role|>user<|content|>Go ahead."
        "<|role|>assistant<|format|>"
        '⟦json<|content|>{"title":"City approves new bike lanes"}<|end_turn|>⟧',
    ),
    # the literal token text in content stays text (checked by the special-token count)
    Case(
        "literal_special_tokens",
        "<|role|>user<|content|>What do <|role|> and <|eot_id|> mean?"
        "<|role|>assistant<|format|>⟦markdown<|content|>"
        "Control tokens: `<|end_turn|>` ends a turn, `</s>` ends a text.<|end_turn|>⟧",
    ),
    # only the final turn (tool call, its halt, the answer) is trained; the earlier answer not
    Case(
        "last_assistant_policy",
        "<|role|>developer<|content|>Use `get_weather:json` for weather questions."
        "<|role|>user<|content|>What is 2+2?"
        "<|role|>assistant<|format|>markdown<|content|>4.<|end_turn|>"
        "<|role|>user<|content|>Is it sunny in Oslo?"
        '<|role|>assistant<|format|>⟦get_weather:json<|content|>{"city":"Oslo"}<|role|>⟧'
        'context<|name|>get_weather<|content|>{"sky":"sunny"}'
        "<|role|>assistant<|format|>⟦markdown<|content|>Yes, it is sunny in Oslo.<|end_turn|>⟧",
        policy="last_assistant",
    ),
    # the BOS token starts the thread, untrained
    Case(
        "bos_token",
        "<s><|role|>user<|content|>Hello!"
        "<|role|>assistant<|format|>⟦markdown<|content|>Hi! How can I help?<|end_turn|>⟧",
        bos=True,
    ),
]
BY_NAME = {case.name: case for case in CASES}


@pytest.fixture(scope="module")
def renderers(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[bool, str], Renderer]:
    """A renderer per (bos, policy) the cases use."""
    plain = load_tokenizer(SAMPLE_TOKENIZER)
    with_bos = load_tokenizer(_sample_with_bos(tmp_path_factory.mktemp("bos_tokenizer")))
    return {
        (case.bos, case.policy): Renderer(
            with_bos if case.bos else plain, bos=case.bos, policy=case.policy
        )
        for case in CASES
    }


def _sample_with_bos(directory: Path) -> Path:
    """The sample tokenizer with BOS added as a special token and named in its config."""
    tokenizer = Tokenizer.from_file(str(SAMPLE_TOKENIZER / "tokenizer.json"))
    tokenizer.add_special_tokens([AddedToken(BOS, special=True, normalized=False)])
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({"bos_token": BOS}))
    return directory


def load_thread(case: Case) -> Thread:
    return Thread.from_dict(json.loads((GOLDEN / f"{case.name}.thread.json").read_bytes()))


def render(renderers, case: Case) -> tuple[Renderer, Thread, EncodedThread]:
    renderer = renderers[(case.bos, case.policy)]
    thread = load_thread(case)
    return renderer, thread, renderer.encode(thread)


# ------------------------------------------------------------------ the golden file


def golden_text(case: Case, renderer: Renderer, thread: Thread, encoded: EncodedThread) -> str:
    """The `.render.txt` of a case: a header, the rendered text as is, the spans of tokens
    of one message with one trained flag, then one line per token."""
    ids, labels = encoded.input_ids, encoded.labels
    tokenizer = renderer.tokenizer
    specials = "  ".join(f"{t}={n}" for t, n in renderer.special_ids.as_dict().items())
    if renderer.bos_id is not None:
        specials += f"  {BOS}={renderer.bos_id} (bos)"
    tokenizer_label = "configs/sample_tokenizer"
    if case.bos:
        tokenizer_label += f" + {BOS} added as a special token and named bos_token"
    lines = [
        f"# golden render of {case.name}.thread.json (thread id {thread.id!r})",
        f"# renderer: {renderer.name}   policy: {case.policy}   bos: {str(case.bos).lower()}",
        f"# tokenizer: {tokenizer_label}",
        f"# base tokenizer.json sha256: {_sample_sha256()}",
        f"# special ids: {specials}",
        f"# tokens: {encoded.num_tokens}   trained: {encoded.num_trained}   "
        f"message_ends: {encoded.message_ends}",
        "",
        "== rendered text (input_ids decoded) ==",
        tokenizer.decode(ids, skip_special_tokens=False),
        "== end of rendered text ==",
        "",
        "== spans: [T] trained, [ ] not trained; the message each token belongs to ==",
    ]
    owners = token_owners(thread, encoded, renderer.bos_id is not None)
    rows = list(zip(range(len(ids)), owners, labels, strict=True))
    for (owner, trained), group in itertools.groupby(rows, key=lambda r: (r[1], r[2] != IGNORE)):
        text = tokenizer.decode([ids[i] for i, _, _ in group], skip_special_tokens=False)
        lines.append(f"{'[T]' if trained else '[ ]'} {owner:<14} {text!r}")
    lines += ["", "== tokens: index, id, label, T if trained, token text =="]
    for index, (token_id, label) in enumerate(zip(ids, labels, strict=True)):
        flag = "T" if label != IGNORE else " "
        lines.append(
            f"{index:>5} {token_id:>6} {label:>6}  {flag}  {token_text(tokenizer, token_id)}"
        )
    return "\n".join(lines) + "\n"


@functools.cache
def _sample_sha256() -> str:
    return hashlib.sha256((SAMPLE_TOKENIZER / "tokenizer.json").read_bytes()).hexdigest()


def token_owners(thread: Thread, encoded: EncodedThread, bos: bool) -> list[str]:
    """Per token: `bos`, `m<k> <role>` for message k, or `halt` (the <|role|> after the
    last message)."""
    owners = ["bos"] if bos else []
    start = len(owners)
    for number, (message, end) in enumerate(
        zip(thread.messages, encoded.message_ends, strict=True)
    ):
        owners += [f"m{number} {message.role}"] * (end - start)
        start = end
    return owners + ["halt"] * (encoded.num_tokens - start)


def token_text(tokenizer: Tokenizer, token_id: int) -> str:
    """The token's text, repr-escaped; a byte-level piece of a character (which decodes to
    U+FFFD alone) shows as its vocabulary entry instead."""
    text = tokenizer.decode([token_id], skip_special_tokens=False)
    if "\ufffd" in text:
        return f"{tokenizer.id_to_token(token_id)!r} (vocabulary entry: part of a character)"
    return repr(text)


def test_every_thread_file_is_a_case_and_every_file_belongs_to_one():
    files = {path.name for path in GOLDEN.iterdir() if path.name != "README.md"}
    wanted = {f"{c.name}.{kind}" for c in CASES for kind in ("thread.json", "render.txt")}
    if UPDATE:  # the render files of new cases are written by the test below
        files |= {f"{c.name}.render.txt" for c in CASES}
    assert files == wanted


@pytest.mark.parametrize("name", BY_NAME)
def test_the_thread_renders_to_its_golden_file(name, renderers):
    case = BY_NAME[name]
    rendered = golden_text(case, *render(renderers, case))
    golden = GOLDEN / f"{name}.render.txt"
    if UPDATE:
        golden.write_bytes(rendered.encode("utf-8"))
    assert golden.is_file(), f"no {golden.name}: run with MMS_UPDATE_GOLDEN=1 to write it"
    # byte for byte (UTF-8 decoding is one to one), compared as text for pytest's line diff
    assert rendered == golden.read_bytes().decode("utf-8"), (
        f"{golden.name} differs; if the change is intended, regenerate with "
        "MMS_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_renders.py and review the diff"
    )


# ------------------------------------------------------------------ why the files are right


@pytest.mark.parametrize("name", BY_NAME)
def test_labels_are_the_id_or_ignored(name, renderers):
    _, _, encoded = render(renderers, BY_NAME[name])
    assert len(encoded.labels) == len(encoded.input_ids)
    pairs = zip(encoded.input_ids, encoded.labels, strict=True)
    assert all(label in (token, IGNORE) for token, label in pairs)
    assert encoded.num_trained == sum(label != IGNORE for label in encoded.labels) > 0


@pytest.mark.parametrize("name", BY_NAME)
def test_the_rendered_text_and_the_trained_text_are_as_written_by_hand(name, renderers):
    case = BY_NAME[name]
    renderer, thread, encoded = render(renderers, case)
    expected_text = case.marked.replace(OPEN, "").replace(CLOSE, "")
    decoded = renderer.tokenizer.decode(encoded.input_ids, skip_special_tokens=False)
    assert decoded == expected_text
    assert renderer.render_text(thread) == expected_text
    assert marked(renderer, encoded) == case.marked


def marked(renderer: Renderer, encoded: EncodedThread) -> str:
    """The decoded tokens, each run of trained tokens between ⟦ and ⟧."""
    parts = []
    pairs = zip(encoded.input_ids, encoded.labels, strict=True)
    for trained, run in itertools.groupby(pairs, key=lambda pair: pair[1] != IGNORE):
        text = renderer.tokenizer.decode([token for token, _ in run], skip_special_tokens=False)
        parts.append(f"{OPEN}{text}{CLOSE}" if trained else text)
    return "".join(parts)


@pytest.mark.parametrize("name", BY_NAME)
def test_special_tokens_are_exactly_those_the_structure_calls_for(name, renderers):
    """Per DESIGN §4, from the thread's structure alone: <|role|>, <|name|> (a named
    context), <|format|> (assistant), <|content|>, <|end_turn|> (assistant ending its turn),
    a final <|role|> after an assistant that did not; literal token text in content adds no
    special id."""
    case = BY_NAME[name]
    renderer, thread, encoded = render(renderers, case)
    expected = []
    for message in thread.messages:
        expected.append("<|role|>")
        if message.role == "context" and message.name:
            expected.append("<|name|>")
        if message.role == "assistant":
            expected.append("<|format|>")
        expected.append("<|content|>")
        if message.role == "assistant" and message.end_turn:
            expected.append("<|end_turn|>")
    last = thread.messages[-1]
    if last.role == "assistant" and not last.end_turn:
        expected.append("<|role|>")
    by_id = {number: token for token, number in renderer.special_ids.as_dict().items()}
    found = [by_id[token] for token in encoded.input_ids if token in by_id]
    assert found == expected
    bos = renderer.bos_id
    assert [token for token in encoded.input_ids if token == bos] == ([bos] if case.bos else [])
    if case.bos:
        assert (encoded.input_ids[0], encoded.labels[0]) == (bos, IGNORE)


def test_literal_token_text_in_content_is_plain_text(renderers):
    renderer, thread, encoded = render(renderers, BY_NAME["literal_special_tokens"])
    specials = set(renderer.special_ids.as_dict().values())
    contents = [message.content for message in thread.messages]
    assert all(re.search(r"<\|\w+\|>", content) for content in contents)
    first = encoded.input_ids[: encoded.message_ends[0]]  # <|role|>user<|content|>...
    user_content = first[first.index(renderer.special_ids.content) + 1 :]
    assert renderer.tokenizer.decode(user_content) == contents[0]
    assert not specials & set(user_content)
