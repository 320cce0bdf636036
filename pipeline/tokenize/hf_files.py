"""The Hugging Face files that make the shipped tokenizer complete: tokenizer_config.json
(bos/eos/unk/pad, the MMS tokens, the chat template that renders the shards exactly),
special_tokens_map.json and generation_config.json (the ids generation stops on), so
`AutoTokenizer.from_pretrained(OUT/tokenizer)` gives a tokenizer whose `apply_chat_template`
is the renderer and `GenerationConfig.from_pretrained(OUT/tokenizer)` stops where the rows
train a stop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.tokenize.loading import LoadedTokenizer
from pipeline.tokenize.renderer import PAD_SOURCES, STOP_TOKENS, LabelPolicy, Renderer

TEMPLATE_FILE = Path(__file__).with_name("mms_v0_chat_template.jinja")
_BOS_SWITCH = "{%- set mms_bos = false -%}"
_POLICY_SWITCH = "{%- set mms_train_on = 'assistant' -%}"


def chat_template(bos: bool, policy: LabelPolicy = "assistant") -> str:
    """The mms-v0 chat template; with `bos`, it starts with the base's bos_token as the
    shards do, and its generation blocks mark what `policy` trains."""
    text = TEMPLATE_FILE.read_text(encoding="utf-8")
    if bos:
        text = text.replace(_BOS_SWITCH, _BOS_SWITCH.replace("false", "true"), 1)
    return text.replace(_POLICY_SWITCH, _POLICY_SWITCH.replace("assistant", policy), 1)


def pad_token(renderer: Renderer, base: LoadedTokenizer) -> str:
    """The pad token the output names (renderer.PAD_SOURCES, else the added `<|pad|>`)."""
    named = next((t for key in PAD_SOURCES if (t := base.named(key))), None)
    if named is not None:
        return named
    assert renderer.added_pad is not None
    return renderer.added_pad[0]


def vocabulary(renderer: Renderer, base: LoadedTokenizer) -> dict[str, Any]:
    """How the vocabulary grew: the base's size (`len(tokenizer)`, added tokens included),
    the shipped one's, and what a model needs to use the new ids."""
    encoder = base.text_encoder
    before = max([encoder.base_vocab_size(), *(n + 1 for n in encoder.added_tokens())])
    pad = renderer.added_pad
    ids = [*renderer.special_ids.as_dict().values(), *([pad[1]] if pad else [])]
    after = max([before, *(n + 1 for n in ids)])
    return {
        "base_size": before,
        "size": after,
        "added_ids": after - before,
        "resize_embeddings": after > before,
        "how": "model.resize_token_embeddings(len(tokenizer))" if after > before else None,
    }


def tokenizer_config(renderer: Renderer, base: LoadedTokenizer) -> dict[str, Any]:
    """tokenizer_config.json: the base's bos and unk, `<|end_turn|>` as the eos (the stop
    every finished turn trains; the base's eos is in no row), a pad token, whether the
    tokenizer adds the BOS (as the rows have it, per the `bos` setting; an EOS never), the
    five MMS tokens as additional special tokens, the base's length limit, and the chat
    template."""
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": base.named("bos_token"),
        "eos_token": STOP_TOKENS[0],
        "unk_token": base.named("unk_token"),
        "pad_token": pad_token(renderer, base),
        "add_bos_token": renderer.bos_id is not None,
        "add_eos_token": False,
        "additional_special_tokens": list(renderer.special_ids.as_dict()),
        "clean_up_tokenization_spaces": False,
        "chat_template": chat_template(renderer.bos_id is not None, renderer.policy),
    }
    limit = base.config.get("model_max_length")
    if isinstance(limit, int) and limit < 2**40:
        config["model_max_length"] = limit
    return config


def generation_config(renderer: Renderer, base: LoadedTokenizer) -> dict[str, Any]:
    """generation_config.json: `eos_token_id` lists every id a trained span ends with
    (STOP_TOKENS: end of turn, then the halt before a tool result), so `generate()`, vLLM
    and TGI stop where the model learned to; the pad id (never trained) and the BOS id when
    the rows start with one."""
    pad = renderer.token_id(pad_token(renderer, base))
    config: dict[str, Any] = {}
    if renderer.bos_id is not None:
        config["bos_token_id"] = renderer.bos_id
    config["eos_token_id"] = renderer.stop_ids
    config["pad_token_id"] = pad
    return config


def special_tokens_map(config: dict[str, Any]) -> dict[str, Any]:
    """special_tokens_map.json: the named tokens of `config` (tokenizer_config)."""
    keys = ("bos_token", "eos_token", "unk_token", "pad_token", "additional_special_tokens")
    return {key: config[key] for key in keys if config.get(key) is not None}
