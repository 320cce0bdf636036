"""Tokenization (DESIGN §4): the MMS special tokens added to a base tokenizer, and the
`mms-v0` renderer that turns threads into input_ids and exact loss-mask labels."""

from pipeline.tokenize.loading import LoadedTokenizer, TokenizerLoadError, load_tokenizer
from pipeline.tokenize.renderer import (
    IGNORE,
    LABEL_POLICIES,
    RENDERER_NAME,
    EncodedBatch,
    EncodedThread,
    LabelPolicy,
    Renderer,
)
from pipeline.tokenize.special import MMS_SPECIAL_TOKENS, SpecialIds
from pipeline.tokenize.tables import TOKENIZED_SCHEMA, tokenize_threads

__all__ = [
    "IGNORE",
    "LABEL_POLICIES",
    "MMS_SPECIAL_TOKENS",
    "RENDERER_NAME",
    "TOKENIZED_SCHEMA",
    "EncodedBatch",
    "EncodedThread",
    "LabelPolicy",
    "LoadedTokenizer",
    "Renderer",
    "SpecialIds",
    "TokenizerLoadError",
    "load_tokenizer",
    "tokenize_threads",
]
