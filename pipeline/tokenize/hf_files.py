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
from pipeline.tokenize.special import MEDIA_TOKEN_KEYS

TEMPLATE_FILE = Path(__file__).with_name("mms_v0_chat_template.jinja")
_BOS_SWITCH = "{%- set mms_bos = false -%}"
_POLICY_SWITCH = "{%- set mms_train_on = 'assistant' -%}"


_CONTENT = "{{ message.content }}"
_PARTS = (
    "{%- for part in ([{'type': 'text', 'text': message.content}] if message.content is string"
    " else message.content) -%}"
)


_TAIL = "{%- set mms_tail = namespace(text='') -%}"


def _media_content(media: dict[str, str], trained: bool) -> str:
    """What renders a message's content in a template for media: its text, or each of its
    parts in order, a media part as its kind's placeholder, outside the generation block
    (`trained`: the content stands inside one) since a placeholder is never trained. A
    trained message's last part, when it is text, renders after the parts in the block
    that goes on to its end token, so that block ends on a special token (the template's
    header says why); a text part before a placeholder has a block of its own."""
    tokens = "{" + ", ".join(f"'{kind}': '{token}'" for kind, token in media.items()) + "}"
    text = "{{ part.text }}"
    if trained:
        text = (
            "{%- if loop.last -%}{%- set mms_tail.text = part.text -%}{%- else -%}"
            "{%- generation -%}" + text + "{%- endgeneration -%}{%- endif -%}"
        )
    parts = (
        f"{_PARTS}{{%- if part.type == 'text' -%}}{text}"
        f"{{%- else -%}}{{{{ {tokens}[part.type] }}}}{{%- endif -%}}{{%- endfor -%}}"
    )
    if not trained:
        return parts
    return "{%- endgeneration -%}" + _TAIL + parts + "{%- generation -%}{{ mms_tail.text }}"


def chat_template(
    bos: bool, policy: LabelPolicy = "assistant", media: dict[str, str] | None = None
) -> str:
    """The mms-v0 chat template; with `bos`, it starts with the base's bos_token as the
    shards do, and its generation blocks mark what `policy` trains. With `media` (kind to
    placeholder token: an output that holds media), a message's content is a string or
    its list of parts (OpenAI's and the processors' form), each media part rendered as
    its placeholder, never in a generation block; without, the template is the one
    text-only outputs have always shipped, byte for byte."""
    text = TEMPLATE_FILE.read_text(encoding="utf-8")
    if bos:
        text = text.replace(_BOS_SWITCH, _BOS_SWITCH.replace("false", "true"), 1)
    text = text.replace(_POLICY_SWITCH, _POLICY_SWITCH.replace("assistant", policy), 1)
    if media:
        pieces = text.split(_CONTENT)
        assert len(pieces) == 5  # two trained assistant branches, then untrained, other roles
        rendered = [_media_content(media, trained) for trained in (True, True, False, False)]
        text = pieces[0] + "".join(r + p for r, p in zip(rendered, pieces[1:], strict=True))
    return text


def pad_token(renderer: Renderer, base: LoadedTokenizer) -> str:
    """The pad token the output names (renderer.PAD_SOURCES, else the added `<|pad|>`)."""
    named = next((t for key in PAD_SOURCES if (t := base.named(key))), None)
    if named is not None:
        return named
    assert renderer.added_pad is not None
    return renderer.added_pad[0]


def vocabulary(renderer: Renderer, base: LoadedTokenizer, media: bool = False) -> dict[str, Any]:
    """How the vocabulary grew: the base's size (`len(tokenizer)`, added tokens included),
    the shipped one's (with `media`, the placeholders), and what a model needs to use the
    new ids."""
    encoder = base.text_encoder
    before = max([encoder.base_vocab_size(), *(n + 1 for n in encoder.added_tokens())])
    pad = renderer.added_pad
    ids = [*renderer.special_ids.as_dict().values(), *([pad[1]] if pad else [])]
    if media:
        ids += [number for _, number in renderer.media_tokens.values()]
    after = max([before, *(n + 1 for n in ids)])
    return {
        "base_size": before,
        "size": after,
        "added_ids": after - before,
        "resize_embeddings": after > before,
        "how": "model.resize_token_embeddings(len(tokenizer))" if after > before else None,
    }


def tokenizer_config(
    renderer: Renderer, base: LoadedTokenizer, media: bool = False
) -> dict[str, Any]:
    """tokenizer_config.json: the base's bos and unk, `<|end_turn|>` as the eos (the stop
    every finished turn trains; the base's eos is in no row), a pad token, whether the
    tokenizer adds the BOS (as the rows have it, per the `bos` setting; an EOS never), the
    five MMS tokens as additional special tokens, the base's length limit, and the chat
    template. With `media` (an output that holds media), the placeholders too, named as
    `image_token`, `audio_token` and `video_token` (`extra_special_tokens`, where
    transformers' processors look for the token they expand), and the template renders
    them."""
    placeholders = {kind: token for kind, (token, _) in renderer.media_tokens.items()}
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
        "chat_template": chat_template(
            renderer.bos_id is not None, renderer.policy, placeholders if media else None
        ),
    }
    if media:
        extra = [token for token in placeholders.values() if token not in base.special_tokens]
        config["additional_special_tokens"] += extra
        config["extra_special_tokens"] = {
            MEDIA_TOKEN_KEYS[kind]: token for kind, token in placeholders.items()
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
