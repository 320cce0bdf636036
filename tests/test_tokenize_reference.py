"""The Renderer against an independent reference of DESIGN §4: transformers'
`apply_chat_template(..., return_assistant_tokens_mask=True)` with a `{% generation %}` template
written from the spec (pipeline/tokenize/mms_v0_chat_template.jinja, the template the output
ships), on real threads and the Llama-3, Qwen2.5 and Phi-3 tokenizers: those of ../shared
when present; else the repository's threads and the small tokenizers of those shapes
(tests/tokenizer_fixtures.py), for which transformers builds the same reference."""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import pytest

from pipeline.mms import Message, Thread
from pipeline.output.tokenizer import write_tokenizer
from pipeline.tokenize import (
    IGNORE,
    LABEL_POLICIES,
    EncodedThread,
    LoadedTokenizer,
    Renderer,
    load_tokenizer,
)
from pipeline.tokenize.hf_files import chat_template
from tests.conftest import SHARED
from tests.reading import read_all
from tests.tokenizer_fixtures import repo_threads, shared_present, tokenizer_file

transformers = pytest.importorskip(
    "transformers", reason="transformers (the dev extra) builds the reference; it is not installed"
)

FAMILIES = ("bytelevel-llama3", "bytelevel-qwen2", "sentencepiece-phi3")
PER_FILE = 40  # plain threads taken from each real file, evenly spaced
REFERENCE_BATCH = 256


class Floors(NamedTuple):
    """How much of each rule of the labels policy the selection holds at least."""

    compared: int
    halts_before_assistant: int
    halts_before_other: int
    open_endings: int
    named_contexts: int
    two_answers: int


FLOORS = (
    Floors(1000, 20, 100, 10, 100, 300)
    if shared_present()
    # the repository's threads (data_samples and remarkable ones) are fewer: 211 compared,
    # 43 halts before another role, 6 open endings, 33 named contexts, 56 with two answers
    else Floors(200, 20, 40, 5, 30, 50)
)


@pytest.fixture(scope="module")
def real_threads() -> list[Thread]:
    """Every thread that `pipeline.read` makes of ../shared/realdata, in reading order;
    without ../shared, the repository's threads (tokenizer_fixtures.repo_threads)."""
    if not shared_present():
        return repo_threads()
    threads, _, _ = read_all(SHARED / "realdata")
    return threads


