"""The routes to tokens the benchmarks set `mms` against, on the same threads: raw
`tokenizers.Tokenizer.encode_batch` over exactly the text pieces the Renderer encodes (the
floor), the Renderer's own text encoder on them (tiktoken, where it stands in), the
Renderer, and transformers' `apply_chat_template` with DESIGN §4 as a chat template."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")
BATCH_THREADS = 1024

TEMPLATE = (
    "{%- set ns = namespace(open=false) -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}"
    "{%- if ns.open -%}{%- generation -%}<|role|>assistant<|format|>{%- endgeneration -%}"
    "{%- else -%}<|role|>assistant<|format|>{%- endif -%}"
    "{%- generation -%}{{ m.format or 'markdown' }}<|content|>{{ m.content }}"
    "{%- if m.end_turn -%}<|end_turn|>{%- endif -%}{%- endgeneration -%}"
    "{%- set ns.open = not m.end_turn -%}"
    "{%- else -%}"
    "{%- if ns.open -%}{%- generation -%}<|role|>{%- endgeneration -%}"
    "{%- else -%}<|role|>{%- endif -%}"
    "{{ m.role }}{%- if m.role == 'context' and m.name -%}<|name|>{{ m.name }}{%- endif -%}"
    "<|content|>{{ m.content }}"
    "{%- set ns.open = false -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if ns.open -%}{%- generation -%}<|role|>{%- endgeneration -%}{%- endif -%}"
)
"""DESIGN §4 (`mms-v0`, policy `assistant`) as a chat template: `{% generation %}` marks
what is trained (an assistant message's format, <|content|>, content and <|end_turn|>; its
header too when it continues an unended assistant turn; the <|role|> halt signal after an
unended assistant message)."""


class Setup(NamedTuple):
    """One tokenizer's objects: the loaded tokenizer, the Renderer, and a transformers
    tokenizer sharing the Renderer's augmented tokenizer."""

    loaded: Any
    renderer: Any
    hf: Any


def make_setup(spec: Path) -> Setup:
    """The Renderer and a transformers tokenizer sharing its augmented tokenizer."""
    from transformers import PreTrainedTokenizerFast

    from pipeline.tokenize import Renderer, load_tokenizer

    loaded = load_tokenizer(spec)
    renderer = Renderer(loaded)
    hf = PreTrainedTokenizerFast(tokenizer_object=renderer.tokenizer)  # type: ignore[no-untyped-call]
    return Setup(loaded, renderer, hf)


def batches(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """`items` in slices of `size`, as the runs take them."""
    return [items[start : start + size] for start in range(0, len(items), size)]


def pieces(batch: Sequence[Any]) -> list[str]:
    """The distinct text pieces the Renderer encodes for `batch`, in its order."""
    found: dict[str, None] = {}
    for thread in batch:
        for m in thread.messages:
            found[m.role] = None
            if m.role == "context" and m.name:
                found[m.name] = None
            if m.role == "assistant":
                found[m.format or "markdown"] = None
            found[m.content] = None
    return list(found)


def raw_job(setup: Setup, threads: Sequence[Any], batch: int) -> Callable[[], None]:
    """The base tokenizer on exactly the text the Renderer encodes, per batch."""
    base = setup.loaded.tokenizer
    texts = [pieces(b) for b in batches(threads, batch)]

    def run() -> None:
        for strings in texts:
            # the ids taken out of the Encodings, as any user of them must (the Renderer too)
            [e.ids for e in base.encode_batch(strings, add_special_tokens=False)]

    return run


def encoder_job(setup: Setup, threads: Sequence[Any], batch: int) -> Callable[[], None]:
    """The Renderer's own text encoder (tiktoken, where it stands in for `tokenizers`) on
    the same text as raw: the floor of the Renderer's encoding."""
    encoder = setup.loaded.text_encoder
    texts = [pieces(b) for b in batches(threads, batch)]

    def run() -> None:
        for strings in texts:
            encoder.encode_ids(strings)

    return run


def renderer_job(renderer: Any, threads: Sequence[Any], batch: int) -> Callable[[], None]:
    """`Renderer.encode_batch` over `threads`, `batch` threads per call."""
    parts = batches(threads, batch)

    def run() -> None:
        for part in parts:
            renderer.encode_batch(part)

    return run


def raw_jobs(setup: Setup, threads: Sequence[Any], batch: int) -> dict[str, Callable[[], None]]:
    """raw encode_batch, and the Renderer's own text encoder when it is not `tokenizers`."""
    encoder = setup.loaded.text_encoder.name
    jobs = {"raw encode_batch": raw_job(setup, threads, batch)}
    if encoder != "tokenizers":
        jobs[f"raw {encoder}"] = encoder_job(setup, threads, batch)
    return jobs


def chat_messages(thread: Any) -> list[dict[str, Any]]:
    """A thread's messages as chat-template dicts (transformers drops the None fields)."""
    return [m.all_fields() for m in thread.messages]


def hf_call(hf: Any, conversation: Any) -> Any:
    """transformers' route to ids and an assistant mask, with the §4 template."""
    return hf.apply_chat_template(
        conversation,
        chat_template=TEMPLATE,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )


def hf_job(hf: Any, threads: Sequence[Any], batch: int) -> Callable[[], None]:
    """transformers per thread (`batch` 1) or per batch of conversations."""
    conversations = [chat_messages(t) for t in threads]
    calls = conversations if batch == 1 else batches(conversations, batch)

    def run() -> None:
        for conversation in calls:
            hf_call(hf, conversation)

    return run
