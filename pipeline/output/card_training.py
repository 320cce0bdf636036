"""The "Training on this dataset" section of a run's dataset card (card.py): the shipped
tokenizer's facts, what the labels train, how generation stops, and the lines that load
the rows for a trainer (for sft rows, or TRL's trainers for the other objectives)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypedDict

from pipeline.tokenize.renderer import STOP_TOKENS


def python_literal(text: str) -> str:
    """`text` as a double-quoted Python string literal."""
    return json.dumps(text, ensure_ascii=False)


_OBJECTIVE_TRAINING = {
    "preference": (
        "DPOConfig, DPOTrainer",
        'pretokenized(DPOTrainer)(args=DPOConfig(output_dir="dpo"), ',
    ),
    "unpaired_preference": (
        "KTOConfig, KTOTrainer",
        'pretokenized(KTOTrainer)(args=KTOConfig(output_dir="kto", '
        'train_sampling_strategy="sequential"), ',
    ),
    "prompt": (
        "GRPOConfig, GRPOTrainer",
        'GRPOTrainer(args=GRPOConfig(output_dir="grpo"), reward_funcs=reward, ',
    ),
}
"""What TRL trains each objective's rows with, as the card's snippet calls it."""


def where_media_are(embedded: bool, copied: bool, *, checked_meta: bool = True) -> str:
    """The card's sentence on what a media cell holds, for a run that embedded the media's
    bytes in the shards and/or copied them into the output's media/ (neither: paths);
    `checked_meta`: the rows keep their `meta` (packed sequences do not), whose
    `media_checked` names the sources of embedded media."""
    if embedded:
        where = (
            "Each cell holds the media's bytes, so the rows load anywhere (`datasets`, "
            "TRL, the Hub), and its path: its content address, `media/<sha256>.<ext>`"
        )
        if copied:
            return where + ", a file of this output too."
        if not checked_meta:
            return where + "."
        return where + " (`meta.media_checked` names each media's source)."
    if copied:
        return (
            "Each cell holds its media's path, `media/<sha256>.<ext>`, relative to this "
            "output: its `media/` folder holds each media once."
        )
    return (
        "Each cell holds its media's path as the source wrote it (relative to the folder "
        "of its input file) or its URL; base64 media are embedded as bytes."
    )


class TrainingFacts(TypedDict):
    """What a trainer must know about the shipped tokenizer and the labels."""

    policy: str
    """The labels policy (`assistant` or `last_assistant`)."""
    pad_token: str
    base_size: int
    size: int
    """The vocabulary size before and after the MMS tokens were added (`size` is
    `len(tokenizer)`, what a fresh model's `vocab_size` must reach)."""
    stop_tokens: dict[str, int]
    """The tokens generation stops on (renderer.STOP_TOKENS) and their ids: the
    `eos_token_id` of tokenizer/generation_config.json."""
    zero_weight_messages: int
    """Assistant messages their source weighted 0 (rendered, not trained)."""
    objective: str
    """What a row is (pipeline/objectives): `sft`, or a pair, a completion, a prompt."""
    media_tokens: dict[str, dict[str, Any]] | None
    """Each media kind's placeholder token and id, when the rows hold media."""
    media_cells: str
    """What a media cell holds (pipeline/mms/media_columns.py `where_media_are`)."""
    packed: bool
    """The rows are packed sequences of threads (`mms pack`, a run's pack stage)."""


def training_facts(
    tokenizer: Mapping[str, Any],
    zero_weight_messages: int,
    objective: str = "sft",
    media_cells: str = where_media_are(embedded=False, copied=False),
    *,
    packed: bool = False,
) -> TrainingFacts:
    """The card's training facts, from the manifest's record of the shipped tokenizer,
    what the shards' media cells hold and whether the rows are packed."""
    vocabulary = tokenizer["vocabulary"]
    special = tokenizer["special_tokens"]
    return TrainingFacts(
        policy=tokenizer["label_policy"],
        pad_token=tokenizer["pad_token"],
        base_size=vocabulary["base_size"],
        size=vocabulary["size"],
        stop_tokens={token: special[token] for token in STOP_TOKENS},
        zero_weight_messages=zero_weight_messages,
        objective=objective,
        media_tokens=tokenizer.get("media_tokens"),
        media_cells=media_cells,
        packed=packed,
    )


_POLICIES = {
    "assistant": "every assistant message (its format, content and end of turn, and the "
    "halt that follows it)",
    "last_assistant": "only each thread's final assistant turn (its last answer with the "
    "tool calls before it), halt included",
}


def training_section(target: str, split: str, facts: TrainingFacts | None) -> str:
    """How to train on the tokens: the tokenizer as shipped, the vocabulary growth, the
    pad token, the labels policy, and how generation stops."""
    if facts is None:
        return ""
    added = facts["size"] - facts["base_size"]
    growth = (
        f"The five MMS special tokens add {added:,} ids to the base vocabulary "
        f"({facts['base_size']:,} → {facts['size']:,}): resize the model's embeddings "
        "before training."
        if added
        else "The base vocabulary already had room for the five MMS special tokens: no new ids."
    )
    growth += (
        f" A model made from scratch needs a `vocab_size` of at least {facts['size']:,}, "
        "`len(tokenizer)` (`tokenizer.vocab_size` counts the base's own vocabulary only, "
        "without its added tokens)."
    )
    end_turn, role = (f"`{t}` (id {facts['stop_tokens'][t]})" for t in STOP_TOKENS)
    pad = f"Its pad token is `{facts['pad_token']}`, never a trained id."
    weighted = facts["zero_weight_messages"]
    skipped = (
        f" {weighted:,} assistant messages their source weighted 0 are rendered, not trained."
        if weighted
        else ""
    )
    resize = "\nmodel.resize_token_embeddings(len(tokenizer))" if added else ""
    return (
        _media_section(facts)
        + f"""## Training on this dataset

`tokenizer/` is a complete Hugging Face tokenizer: the base tokenizer with the MMS special
tokens, and a chat template whose `apply_chat_template` gives exactly the `input_ids` of
each row and, with `return_assistant_tokens_mask=True`, exactly its trained positions.
{growth} {pad}

{_rows_to_train(target, split, facts, skipped, resize)}

Every trained span ends in one of two tokens, so the model learns to stop on either:
{end_turn}, the end of the assistant's turn, or {role}, the halt
(an assistant message that does not end its turn, a tool call, is followed by the
`<|role|>` of the next message). `tokenizer/generation_config.json` lists both as
`eos_token_id` (the tokenizer's `eos_token` is `<|end_turn|>`; the base's eos is in no
row). Set it on the model before training, as above, so every checkpoint saved carries
it, and save the tokenizer with the checkpoint: `generate()`, vLLM and TGI then stop by
themselves. The last id generated says which stop it was: `<|end_turn|>`, the turn is
over; `<|role|>`, a halt: act on the message (run the tool call its format names),
append the result as a `context` message and generate again from
`apply_chat_template(messages, add_generation_prompt=True)`. vLLM reports it as the
output's `stop_reason`: the `<|role|>` id for a halt, `None` for `<|end_turn|>` (the
tokenizer's eos)."""
    )


def _rows_to_train(target: str, split: str, facts: TrainingFacts, skipped: str, resize: str) -> str:
    """What the rows train and the lines that load them for a trainer."""
    loading = f"""tokenizer = AutoTokenizer.from_pretrained({python_literal(target + "/tokenizer")})
model = AutoModelForCausalLM.from_pretrained("BASE-MODEL"){resize}
model.generation_config = GenerationConfig.from_pretrained({python_literal(target + "/tokenizer")})
rows = load_dataset({python_literal(target)}, split={python_literal(split)})"""
    imports = """from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig"""
    policy = f"""`labels` train {_POLICIES.get(facts["policy"], facts["policy"])} (policy
`{facts["policy"]}`).{skipped}"""
    objective = facts.get("objective", "sft")
    if objective == "sft":
        return f"""{policy} Train on `input_ids` and `labels` as they are:

```python
{imports}

{loading}
rows = rows.select_columns(["input_ids", "labels"])
```"""
    names, call = _OBJECTIVE_TRAINING[objective]
    how = (
        "TRL's trainer, without its own tokenization (`pretokenized`): the rows reach its "
        "collator as written"
        if objective != "prompt"
        else "TRL's GRPO trainer, whose reward function receives each row's `reference`"
    )
    helper = (
        "from pipeline.loader.trl import pretokenized  # pip install mms-pipeline\n"
        if objective != "prompt"
        else ""
    )
    return f"""{policy} Train with {how}:

```python
{imports}
from trl import {names}
{helper}
{loading}
{call}model=model,
    train_dataset=rows, processing_class=tokenizer).train()
```"""


_MEDIA_ROWS = {
    "sft": (
        "`input_ids`",
        "each in placeholder order",
        "They also carry the threads' `media` column (each media's message, kind, source "
        "and MIME type).",
    ),
    "packed": (
        "`input_ids`",
        "each its threads' media one thread after the other (in `ids` order), in placeholder order",
        "A packed row holds no messages, so no threads' `media` column.",
    ),
    "preference": (
        "token columns (`prompt_ids`, `chosen_ids`, `rejected_ids`)",
        "each the prompt's media, then the chosen answer's, then the rejected answer's, in "
        "placeholder order: the chosen side's media are the prompt's and the chosen "
        "answer's, the rejected side's the prompt's and the rejected answer's",
        "A pair is cut from two threads into `prompt`, `chosen` and `rejected` messages, "
        "so it holds no threads' `media` column.",
    ),
    "unpaired_preference": (
        "token columns (`prompt_ids`, `completion_ids`)",
        "each the prompt's media, then the completion's, in placeholder order",
        "A labelled completion is cut from its thread into `prompt` and `completion` "
        "messages, so it holds no threads' `media` column.",
    ),
    "prompt": (
        "`prompt_ids`",
        "each the prompt's media in placeholder order",
        "A prompt row is cut from its thread into `prompt` messages, so it holds no "
        "threads' `media` column.",
    ),
}
"""Per kind of row (an objective's, or `packed`): the columns its placeholders stand in,
what its media lists hold, and the sentence on the threads' `media` column."""


_FRAMES_SENTENCE = (
    "A video given as its frame images (a list of frames, as qwen-vl-utils and "
    "LLaMA-Factory take one) is one `<|video|>` placeholder too: its `videos` entry is "
    "null and `video_frames`, which has one entry per video as `videos` has, holds its "
    "frames in order (a list of `datasets` Image cells; null for a video that is one "
    "file), what a processor takes as a video of frames."
)
"""The sentence on `video_frames`, in the section of an output whose rows hold videos."""


def _media_section(facts: TrainingFacts) -> str:
    """What a VLM trainer needs of rows with media: the placeholders and the columns, as
    this output's kind of row (threads, an objective's rows, packed sequences) holds them."""
    media = facts.get("media_tokens")
    if not media:
        return ""
    tokens = ", ".join(
        f"`{entry['token']}` (id {entry['id']}) for {kind}" for kind, entry in media.items()
    )
    kind = "packed" if facts.get("packed") else facts.get("objective", "sft")
    ids, lists, thread_column = _MEDIA_ROWS[kind]
    sentences = [
        f"A row's media stand in its {ids} as one placeholder token each, in order, where "
        f"they stand among the text: {tokens}.",
        "Placeholders are never trained (label -100).",
        "How many tokens a media becomes is the model's processor's business: it expands "
        "each placeholder into the media's tokens (its `image_token`, `audio_token` and "
        "`video_token` are the placeholders: `tokenizer/tokenizer_config.json` names them "
        "under `extra_special_tokens`, where transformers' processors look).",
        "The rows carry their media in one list column per kind (`images`, `audios`, "
        "`videos`: `datasets` Image, Audio and Video features, each a `{bytes, path}` cell, "
        f"as TRL's VLM trainers and LLaMA-Factory read them), {lists}.",
        *([_FRAMES_SENTENCE] if "video" in media else []),
        thread_column,
        facts["media_cells"],
    ]
    return "## Media\n\n" + "\n".join(sentences) + "\n\n"
