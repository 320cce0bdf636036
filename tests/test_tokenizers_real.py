"""The tokenizer of every family (tests/tokenizer_fixtures.py: the real file of
../shared/tokenizers when present, else the small one of its shape trained for the tests)
either loads and round-trips threads, or fails with an error naming the file and the cause.
The threads are ../shared's real files when present, else data_samples and a few remarkable
threads.

Round trip, precisely: the ids of a thread split at the MMS special tokens into its text
pieces (role, name, format, content, in the spec's order), and decoding each piece's ids
gives the piece back, up to what the tokenizer itself cannot keep (found per tokenizer
below); decoding the whole thread gives `render_text(thread)` with each piece so mapped.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from tokenizers import AddedToken, Tokenizer

from pipeline.mms import Message, Thread
from pipeline.output.tokenizer import write_tokenizer
from pipeline.tokenize import (
    MMS_SPECIAL_TOKENS,
    EncodedBatch,
    LoadedTokenizer,
    Renderer,
    TokenizerLoadError,
    load_tokenizer,
)
from pipeline.tokenize.special import post_processor
from tests.conftest import SHARED
from tests.reading import read_all
from tests.tokenizer_fixtures import (
    FAMILIES,
    SMALL_TOKENIZERS,
    repo_threads,
    shared_present,
    tokenizer_file,
)

Piece = Callable[[Tokenizer, str], str]
"""What decoding one text piece's ids gives, from the base tokenizer and the piece."""


def exact(base: Tokenizer, text: str) -> str:
    """Byte-level BPE with every byte in its vocabulary and no normalizer: the text itself."""
    return text


def nfc(base: Tokenizer, text: str) -> str:
    """An NFC normalizer: the text in composed form (a decomposed `é` comes back as one)."""
    return unicodedata.normalize("NFC", text)


def sentencepiece(base: Tokenizer, text: str) -> str:
    """Prepend("▁") + Replace(" ", "▁") normalizer, decoder "▁" -> " " then Strip(1 left):
    a piece decoded alone is the text, with a literal "▁" read back as a space."""
    return text.replace("\u2581", " ")


def cropped_bytes(base: Tokenizer, text: str) -> str:
    """NFC, then a byte-level BPE whose vocabulary keeps only part of the 256 bytes and has
    no unknown token: characters it has no bytes for are dropped."""
    return "".join(c for c in nfc(base, text) if base.encode(c, add_special_tokens=False).ids)


def unknown_runs(base: Tokenizer, text: str) -> str:
    """BPE over a cropped character set with `<unk>` (fuse_unk): each run of characters
    outside the set comes back as one `<unk>`, and "▁" as a space."""
    unk = base.token_to_id("<unk>")
    out: list[str] = []
    for char in text:
        if base.encode(char, add_special_tokens=False).ids == [unk]:
            if not out or out[-1] != "<unk>":
                out.append("<unk>")
        else:
            out.append(char)
    return "".join(out).replace("\u2581", " ")


@dataclass(frozen=True)
class RoundTrip:
    """How a tokenizer's pieces come back: `piece` decoded alone; `leading_space` when the
    whole thread decodes each non-empty piece with a space before it (the SentencePiece
    prefix that the per-piece decode strips)."""

    piece: Piece
    leading_space: bool = False


ROUND_TRIPS = {
    "bytelevel-llama3": RoundTrip(exact),
    "bytelevel-qwen2": RoundTrip(nfc),
    "bytelevel-plain": RoundTrip(exact),
    "bytelevel-cropped": RoundTrip(cropped_bytes),
    "sentencepiece-phi3": RoundTrip(sentencepiece, leading_space=True),
    "sentencepiece-llama2": RoundTrip(sentencepiece, leading_space=True),
    "sentencepiece-gemma-cropped": RoundTrip(unknown_runs),
}
"""The round trip of each family's tokenizer, real or small alike."""
FAILING = {"sentencepiece-llama2-legacy": "Merges text file invalid"}
"""The cause named for each family whose tokenizer does not load."""
REAL_FILES = (
    "llamafactory/kto_en_demo.json",
    "llamafactory/glaive_toolcall_zh_demo.json",
    "open_assistant/en_100_message.jsonl",
    "llamafactory/reason_tool_use_demo_50.jsonl",
    "openai_finetune_examples/weather_chat_fine_tuning.jsonl",
)
PER_FILE = 40


