"""A tiny randomly initialised LlamaForCausalLM for the packing proofs (a few thousand
parameters besides the embeddings; runs on the CPU in milliseconds)."""

from __future__ import annotations

from typing import Any


def tiny_llama(vocabulary: int, attention: str = "sdpa") -> Any:
    """The model in eval mode. Weights larger than a real model's start (0.5), so what each
    token attends to shows in the loss."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=vocabulary,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        initializer_range=0.5,
        attn_implementation=attention,
    )
    return transformers.LlamaForCausalLM(config).eval()
