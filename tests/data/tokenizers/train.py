"""Train the small tokenizers the tokenizer tests run on when ../shared is absent.

Each folder here holds a tokenizer.json (and a tokenizer_config.json where the real model
has one) shaped like one real family the code branches on (pipeline/tokenize/): the same
normalizer, pre-tokenizer, model flags, decoder, post-processor, added tokens and config
keys, with a vocabulary of a few hundred to two thousand entries trained here, by the
`tokenizers` library, on this repository's own documentation. PROVENANCE.txt in each
folder names the real model it copies the shape of.

Regenerate (deterministic: the same corpus and library version give the same bytes):

    PYTHONPATH=. python tests/data/tokenizers/train.py

The corpus is README.md and docs/*.md, plus the short multilingual lines of EXTRA (so the
vocabularies hold accented, Cyrillic and Chinese characters); editing the docs changes the
trained vocabularies, which no test depends on id by id.
"""

from __future__ import annotations

import json
from pathlib import Path

import tokenizers
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
M = "\u2581"

CL100K = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
    r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""Llama-3's split pattern (pipeline/tokenize/tiktoken_bytelevel.KNOWN_PATTERNS)."""
QWEN2 = CL100K.replace(r"\p{N}{1,3}", r"\p{N}")
"""Qwen2's: every digit on its own."""

EXTRA = [
    "Le café est très bon, déjà vu à l'hôtel; naïve façade, garçon, über, Straße.",
    "Привет, как дела? Это тест токенизатора.",
    "你好，世界。这是一个测试。我们训练一个小的分词器。",  # noqa: RUF001
    "数据集 对话 训练 模型 工具 调用 助手 用户 系统",
    "こんにちは、元気ですか。",
    "Emoji: 🙂 👍 — quotes “like this” and ‘this’ … 10% ≤ 20%",  # noqa: RUF001
]


def corpus() -> list[str]:
    """The training lines: the repository's README and design docs, then EXTRA."""
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    lines = [line for f in files for line in f.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line.strip()] + EXTRA * 20


def added(
    number: int, content: str, *, special: bool = True, rstrip: bool = False, normalized=False
) -> dict:
    return {
        "id": number,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": rstrip,
        "normalized": normalized,
        "special": special,
    }