def _remarkable(thread: Thread) -> bool:
    """Text some tokenizer cannot keep as is: decomposed characters or a literal `</s>`."""
    return any(
        "</s>" in m.content or unicodedata.normalize("NFC", m.content) != m.content
        for m in thread.messages
    )


@pytest.fixture(scope="module")
def threads() -> list[Thread]:
    """The first PER_FILE threads of a few real files, and every remarkable one of them;
    without ../shared, the repository's data_samples and its remarkable threads."""
    if not shared_present():
        return repo_threads()
    chosen: list[Thread] = []
    for name in REAL_FILES:
        found, _, _ = read_all(SHARED / "realdata" / name)
        chosen += [t for i, t in enumerate(found) if i < PER_FILE or _remarkable(t)]
    return chosen


def test_the_sample_holds_what_round_trips_must_survive(threads):
    texts = [m.content for t in threads for m in t.messages]
    assert any("</s>" in text for text in texts)
    assert any(unicodedata.normalize("NFC", text) != text for text in texts)
    assert any(any("\u4e00" <= c <= "\u9fff" for c in text) for text in texts)
    assert any(m.role == "context" and m.name for t in threads for m in t.messages)
    assert any(t.messages[-1].role == "assistant" and not t.messages[-1].end_turn for t in threads)


def _tokenizer_files(root: Path) -> set[Path]:
    """Every JSON file under `root` that holds a tokenizer (an object with a `model`)."""
    found = set()
    for path in root.rglob("*.json"):
        data = orjson.loads(path.read_bytes())
        if isinstance(data, dict) and "model" in data:
            found.add(path)
    return found


def test_every_tokenizer_file_is_accounted_for():
    """Each small tokenizer is a family's, each family is tested; with ../shared, each of
    its tokenizers is a family's too."""
    assert set(FAMILIES) == set(ROUND_TRIPS) | set(FAILING)
    small_files = {SMALL_TOKENIZERS / family / "tokenizer.json" for family in FAMILIES}
    assert _tokenizer_files(SMALL_TOKENIZERS) == small_files
    if shared_present():
        real = {tokenizer_file(family) for family in FAMILIES if FAMILIES[family]}
        assert _tokenizer_files(SHARED / "tokenizers") == real


@pytest.mark.parametrize("family", sorted(FAILING))
def test_a_tokenizer_that_cannot_load_names_the_file_and_the_cause(family):
    """The cause is tokenizers' own message on the file, which places the fault in it."""
    file = tokenizer_file(family)
    with pytest.raises(Exception) as direct:
        Tokenizer.from_file(str(file))
    for spec in (file, file.parent):
        with pytest.raises(TokenizerLoadError) as raised:
            load_tokenizer(spec)
        assert str(file) in str(raised.value)
        assert FAILING[family] in str(raised.value)
        assert str(direct.value) in str(raised.value)


def test_a_json_file_that_is_no_tokenizer_is_named_as_such():
    """tokenizer_config.json passed by mistake: the error should say it is not a tokenizer
    file, rather than quote the JSON parser's expectation of a `,` or `}`."""
    config = tokenizer_file("bytelevel-llama3").parent / "tokenizer_config.json"
    with pytest.raises(TokenizerLoadError) as raised:
        load_tokenizer(config)
    assert str(config) in str(raised.value)
    assert "not a tokenizer" in str(raised.value)


# ------------------------------------------------------------------ per tokenizer


