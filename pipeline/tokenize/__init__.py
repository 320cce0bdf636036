"""Tokenization (DESIGN §4): the MMS special tokens added to a base tokenizer, and the
`mms-v0` renderer that turns threads into input_ids and exact loss-mask labels."""

from pipeline.tokenize.loading import LoadedTokenizer, TokenizerLoadError, load_tokenizer
from pipeline.tokenize.renderer import IGNORE, EncodedBatch, EncodedThread, Renderer
from pipeline.tokenize.special import MMS_SPECIAL_TOKENS, SpecialIds

__all__ = [
    "IGNORE",
    "MMS_SPECIAL_TOKENS",
    "EncodedBatch",
    "EncodedThread",
    "LoadedTokenizer",
    "Renderer",
    "SpecialIds",
    "TokenizerLoadError",
    "load_tokenizer",
]
