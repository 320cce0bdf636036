"""The augmented tokenizer an output ships (DESIGN §4): tokenizer.json with the MMS
tokens, the Hugging Face config files that make it complete (generation_config.json: the
ids generation stops on), mms_special_tokens.json recording how it was made, and the
Renderer read back from such a folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from pipeline.output.files import atomic_output, file_sha256
from pipeline.tokenize.hf_files import (
    generation_config,
    pad_token,
    special_tokens_map,
    tokenizer_config,
    vocabulary,
)
from pipeline.tokenize.loading import LoadedTokenizer, TokenizerLoadError, load_tokenizer
from pipeline.tokenize.renderer import IGNORE, LABEL_POLICIES, Renderer

TOKENIZER_DIR = "tokenizer"
"""The folder of an output that holds its augmented tokenizer."""
GENERATION_CONFIG_FILE = "generation_config.json"
"""Beside tokenizer.json: `eos_token_id` (every id a trained span ends with) and the pad
id, for `GenerationConfig.from_pretrained` and the servers that read it."""
SPECIAL_TOKENS_FILE = "mms_special_tokens.json"
"""Beside tokenizer.json: the MMS special ids, the BOS, the renderer, the text encoder, both
tokenizers' sha256."""


def write_tokenizer(
    directory: Path,
    renderer: Renderer,
    base: LoadedTokenizer,
    *,
    base_path: str | None = None,
    media: bool = False,
) -> Path:
    """The augmented tokenizer.json, the tokenizer_config.json (bos/eos/unk/pad, the MMS
    tokens, the chat template that renders the shards) and special_tokens_map.json that
    make it a complete Hugging Face tokenizer, generation_config.json (the stop ids: every
    id a trained span ends with), and mms_special_tokens.json recording the
    special ids, the BOS (if rendered), the text encoder, how the vocabulary grew and both
    tokenizers' sha256. No Tokenizer is serialized; one is parsed only to check the file
    when tiktoken encoded the text. With `media` (an output whose rows hold media), the
    media placeholders are added too and recorded (`media_tokens`); without, every file
    is what a text-only output has always shipped."""
    augmented, sha256 = renderer.shipped_tokenizer(media)
    renderer.check_shipped_tokenizer(augmented, sha256)
    file = directory / "tokenizer.json"
    with atomic_output(file) as out:
        out.write(augmented)
    bos_id = renderer.bos_id
    pad = pad_token(renderer, base)
    record = {
        "renderer": renderer.name,
        "label_policy": renderer.policy,
        "ignore_index": IGNORE,
        "text_encoder": renderer.text_encoder_name,
        "special_tokens": renderer.special_ids.as_dict(),
        "vocabulary": vocabulary(renderer, base, media),
        "pad_token": pad,
        "pad_id": renderer.token_id(pad),
        "bos": {"token": base.bos_token, "id": bos_id} if bos_id is not None else None,
        "tokenizer": {"file": file.name, "sha256": sha256},
        "base_tokenizer": {"path": base_path or str(base.path), "sha256": base.sha256},
    }
    if media:
        record["media_tokens"] = {
            kind: {"token": token, "id": number}
            for kind, (token, number) in renderer.media_tokens.items()
        }
    config = tokenizer_config(renderer, base, media)
    files = {
        SPECIAL_TOKENS_FILE: record,
        "tokenizer_config.json": config,
        "special_tokens_map.json": special_tokens_map(config),
        GENERATION_CONFIG_FILE: generation_config(renderer, base),
    }
    for name, data in files.items():
        with atomic_output(directory / name) as out:
            out.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
    return file


def shipped_tokenizer_record(output: Path) -> dict[str, Any]:
    """The manifest's record of the tokenizer an output folder ships (its `tokenizer/`):
    the file and its sha256, the renderer, the text encoder, the special ids, the labels
    policy, the BOS, the vocabulary, the pad token and the base tokenizer."""
    record = orjson.loads((output / TOKENIZER_DIR / SPECIAL_TOKENS_FILE).read_bytes())
    return {
        "path": f"{TOKENIZER_DIR}/tokenizer.json",
        "sha256": file_sha256(output / TOKENIZER_DIR / "tokenizer.json"),
        "renderer": record["renderer"],
        "text_encoder": record["text_encoder"],
        "special_tokens": record["special_tokens"],
        "label_policy": record["label_policy"],
        "bos": record["bos"],
        "vocabulary": record["vocabulary"],
        "pad_token": record["pad_token"],
        "base": record["base_tokenizer"],
        **({"media_tokens": record["media_tokens"]} if "media_tokens" in record else {}),
    }


def shipped_renderer(directory: Path) -> Renderer:
    """The Renderer an output's `tokenizer/` records: its tokenizer, BOS setting and labels
    policy (TokenizerLoadError when the folder does not hold what write_tokenizer wrote)."""
    try:
        record = orjson.loads((directory / SPECIAL_TOKENS_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError) as err:
        raise TokenizerLoadError(f"{directory / SPECIAL_TOKENS_FILE}: {err}") from None
    policy = record.get("label_policy", "assistant")
    if policy not in LABEL_POLICIES:
        raise TokenizerLoadError(
            f"{directory / SPECIAL_TOKENS_FILE} names an unknown labels policy {policy!r}"
        )
    renderer = Renderer(load_tokenizer(directory), bos=record.get("bos") is not None, policy=policy)
    if renderer.special_ids.as_dict() != record.get("special_tokens"):
        raise TokenizerLoadError(
            f"{directory}: the MMS token ids differ from {SPECIAL_TOKENS_FILE}"
        )
    return renderer
