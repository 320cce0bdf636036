"""Media as data (DESIGN §3): the files, data and URLs threads refer to, read, sniffed by
their magic bytes, decoded, limited, hashed and (copy mode) copied under their content
address. One job per module: settings (the config slice), resolve (where the bytes are),
sniff (what they are), decode (whether they are whole), check (a record's threads)."""

from __future__ import annotations

from pipeline.media.check import MEDIA_DIR, Checked, MediaChecker
from pipeline.media.resolve import MediaProblem, NotRead
from pipeline.media.settings import MediaRoot, MediaSettings
from pipeline.mms.media_checked import CHECKED_META, media_meta_sha

__all__ = [
    "CHECKED_META",
    "MEDIA_DIR",
    "Checked",
    "MediaChecker",
    "MediaProblem",
    "MediaRoot",
    "MediaSettings",
    "NotRead",
    "media_meta_sha",
]