@dataclass
class Case:
    name: str
    loaded: LoadedTokenizer
    renderer: Renderer
    batch: EncodedBatch
    round_trip: RoundTrip


@pytest.fixture(scope="module", params=sorted(ROUND_TRIPS))
def case(request, threads) -> Case:
    family = request.param
    loaded = load_tokenizer(tokenizer_file(family))
    renderer = Renderer(loaded)
    round_trip = ROUND_TRIPS[family]
    return Case(family, loaded, renderer, renderer.encode_batch(threads), round_trip)


def parts(message: Message) -> list[tuple[str, str]]:
    """A message's (special token, text piece) pairs in the order §4 renders them."""
    found = [("<|role|>", message.role)]
    if message.role == "context" and message.name:
        found.append(("<|name|>", message.name))
    if message.role == "assistant":
        found.append(("<|format|>", message.format or "markdown"))
    return [*found, ("<|content|>", message.content)]


def split_pieces(renderer: Renderer, ids: list[int]) -> list[list[int]]:
    """The ids between MMS special tokens, one list per text piece (every text piece follows
    <|role|>, <|name|>, <|format|> or <|content|>; <|end_turn|> and the trailing halt
    <|role|> open none)."""
    opening = {renderer.special_ids.role, renderer.special_ids.name}
    opening |= {renderer.special_ids.format, renderer.special_ids.content}
    specials = set(renderer.special_ids.as_dict().values())
    found: list[list[int]] = []
    halt = len(ids) - 1 if ids and ids[-1] == renderer.special_ids.role else None
    for position, token in enumerate(ids):
        if token in opening and position != halt:
            found.append([])
        elif token not in specials and found:
            found[-1].append(token)
    return found


def test_special_ids_never_collide_with_the_base(case):
    base = case.loaded.tokenizer
    size = base.get_vocab_size(with_added_tokens=True)
    for token, number in case.renderer.special_ids.as_dict().items():
        if base.token_to_id(token) is None:
            assert number >= size, f"{token} got {number}, an id of the base"
        else:
            assert number == base.token_to_id(token)
            assert base.get_added_tokens_decoder()[number].special
    assert len(set(case.renderer.special_ids.as_dict().values())) == len(MMS_SPECIAL_TOKENS)


def test_each_piece_decodes_back(case, threads):
    tokenizer, piece = case.renderer.tokenizer, case.round_trip.piece
    wrong = []
    for index, thread in enumerate(threads):
        texts = [text for message in thread.messages for _, text in parts(message)]
        ids = split_pieces(case.renderer, case.batch[index].input_ids)
        assert len(ids) == len(texts), thread.id
        for text, piece_ids in zip(texts, ids, strict=True):
            decoded = tokenizer.decode(piece_ids, skip_special_tokens=False)
            if decoded != piece(case.loaded.tokenizer, text):
                wrong.append(f"{thread.id}: {text[:60]!r} came back as {decoded[:60]!r}")
    assert not wrong, f"{case.name}: {len(wrong)} piece(s) did not round-trip:\n" + "\n".join(
        wrong[:5]
    )


def expected_decoding(case: Case, thread: Thread) -> str:
    """render_text(thread) with each text piece as the tokenizer gives it back."""
    out = []
    for message in thread.messages:
        for marker, text in parts(message):
            back = case.round_trip.piece(case.loaded.tokenizer, text)
            out += [marker, " " + back if case.round_trip.leading_space and back else back]
        if message.role == "assistant" and message.end_turn:
            out.append("<|end_turn|>")
    last = thread.messages[-1]
    if last.role == "assistant" and not last.end_turn:
        out.append("<|role|>")
    return "".join(out)


def test_the_thread_decodes_to_its_rendering(case, threads):
    tokenizer = case.renderer.tokenizer
    for index, thread in enumerate(threads):
        decoded = tokenizer.decode(case.batch[index].input_ids, skip_special_tokens=False)
        assert decoded == expected_decoding(case, thread), f"{case.name}: {thread.id}"
        if case.round_trip.piece is exact:
            assert decoded == case.renderer.render_text(thread)


