"""The Hugging Face files that make the shipped tokenizer complete: tokenizer_config.json
(bos/eos/unk/pad, the MMS tokens, the chat template that renders the shards exactly) and
special_tokens_map.json, so `AutoTokenizer.from_pretrained(OUT/tokenizer)` gives a
tokenizer whose `apply_chat_template` is the renderer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.tokenize.loading import LoadedTokenizer
from pipeline.tokenize.renderer import LabelPolicy, Renderer

TEMPLATE_FILE = Path(__file__).with_name("mms_v0_chat_template.jinja")
_BOS_SWITCH = "{%- set mms_bos = false -%}"
_POLICY_SWITCH = "{%- set mms_train_on = 'assistant' -%}"
PAD_FALLBACKS = ("pad_token", "eos_token", "unk_token")
"""Where the pad token comes from, in order: the base's own pad, else its eos, else its unk.
mms-v0 renders none of them (content that spells one is encoded as text), so none is ever a
trained id, and a loader that masks the pad id masks nothing real."""


def chat_template(bos: bool, policy: LabelPolicy = "assistant") -> str:
    """The mms-v0 chat template; with `bos`, it starts with the base's bos_token as the
    shards do, and its generation blocks mark what `policy` trains."""
    text = TEMPLATE_FILE.read_text(encoding="utf-8")
    if bos:
        text = text.replace(_BOS_SWITCH, _BOS_SWITCH.replace("false", "true"), 1)
    return text.replace(_POLICY_SWITCH, _POLICY_SWITCH.replace("assistant", policy), 1)


def pad_token(base: LoadedTokenizer) -> str | None:
    """The pad token the output names (PAD_FALLBACKS), or None when the base names none."""
    return next((t for key in PAD_FALLBACKS if (t := base.named(key))), None)


def vocabulary(renderer: Renderer, base: LoadedTokenizer) -> dict[str, Any]:
    """How the vocabulary grew: the base's size (`len(tokenizer)`, added tokens included),
    the shipped one's, and what a model needs to use the new ids."""
    encoder = base.text_encoder
    before = max([encoder.base_vocab_size(), *(n + 1 for n in encoder.added_tokens())])
    after = max([before, *(n + 1 for n in renderer.special_ids.as_dict().values())])
    return {
        "base_size": before,
        "size": after,
        "added_ids": after - before,
        "resize_embeddings": after > before,
        "how": "model.resize_token_embeddings(len(tokenizer))" if after > before else None,
    }


def tokenizer_config(renderer: Renderer, base: LoadedTokenizer) -> dict[str, Any]:
    """tokenizer_config.json: the base's bos/eos/unk, a pad token, the five MMS tokens as
    additional special tokens, the base's length limit, and the chat template."""
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": base.named("bos_token"),
        "eos_token": base.named("eos_token"),
        "unk_token": base.named("unk_token"),
        "pad_token": pad_token(base),
        "additional_special_tokens": list(renderer.special_ids.as_dict()),
        "clean_up_tokenization_spaces": False,
        "chat_template": chat_template(renderer.bos_id is not None, renderer.policy),
    }
    limit = base.config.get("model_max_length")
    if isinstance(limit, int) and limit < 2**40:
        config["model_max_length"] = limit
    return config


def special_tokens_map(config: dict[str, Any]) -> dict[str, Any]:
    """special_tokens_map.json: the named tokens of `config` (tokenizer_config)."""
    keys = ("bos_token", "eos_token", "unk_token", "pad_token", "additional_special_tokens")
    return {key: config[key] for key in keys if config.get(key) is not None}
