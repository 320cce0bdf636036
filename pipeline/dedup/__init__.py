"""Deduplication keys: exact content keys (shared with the MMS501 lint rule and the
split), and MinHash near-duplicate detection."""

from pipeline.dedup.keys import content_key, declaration_key, group_content_key, split_group
from pipeline.dedup.minhash import (
    NearDedupSettings,
    NearDuplicateIndex,
    group_signature,
    thread_signature,
)

__all__ = [
    "NearDedupSettings",
    "NearDuplicateIndex",
    "content_key",
    "declaration_key",
    "group_content_key",
    "group_signature",
    "split_group",
    "thread_signature",
]