def _controls(case: Case) -> dict[int, str]:
    """The base's ids that content must never produce: its special added tokens, the
    bos/eos/pad its config names, and added tokens inside its own vocabulary (such as a
    SentencePiece `</s>`); not the unknown token, which stands for characters it lacks."""
    base = case.loaded.tokenizer
    size = base.get_vocab_size(with_added_tokens=False)
    unknown = getattr(base.model, "unk_token", None)
    return {
        number: added.content
        for number, added in base.get_added_tokens_decoder().items()
        if (added.special or added.content in case.loaded.control_tokens or number < size)
        and added.content != unknown
    }


def test_literal_control_token_text_in_content_stays_text(case):
    controls = _controls(case)
    literal = " ".join([*controls.values(), *MMS_SPECIAL_TOKENS])
    encoded = case.renderer.encode(Thread("literal", [Message.user(f"see {literal} here")]))
    content = split_pieces(case.renderer, encoded.input_ids)[-1]
    found = sorted({controls[i] for i in content if i in controls})
    assert not found, f"{case.name}: literal {found} became control ids"
    decoded = case.renderer.tokenizer.decode(content, skip_special_tokens=False)
    assert decoded == case.round_trip.piece(case.loaded.tokenizer, f"see {literal} here")


def test_the_written_tokenizer_is_the_base_with_the_mms_tokens_added(case, threads, tmp_path):
    """write_tokenizer makes the augmented tokenizer.json as text: it loads as what
    tokenizers' own add_special_tokens makes of the base, with the Renderer's ids, and a
    post-processor that adds no BOS (the rows have none) and no EOS."""
    written = write_tokenizer(tmp_path, case.renderer, case.loaded)
    reloaded = Tokenizer.from_file(str(written))
    expected = Tokenizer.from_file(str(case.loaded.path))
    missing = [t for t in MMS_SPECIAL_TOKENS if expected.token_to_id(t) is None]
    if case.renderer.added_pad:  # the base names no pad, eos or unk token to pad with
        missing.append(case.renderer.added_pad[0])
    expected.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in missing])
    data = orjson.loads(expected.to_str())
    data["post_processor"] = post_processor(data["post_processor"], None)
    expected = Tokenizer.from_str(orjson.dumps(data).decode())
    assert reloaded.to_str() == expected.to_str() == case.renderer.tokenizer.to_str()
    for token, number in case.renderer.special_ids.as_dict().items():
        assert reloaded.token_to_id(token) == number
    added = [a.content for a in reloaded.get_added_tokens_decoder().values()]
    plain = [
        index
        for index, thread in enumerate(threads)
        if not any(a in m.content for m in thread.messages for a in added)
    ]
    assert len(plain) > len(threads) // 2
    texts = [case.renderer.render_text(threads[i]) for i in plain]
    encoded = reloaded.encode_batch(texts, add_special_tokens=False)
    for index, again in zip(plain, encoded, strict=True):
        assert again.ids == case.batch[index].input_ids, f"{case.name}: {threads[index].id}"


WATCHED = {"Tokenizer.from_str", "Tokenizer.from_file", "Tokenizer.from_buffer", "Tokenizer.to_str"}
"""The calls that parse or serialize a whole tokenizer (a second each on a large vocabulary)."""


@contextmanager
def watched_calls() -> Iterator[list[str]]:
    """The WATCHED calls made inside the block, as the profiler hook sees them."""
    calls: list[str] = []

    def profile(frame: object, event: str, arg: object) -> None:
        name = getattr(arg, "__qualname__", "")
        if event == "c_call" and name in WATCHED:
            calls.append(name)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(previous)