@pytest.fixture(scope="module")
def selected(real_threads: list[Thread]) -> list[Thread]:
    """Every thread that exercises the labels policy beyond the plain case, and up to
    PER_FILE evenly spaced threads of each real file."""
    by_source: dict[str, list[Thread]] = defaultdict(list)
    for thread in real_threads:
        by_source[thread.meta.get("source")].append(thread)
    chosen: list[Thread] = []
    for group in by_source.values():
        step = -(-len(group) // PER_FILE)
        chosen.extend(t for i, t in enumerate(group) if _beyond_plain(t) or i % step == 0)
    return chosen


def _beyond_plain(thread: Thread) -> bool:
    """Whether a thread has an assistant message that halts or has a format, or a named context."""
    return any(
        (m.role == "assistant" and (not m.end_turn or m.format != "markdown"))
        or (m.role == "context" and m.name)
        for m in thread.messages
    )


class Sides(NamedTuple):
    """One family's tokenizer loaded, the Renderer over it, and transformers over the
    Renderer's augmented tokenizer."""

    loaded: LoadedTokenizer
    renderer: Renderer
    reference: Any

    def __repr__(self) -> str:
        return f"Sides({self.loaded.path})"


@pytest.fixture(scope="module", params=FAMILIES)
def sides(request, tmp_path_factory) -> Sides:
    """Both sides over one family's tokenizer; transformers loads the AUGMENTED
    tokenizer.json written beside a dataset (write_tokenizer), so the special-token ids are
    shared."""
    loaded = load_tokenizer(tokenizer_file(request.param).parent)
    renderer = Renderer(loaded)
    # with the media placeholders, as an output whose rows hold media ships it (DESIGN §4)
    path = write_tokenizer(tmp_path_factory.mktemp(request.param), renderer, loaded, media=True)
    return Sides(loaded, renderer, transformers.PreTrainedTokenizerFast(tokenizer_file=str(path)))


def _texts(thread: Thread) -> Iterator[str]:
    """A thread's text pieces: every content, context name and assistant format."""
    for message in thread.messages:
        yield message.content
        yield from (field for field in (message.name, message.format) if field)


def _any_of(tokens: Iterable[str]) -> re.Pattern[str]:
    """A pattern that finds any of `tokens` as literal text."""
    return re.compile("|".join(map(re.escape, tokens)))


def _literal_tokens(thread: Thread, tokens: re.Pattern[str]) -> set[str]:
    """The tokens (an `_any_of` pattern) whose text occurs literally in a thread's text pieces."""
    return {found for text in _texts(thread) for found in tokens.findall(text)}


def _added(renderer: Renderer) -> re.Pattern[str]:
    """Every added token of the augmented tokenizer (the reference matches them all in text)."""
    return _any_of(t.content for t in renderer.tokenizer.get_added_tokens_decoder().values())


def _reference(
    hf: Any, threads: Sequence[Thread], policy: str, renderer: Renderer
) -> Iterator[tuple[list[int], list[int]]]:
    """input_ids and labels (input_ids where the generation mask is 1, else IGNORE) from
    transformers, the whole rendered string tokenized at once."""
    media = {kind: token for kind, (token, _) in renderer.media_tokens.items()}
    for start in range(0, len(threads), REFERENCE_BATCH):
        chunk = threads[start : start + REFERENCE_BATCH]
        out = hf.apply_chat_template(
            [[m.to_dict() for m in t.messages] for t in chunk],
            chat_template=chat_template(bos=False, policy=policy, media=media),
            add_generation_prompt=False,
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        for ids, mask in zip(out["input_ids"], out["assistant_masks"], strict=True):
            yield ids, [i if m else IGNORE for i, m in zip(ids, mask, strict=True)]


def _difference(renderer: Renderer, thread: Thread, field: str, ours, theirs) -> str:
    """Where two token lists first differ, with the tokens around it on both sides."""
    at = next(
        (i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
        min(len(ours), len(theirs)),
    )
    token = renderer.tokenizer.id_to_token
    window = slice(max(at - 4, 0), at + 4)
    return (
        f"{thread.id} ({thread.meta.get('source')}): {field} differ at token {at} of "
        f"{len(ours)} (renderer) / {len(theirs)} (reference); renderer "
        f"{[(v, token(v) if v >= 0 else None) for v in ours[window]]} vs reference "
        f"{[(v, token(v) if v >= 0 else None) for v in theirs[window]]}"
    )


def test_selection_covers_every_rule_of_the_labels_policy(selected: list[Thread]) -> None:
    pairs = [(a, b) for t in selected for a, b in zip(t.messages, t.messages[1:], strict=False)]
    halts = [(a, b) for a, b in pairs if a.role == "assistant" and not a.end_turn]
    assert len(selected) >= FLOORS.compared
    assert sum(b.role == "assistant" for _, b in halts) >= FLOORS.halts_before_assistant
    assert sum(b.role != "assistant" for _, b in halts) >= FLOORS.halts_before_other
    assert (
        sum(t.messages[-1].role == "assistant" and not t.messages[-1].end_turn for t in selected)
        >= FLOORS.open_endings
    )
    assert (
        sum(any(m.role == "context" and m.name for m in t.messages) for t in selected)
        >= FLOORS.named_contexts
    )
    assert {m.format for t in selected for m in t.messages} >= {"markdown", "reasoning"}
    assert (
        sum(sum(m.role == "assistant" for m in t.messages) >= 2 for t in selected)
        >= FLOORS.two_answers
    )


def _weighted(thread: Thread, index: int) -> Thread:
    """Every third thread with its first assistant message weighted 0 (as an OpenAI
    fine-tuning file says "do not learn this answer"); the others as they are."""
    first = next((i for i, m in enumerate(thread.messages) if m.role == "assistant"), None)
    if index % 3 or first is None:
        return thread
    messages = list(thread.messages)
    messages[first] = dataclasses.replace(messages[first], weight=0.0)
    return dataclasses.replace(thread, messages=messages)


@pytest.mark.parametrize("policy", LABEL_POLICIES)
def test_renderer_equals_the_transformers_reference(
    sides: Sides, selected: list[Thread], policy: str
) -> None:
    renderer = Renderer(sides.loaded, policy=policy)
    added = _added(sides.renderer)
    plain = [t for t in selected if not _literal_tokens(t, added)]
    compared = [_weighted(thread, index) for index, thread in enumerate(plain)]
    assert len(compared) >= FLOORS.compared
    batch = renderer.encode_batch(compared)
    role = renderer.special_ids.role
    differences = []
    trained = 0
    for index, (ids, labels) in enumerate(_reference(sides.reference, compared, policy, renderer)):
        assert ids[0] == role, "the template path added a BOS"
        ours = batch[index]
        if list(ours.input_ids) != ids:
            differences.append(
                _difference(renderer, compared[index], "input_ids", ours.input_ids, ids)
            )
        elif list(ours.labels) != labels:
            differences.append(
                _difference(renderer, compared[index], "labels", ours.labels, labels)
            )
        trained += sum(label != IGNORE for label in labels)
    assert not differences, f"{len(differences)} of {len(compared)} threads differ:\n" + "\n".join(
        differences[:5]
    )
    assert trained > 0


@pytest.fixture(scope="module")
def literal_threads(real_threads: list[Thread]) -> list[Thread]:
    """Real text holding other tokenizers' control tokens: the kto_en_demo threads with `</s>` or
    `<|user|>` in content, and functionary's rendered prompts (`<|eot_id|>`, `<|im_end|>`,
    `<tool_call>` ...) as a user message and the assistant's reply. Without ../shared, the
    repository's threads holding any of them (a data sample, and remarkable threads with
    other models' chat formats written out)."""
    if not shared_present():
        controls = _any_of(("</s>", "<|user|>", "<|eot_id|>", "<|im_end|>", "<tool_call>"))
        threads = [t for t in real_threads if _literal_tokens(t, controls)]
        assert len(threads) >= 2
        return threads
    kto = "llamafactory/kto_en_demo.json"  # its name under the folder read
    threads = [
        t
        for t in real_threads
        if t.meta["source"] == kto and _literal_tokens(t, _any_of(("</s>", "<|user|>")))
    ]
    assert len(threads) >= 2
    prompts = sorted((SHARED / "realdata" / "functionary" / "expected_prompts").glob("*.txt"))
    for path in prompts:
        text = path.read_text(encoding="utf-8")
        threads.append(
            Thread(f"functionary/{path.name}", [Message.user(text), Message.assistant(text)])
        )
    return threads


def _content_spans(renderer: Renderer, thread: Thread, encoded: EncodedThread):
    """(message, token ids of its content) for every message of an encoded thread."""
    content = renderer.special_ids.as_dict()["<|content|>"]
    start = 0
    for message, end in zip(thread.messages, encoded.message_ends, strict=True):
        segment = list(encoded.input_ids[start:end])
        body = segment[segment.index(content) + 1 :]
        yield message, body[:-1] if message.role == "assistant" and message.end_turn else body
        start = end


def _as_decoded(renderer: Renderer, text: str) -> str:
    """`text` as the tokenizer can give it back: a vocabulary that writes spaces as "▁"
    (SentencePiece, Phi-3's) decodes a literal "▁" as a space."""
    probe = renderer.tokenizer.encode("a\u2581b", add_special_tokens=False).ids
    return text.replace("\u2581", " ") if renderer.tokenizer.decode(probe) == "a b" else text


def _control_ids(sides: Sides) -> dict[int, str]:
    """The added tokens content must never produce: those flagged special, the bos/eos/unk/pad
    of tokenizer_config, and those the base model's own vocabulary holds (SentencePiece control
    pieces such as Phi-3's `</s>`, which tokenizer.json leaves unflagged). Ordinary added words
    beyond the vocabulary (Qwen's `<tool_call>`) may be matched, with their own id."""
    tokenizer = sides.renderer.tokenizer
    base_size = tokenizer.get_vocab_size(with_added_tokens=False)
    return {
        number: added.content
        for number, added in tokenizer.get_added_tokens_decoder().items()
        if added.special or added.content in sides.loaded.control_tokens or number < base_size
    }


def test_literal_control_token_text_in_content_stays_text(
    sides: Sides, literal_threads: list[Thread]
) -> None:
    renderer = sides.renderer
    controls = _control_ids(sides)
    added = _added(renderer)
    literal = {tok for t in literal_threads for tok in _literal_tokens(t, added)}
    assert literal & set(controls.values()), "the real texts hold none of this tokenizer's controls"
    batch = renderer.encode_batch(literal_threads)
    problems = []
    for index, thread in enumerate(literal_threads):
        for message, body in _content_spans(renderer, thread, batch[index]):
            matched = sorted({controls[i] for i in body if i in controls})
            kept = renderer.tokenizer.decode(body, skip_special_tokens=False) == _as_decoded(
                renderer, message.content
            )
            if matched or not kept:
                problems.append(
                    f"{thread.id} {message.role}: control tokens {matched} in content, "
                    f"text {'kept' if kept else 'CHANGED'}"
                )
    assert not problems, f"literal {sorted(literal)} not kept as text:\n" + "\n".join(problems)
