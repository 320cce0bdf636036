"""A randomly initialised tiny LLaVA (no weights downloaded) and its processor, sized for
CPU tests: a 28-pixel CLIP tower of 14-pixel patches, so each image is 4 tokens."""

from __future__ import annotations

from typing import Any

IMAGE_TOKENS = 4
"""Tokens the processor expands each `<|image|>` into: (28 / 14) ** 2 patches."""


def tiny_llava(tokenizer: Any) -> tuple[Any, Any]:
    """(processor, model) for the shipped tokenizer of an output: the processor reads the
    image token from the tokenizer, the model's vocabulary is the tokenizer's."""
    import torch
    import transformers

    processor = transformers.LlavaProcessor(
        image_processor=transformers.CLIPImageProcessor(
            size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}
        ),
        tokenizer=tokenizer,
        patch_size=14,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
    )
    config = transformers.LlavaConfig(
        vision_config=transformers.CLIPVisionConfig(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=28,
            patch_size=14,
        ),
        text_config=transformers.LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
        ),
        image_token_index=tokenizer.image_token_id,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    torch.manual_seed(0)
    return processor, transformers.LlavaForConditionalGeneration(config)


def llava_batch(processor: Any, tokenizer: Any, rows: Any, ignore: int) -> dict[str, Any]:
    """The processor's batch of `rows` (their ids decoded, their images as `datasets`
    decodes them), with labels: the ids, `ignore` on image and padding positions."""
    batch = processor(
        text=[tokenizer.decode(row["input_ids"]) for row in rows],
        images=[row["images"] for row in rows],
        return_tensors="pt",
        padding=True,
    )
    labels = batch["input_ids"].clone()
    labels[(labels == tokenizer.image_token_id) | (batch["attention_mask"] == 0)] = ignore
    batch["labels"] = labels
    return dict(batch)