def bos_template(bos: str, bos_id: int) -> dict:
    """A TemplateProcessing that puts `bos` before each sequence."""
    return {
        "type": "TemplateProcessing",
        "single": [
            {"SpecialToken": {"id": bos, "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
        ],
        "pair": [
            {"SpecialToken": {"id": bos, "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
            {"SpecialToken": {"id": bos, "type_id": 1}},
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    }


def byte_level(step: bool, *, trim: bool = True) -> dict:
    return {
        "type": "ByteLevel",
        "add_prefix_space": step,
        "trim_offsets": trim,
        "use_regex": step,
    }


def split(pattern: str) -> dict:
    return {
        "type": "Split",
        "pattern": {"Regex": pattern},
        "behavior": "Isolated",
        "invert": False,
    }


def document(
    model: dict,
    *,
    added_tokens: list[dict],
    normalizer: dict | None,
    pre_tokenizer: dict | None,
    post_processor: dict | None,
    decoder: dict | None,
) -> dict:
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": post_processor,
        "decoder": decoder,
        "model": model,
    }


# ------------------------------------------------------------------ byte-level BPE


def train_byte_level(pattern: str, size: int, *, full_alphabet: bool = True) -> Tokenizer:
    """A byte-level BPE trained on the corpus, split by `pattern`."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    alphabet = pre_tokenizers.ByteLevel.alphabet() if full_alphabet else []
    trainer = trainers.BpeTrainer(
        vocab_size=size, initial_alphabet=alphabet, show_progress=False, min_frequency=2
    )
    lines = corpus()
    if not full_alphabet:  # the alphabet: the ASCII bytes of the corpus, whole characters
        lines = ["".join(c for c in line if c.isascii()) for line in lines]
    tokenizer.train_from_iterator(lines, trainer)
    return tokenizer


def as_converted_from_tiktoken(trained: Tokenizer) -> dict:
    """The trained vocabulary as tiktoken ranks (the 256 bytes first, in byte order, then
    the entries in the order training made them), and a BPE as the Hugging Face converter
    makes of tiktoken ranks: every split of an entry into two entries is a merge, listed in
    the order of the entries made, and whole words are looked up first."""
    data = json.loads(trained.to_str())
    made = [
        tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in data["model"]["merges"]
    ]
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    byte_order = sorted(alphabet, key=_byte_of)
    order = [*byte_order, *(left + right for left, right in made)]
    vocab = {token: rank for rank, token in enumerate(dict.fromkeys(order))}
    merges = [
        [token[:cut], token[cut:]]
        for token in vocab
        for cut in range(1, len(token))
        if token[:cut] in vocab and token[cut:] in vocab
    ]
    return {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "ignore_merges": True,
        "vocab": vocab,
        "merges": merges,
    }


def _byte_of(char: str) -> int:
    """The byte a character of the byte-level alphabet stands for (GPT-2's mapping)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    if ord(char) in printable:
        return ord(char)
    others = [b for b in range(256) if b not in set(printable)]
    return others[ord(char) - 256]


def llama3() -> tuple[dict, dict]:
    """Llama-3's shape (converted from tiktoken): no normalizer, the cl100k split, BOS
    `<|begin_of_text|>` added by the post-processor, 256 special added tokens in the real
    file (a dozen here, the ones the config and chat format name)."""
    model = as_converted_from_tiktoken(train_byte_level(CL100K, 1200))
    base = len(model["vocab"])
    names = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|reserved_special_token_0|>",
        "<|reserved_special_token_1|>",
        "<|finetune_right_pad_id|>",
        "<|reserved_special_token_2|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|eom_id|>",
        "<|eot_id|>",
        "<|python_tag|>",
    ]
    added_tokens = [added(base + n, name) for n, name in enumerate(names)]
    post = {
        "type": "Sequence",
        "processors": [
            {**byte_level(True), "trim_offsets": False},
            bos_template("<|begin_of_text|>", base),
        ],
    }
    data = document(
        model,
        added_tokens=added_tokens,
        normalizer=None,
        pre_tokenizer={"type": "Sequence", "pretokenizers": [split(CL100K), byte_level(False)]},
        post_processor=post,
        decoder=byte_level(True),
    )
    config = {
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|eot_id|>",
        "pad_token": "<|finetune_right_pad_id|>",
        "add_bos_token": True,
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    return data, config


def qwen2() -> tuple[dict, dict]:
    """Qwen2.5's shape: NFC, the split with single digits, no BOS, special added tokens and
    ordinary (non-special) ones matched in text (`<tool_call>`, the FIM tokens)."""
    model = as_converted_from_tiktoken(train_byte_level(QWEN2, 1200))
    base = len(model["vocab"])
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>"]
    ordinary = ["<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>"]
    added_tokens = [added(base + n, name) for n, name in enumerate(special)]
    added_tokens += [
        added(base + len(special) + n, name, special=False) for n, name in enumerate(ordinary)
    ]
    data = document(
        model,
        added_tokens=added_tokens,
        normalizer={"type": "NFC"},
        pre_tokenizer={"type": "Sequence", "pretokenizers": [split(QWEN2), byte_level(False)]},
        post_processor={**byte_level(True), "trim_offsets": False},
        decoder=byte_level(True),
    )
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added_tokens
        },
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    return data, config


def plain_byte_level() -> tuple[dict, None]:
    """torchtune's test tokenizer.json shape: a byte-level BPE converted from tiktoken with
    no added tokens and no post-processor (its config, which names a BOS the vocabulary
    lacks, is written beside it by `main`)."""
    model = as_converted_from_tiktoken(train_byte_level(CL100K, 700))
    data = document(
        model,
        added_tokens=[],
        normalizer=None,
        pre_tokenizer={"type": "Sequence", "pretokenizers": [split(CL100K), byte_level(False)]},
        post_processor=None,
        decoder=byte_level(True),
    )
    return data, None


def cropped_byte_level() -> dict:
    """torchtune's tiny_bpe shape: NFC, the Qwen2 split, a byte-level BPE as trained (merges
    by training order, whole words not looked up) whose alphabet holds only part of the
    bytes (the ASCII ones of the corpus: a character is kept whole or dropped whole), no
    unknown token, three special added tokens."""
    trained = train_byte_level(QWEN2, 600, full_alphabet=False)
    data = json.loads(trained.to_str())
    model = {**data["model"], "ignore_merges": False, "fuse_unk": False, "byte_fallback": False}
    base = len(model["vocab"])
    names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    flat = byte_level(False, trim=False)
    return document(
        model,
        added_tokens=[added(base + n, name) for n, name in enumerate(names)],
        normalizer={"type": "NFC"},
        pre_tokenizer={"type": "Sequence", "pretokenizers": [split(QWEN2), flat]},
        post_processor=flat,
        decoder=flat,
    )


# ------------------------------------------------------------------ SentencePiece-style BPE

BYTE_TOKENS = [f"<0x{byte:02X}>" for byte in range(256)]
SP_DECODER = {
    "type": "Sequence",
    "decoders": [
        {"type": "Replace", "pattern": {"String": M}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0},
    ],
}
SP_NORMALIZER = {
    "type": "Sequence",
    "normalizers": [
        {"type": "Prepend", "prepend": M},
        {"type": "Replace", "pattern": {"String": " "}, "content": M},
    ],
}


def train_sentencepiece(size: int) -> tuple[dict, list]:
    """A BPE over `▁`-joined text, trained within words (each `▁` starts one, as
    SentencePiece never merges across it), with `<unk> <s> </s>` then the 256 byte tokens
    first, as Llama-2 has them. Returns the vocabulary and the merges."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Prepend(M), normalizers.Replace(" ", M)]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(f"{M}*[^{M}]+|{M}+"), behavior="isolated")
    trainer = trainers.BpeTrainer(
        vocab_size=size,
        special_tokens=["<unk>", "<s>", "</s>", *BYTE_TOKENS],
        show_progress=False,
        min_frequency=2,
    )
    tokenizer.train_from_iterator(corpus(), trainer)
    data = json.loads(tokenizer.to_str())
    merges = [m.split(" ", 1) if isinstance(m, str) else m for m in data["model"]["merges"]]
    return data["model"]["vocab"], [list(pair) for pair in merges]


def without_unmakeable(vocab: dict[str, int], merges: list) -> tuple[dict[str, int], list]:
    """Drop the merged entries BPE does not make from their own characters (a later merge
    wins on the whole word), and every entry built on them, so a whole-piece lookup and
    merging agree (pipeline/tokenize/tiktoken_sentencepiece, `_each_made_by_its_merges`)."""
    while True:
        model = {
            "type": "BPE",
            "byte_fallback": True,
            "unk_token": "<unk>",
            "fuse_unk": True,
            "vocab": vocab,
            "merges": merges,
        }
        bare = document(
            model,
            added_tokens=[],
            normalizer=None,
            pre_tokenizer=None,
            post_processor=None,
            decoder=None,
        )
        check = Tokenizer.from_str(json.dumps(bare))
        made = ["".join(pair) for pair in merges]
        wrong = {
            token
            for token, e in zip(
                made, check.encode_batch(made, add_special_tokens=False), strict=True
            )
            if e.ids != [vocab[token]]
        }
        if not wrong:
            return vocab, merges
        kept = [pair for pair in merges if "".join(pair) not in wrong and not set(pair) & wrong]
        gone = wrong | {"".join(pair) for pair in merges if set(pair) & wrong}
        order = [token for token in vocab if token not in gone]
        vocab = {token: number for number, token in enumerate(order)}
        merges = kept


def sentencepiece_model(size: int) -> dict:
    vocab, merges = without_unmakeable(*train_sentencepiece(size))
    return {
        "type": "BPE",
        "dropout": None,
        "unk_token": "<unk>",
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": True,
        "byte_fallback": True,
        "vocab": vocab,
        "merges": merges,
    }


def phi3() -> tuple[dict, dict]:
    """Phi-3-mini's shape: Llama-2's SentencePiece-style BPE (Prepend + Replace normalizer,
    no pre-tokenizer, byte fallback), no BOS added by the post-processor, `</s>` an added
    token that is not special, chat tokens added after the vocabulary with rstrip."""
    model = sentencepiece_model(1500)
    base = len(model["vocab"])
    added_tokens = [
        added(0, "<unk>"),
        added(1, "<s>"),
        added(2, "</s>", special=False, rstrip=True),
    ]
    chat = ["<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|system|>", "<|end|>"]
    chat += ["<|user|>"]
    added_tokens += [
        added(base + n, name, rstrip=name != "<|endoftext|>") for n, name in enumerate(chat)
    ]
    data = document(
        {**model, "merges": [" ".join(pair) for pair in model["merges"]]},
        added_tokens=added_tokens,
        normalizer=SP_NORMALIZER,
        pre_tokenizer=None,
        post_processor={
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [
                {"Sequence": {"id": "A", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": {},
        },
        decoder=SP_DECODER,
    )
    config = {
        "add_bos_token": False,
        "add_eos_token": False,
        "added_tokens_decoder": {
            str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added_tokens
        },
        "bos_token": "<s>",
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "legacy": False,
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "padding_side": "left",
        "sp_model_kwargs": {},
        "tokenizer_class": "LlamaTokenizer",
        "unk_token": "<unk>",
        "use_default_system_prompt": False,
    }
    return data, config


def _added_token_dict(content: str) -> dict:
    return {
        "__type": "AddedToken",
        "content": content,
        "lstrip": False,
        "normalized": True,
        "rstrip": False,
        "single_word": False,
    }


def llama2() -> tuple[dict, dict]:
    """Llama-2's shape: the SentencePiece-style BPE with `<s>` added by the post-processor,
    merges as "left right" strings, a config with AddedToken dicts and a huge
    model_max_length. Its added tokens are not normalized, as in the Hub's current file
    (with `normalized: true`, `tokenizers` gives `▁<s>` as the token of id 1, the
    Prepend normalizer applied). Loads (the old file does not: see `llama2_legacy`)."""
    model = sentencepiece_model(1500)
    names = ["<unk>", "<s>", "</s>"]
    added_tokens = [added(n, name) for n, name in enumerate(names)]
    data = document(
        {**model, "merges": [" ".join(pair) for pair in model["merges"]]},
        added_tokens=added_tokens,
        normalizer=SP_NORMALIZER,
        pre_tokenizer=None,
        post_processor=bos_template("<s>", 1),
        decoder=SP_DECODER,
    )
    config = {
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": _added_token_dict("<s>"),
        "clean_up_tokenization_spaces": False,
        "eos_token": _added_token_dict("</s>"),
        "model_max_length": 1000000000000000019884624838656,
        "pad_token": None,
        "sp_model_kwargs": {},
        "tokenizer_class": "LlamaTokenizer",
        "unk_token": _added_token_dict("<unk>"),
    }
    return data, config


def llama2_legacy(data: dict) -> dict:
    """Llama-2 as its real file has it, which `tokenizers` refuses: a vocabulary entry of
    spaces and the merge making it, written as a "left right" string that splits into more
    than two parts ("Merges text file invalid at line N")."""
    added_tokens = [{**a, "normalized": True} for a in data["added_tokens"]]
    vocab = dict(data["model"]["vocab"])
    for token in (" ", "  ", "   "):
        vocab.setdefault(token, len(vocab))
    merges = [*data["model"]["merges"], "   ", "    "]
    model = {**data["model"], "vocab": vocab, "merges": merges}
    return {**data, "added_tokens": added_tokens, "model": model}


def gemma_cropped() -> tuple[dict, None]:
    """torchtune's cropped Gemma shape: spaces to `▁` with no prepend, a split at spaces,
    a BPE with byte fallback but none of the byte tokens, so characters outside its small
    alphabet are `<unk>` (runs fused); `<bos>` added by the post-processor; and merges that
    build `<start_of_turn>` from characters, which plain text must never produce."""
    words = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    alphabet = sorted(set(f"{M}abcdefghijklmnopqrstuvwxyz.,'"))
    pieces = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    pieces.normalizer = normalizers.Replace(" ", M)
    pieces.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    trainer = trainers.BpeTrainer(
        vocab_size=len(words) + len(alphabet) + 50,
        special_tokens=words,
        initial_alphabet=alphabet,
        limit_alphabet=len(alphabet),
        show_progress=False,
        min_frequency=2,
    )
    pieces.train_from_iterator([line.lower() for line in corpus()], trainer)
    trained = json.loads(pieces.to_str())["model"]
    vocab = dict(trained["vocab"])
    merges = [m.split(" ", 1) if isinstance(m, str) else list(m) for m in trained["merges"]]
    # `<start_of_turn>` spelled by merges, one character at a time
    target = "<start_of_turn>"
    for char in target:
        vocab.setdefault(char, len(vocab))
    for end in range(2, len(target) + 1):
        left, right = target[: end - 1], target[end - 1]
        if target[:end] not in vocab:
            vocab[target[:end]] = len(vocab)
        merges.append([left, right])
    model = {
        "type": "BPE",
        "dropout": None,
        "unk_token": "<unk>",
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": True,
        "byte_fallback": True,
        "ignore_merges": False,
        "vocab": vocab,
        "merges": merges,
    }
    data = document(
        model,
        added_tokens=[added(vocab[w], w) for w in words],
        normalizer={"type": "Replace", "pattern": {"String": " "}, "content": M},
        pre_tokenizer={
            "type": "Split",
            "pattern": {"String": " "},
            "behavior": "MergedWithPrevious",
            "invert": False,
        },
        post_processor=bos_template("<bos>", vocab["<bos>"]),
        decoder={
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": M}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
            ],
        },
    )
    return data, None


# ------------------------------------------------------------------ writing

PROVENANCE = """Trained here by tests/data/tokenizers/train.py (tokenizers {version}) on this
repository's README.md and docs/*.md plus the script's few multilingual lines; no file
of another project is copied. Regenerate with:
    PYTHONPATH=. python tests/data/tokenizers/train.py
Shape copied from: {model}
{note}
"""


def write(folder: str, data: dict, config: dict | None, model: str, note: str) -> None:
    target = HERE / folder
    target.mkdir(exist_ok=True)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    Tokenizer.from_str(text) if "legacy" not in folder else None  # loads, unless meant not to
    (target / "tokenizer.json").write_text(text + "\n", encoding="utf-8")
    if config is not None:
        (target / "tokenizer_config.json").write_text(
            json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    version = tokenizers.__version__
    (target / "PROVENANCE.txt").write_text(
        PROVENANCE.format(version=version, model=model, note=note), encoding="utf-8"
    )


def main() -> None:
    data, config = llama3()
    write(
        "bytelevel-llama3",
        data,
        config,
        "Llama-3 (meta-llama/Meta-Llama-3-8B tokenizer.json, as converted from tiktoken).",
        "Byte-level BPE, cl100k split, BOS <|begin_of_text|> in the post-processor; tiktoken\n"
        "reproduces it (pipeline/tokenize/tiktoken_bytelevel.py).",
    )
    data, config = qwen2()
    write(
        "bytelevel-qwen2",
        data,
        config,
        "Qwen2.5 (Qwen/Qwen2.5-7B-Instruct tokenizer.json and tokenizer_config.json).",
        "NFC, single-digit split, no BOS, special and ordinary added tokens (<tool_call>).",
    )
    data, _ = plain_byte_level()
    write(
        "bytelevel-plain",
        data,
        None,
        "torchtune tests/assets/tokenizer.json (a tiktoken-converted byte-level BPE, no added\n"
        "tokens, no post-processor) and its tokenizer_config.json.",
        "The config names <|begin_of_sentence|> as bos, which the vocabulary does not hold.",
    )
    config = {
        "bos_token": _added_token_dict("<|begin_of_sentence|>"),
        "eos_token": _added_token_dict("<|end_of_sentence|>"),
    }
    (HERE / "bytelevel-plain" / "tokenizer_config.json").write_text(
        json.dumps(config) + "\n", encoding="utf-8"
    )
    write(
        "bytelevel-cropped",
        cropped_byte_level(),
        None,
        "torchtune tests/assets/tiny_bpe_tokenizer.json.",
        "Byte-level BPE as trained (no whole-word lookup) over only the bytes of the corpus.",
    )
    data, config = phi3()
    write(
        "sentencepiece-phi3",
        data,
        config,
        "microsoft/Phi-3-mini-4k-instruct tokenizer.json and tokenizer_config.json.",
        "SentencePiece-style BPE with byte fallback; </s> added but not special; tiktoken\n"
        "reproduces it (pipeline/tokenize/tiktoken_sentencepiece.py).",
    )
    data, config = llama2()
    write(
        "sentencepiece-llama2",
        data,
        config,
        "meta-llama/Llama-2-7b-hf tokenizer.json and tokenizer_config.json.",
        "SentencePiece-style BPE with byte fallback, <s> in the post-processor, AddedToken\n"
        "dicts in the config.",
    )
    write(
        "sentencepiece-llama2-legacy",
        llama2_legacy(data),
        config,
        "meta-llama/Llama-2-7b-hf tokenizer.json as older `tokenizers` wrote it.",
        "Meant NOT to load: a merge of whitespace-only pieces written as a 'left right'\n"
        "string is ambiguous, and tokenizers refuses it (Merges text file invalid).",
    )
    data, _ = gemma_cropped()
    write(
        "sentencepiece-gemma-cropped",
        data,
        None,
        "torchtune tests/assets/tokenizer_gemma_cropped.json (a cropped Gemma vocabulary).",
        "Byte fallback without byte tokens over a small alphabet: other characters are <unk>.",
    )


if __name__ == "__main__":
    main()
