"""The `stages.media` slice of a run config (and `mms convert`'s media options): whether
the media threads refer to are checked, copied into the output, and fetched when they
are URLs; the limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.config_slice import OMITTED, ConfigSlice, plain_settings

MAX_BYTES = 64 << 20
"""Default largest media file (64 MiB): a bigger one is quarantined (`media_too_large`)."""
MAX_PIXELS = 89_478_485
"""Default largest image in pixels (Pillow's own decompression-bomb limit)."""
TIMEOUT = 30.0
"""Default seconds fetching one media may take, whole (`fetch: true`)."""


@dataclass(frozen=True, slots=True)
class MediaSettings:
    """`check`: read every media a kept thread refers to (local path, base64 data; URLs
    only with `fetch`) and quarantine its record when one is missing, outside its input's
    folder, not the kind it claims, undecodable or over the limits. `copy`: write each
    distinct media once into the output's `media/` (named by its sha256) and point the
    threads there (implies reading them). `embed`: a run's shards carry each media's bytes
    in their `images`/`audios`/`videos` cells, so the output loads anywhere (`datasets`,
    TRL, the Hub) without the input's folder; off, the cells carry only paths (with `copy`,
    into the output's media/). `fetch`: also fetch URLs (http(s) with `timeout`; s3, gs,
    az, hf through the object stores), never otherwise."""

    check: bool = True
    copy: bool = False
    embed: bool = True
    fetch: bool = False
    max_bytes: int = MAX_BYTES
    max_pixels: int = MAX_PIXELS
    timeout: float = TIMEOUT

    @property
    def reads(self) -> bool:
        """Whether media are read at all (checked, or copied)."""
        return self.check or self.copy

    @property
    def stages_copies(self) -> bool:
        """Whether a run keeps a copy of each media it read beside its parts, under its
        content address, and points the threads there: to copy them into the output, or to
        embed their bytes in the shards."""
        return self.reads and (self.copy or self.embed)


def _plain(settings: MediaSettings, _recorded: Any) -> Any:
    """The resolved form: left out when every setting is the default, so the manifests of
    runs that never met the slice (text-only data) keep their bytes."""
    if settings == MediaSettings():
        return OMITTED
    return plain_settings(settings)


@dataclass(frozen=True, slots=True)
class MediaRoot:
    """A folder a relative media path is also looked for in, after its input file's folder
    (`--media-root`, an input's `media_root`): `path` where it is read, `name` how outputs
    record it (as the command line or the config writes it)."""

    path: str
    name: str

    @classmethod
    def given(cls, path: str) -> MediaRoot:
        """A root as written, read from where it names (relative: the working folder)."""
        return cls(path, path)


CONFIG = ConfigSlice("media", MediaSettings, plain=_plain)