def test_encoding_parses_the_tokenizer_once_and_writing_never(threads, tmp_path):
    """A worker process loads, builds a Renderer and encodes: one parse (the `tokenizers`
    text encoder; tiktoken's comes from the proofs cache); the augmented tokenizer is parsed
    only when something decodes with it."""
    folder = tokenizer_file("sentencepiece-phi3").parent
    with watched_calls() as calls:
        loaded = load_tokenizer(folder, allow_tiktoken=False)
        renderer = Renderer(loaded, bos=True)
        batch = renderer.encode_batch(threads)
    assert calls == ["Tokenizer.from_str"]
    with watched_calls() as calls:
        write_tokenizer(tmp_path, renderer, loaded)
    assert calls == []
    with watched_calls() as calls:
        first = renderer.tokenizer.decode(batch[0].input_ids, skip_special_tokens=False)
        assert renderer.tokenizer.decode(batch[0].input_ids, skip_special_tokens=False) == first
    assert calls == ["Tokenizer.from_str"]


# ------------------------------------------------------------------ BOS


@pytest.mark.parametrize(
    ("family", "bos"),
    [
        ("bytelevel-llama3", "<|begin_of_text|>"),
        ("sentencepiece-phi3", "<s>"),
        ("sentencepiece-llama2", "<s>"),
    ],
)
def test_bos_from_the_config_starts_the_thread_and_decodes_back(family, bos):
    renderer = Renderer(load_tokenizer(tokenizer_file(family).parent), bos=True)
    two = Thread("two", [Message.user("Hi there"), Message.assistant("Hello!")])
    encoded = renderer.encode(two)
    assert renderer.tokenizer.id_to_token(encoded.input_ids[0]) == bos
    assert renderer.render_text(two).startswith(bos + "<|role|>user")
    decoded = renderer.tokenizer.decode(encoded.input_ids, skip_special_tokens=False)
    assert decoded.startswith(bos + "<|role|>")


def test_bos_missing_from_the_vocabulary_names_the_token():
    """torchtune's tokenizer_config.json names `<|begin_of_sentence|>`, which its
    tokenizer.json does not hold: the error should say so, not that no bos_token is named."""
    loaded = load_tokenizer(tokenizer_file("bytelevel-plain").parent)
    with pytest.raises(ValueError, match="<\\|begin_of_sentence\\|>"):
        Renderer(loaded, bos=True)


def _hub_cache(root: Path, repo: str, files: dict[str, Path]) -> None:
    """A Hugging Face cache holding `files` for model `repo` at revision `main`."""
    revision = "0" * 40
    folder = root / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(revision)
    snapshot = folder / "snapshots" / revision
    snapshot.mkdir(parents=True)
    for name, source in files.items():
        (snapshot / name).write_bytes(source.read_bytes())


def test_a_hub_name_is_found_in_the_local_cache_and_never_downloaded(tmp_path, monkeypatch):
    import huggingface_hub.constants

    folder = tokenizer_file("sentencepiece-phi3").parent
    size = Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab_size()
    assert size == (32011 if shared_present() else 1506)
    _hub_cache(
        tmp_path,
        "microsoft/Phi-3-mini-4k-instruct",
        {n: folder / n for n in ("tokenizer.json", "tokenizer_config.json")},
    )
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    loaded = load_tokenizer("microsoft/Phi-3-mini-4k-instruct")
    assert loaded.bos_token == "<s>" and loaded.tokenizer.get_vocab_size() == size
    with pytest.raises(TokenizerLoadError, match="not in the local Hugging Face cache"):
        load_tokenizer("meta-llama/Not-Cached")
    # a name with dots is a Hub name too, and the error says where the cache was looked in
    with pytest.raises(TokenizerLoadError, match=f"looked in {tmp_path};"):
        load_tokenizer("meta-llama/Llama-3.2-1B")
    _hub_cache(tmp_path, "Qwen/Qwen2.5-0.5B", {n: folder / n for n in ("tokenizer.json",)})
    assert load_tokenizer("Qwen/Qwen2.5-0.5B").tokenizer.get_vocab_size() == size
