"""How counts read in messages: `1 file`, `2 files`, `0 weighted copies`."""

from __future__ import annotations


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """`count` (with thousands separators) and the noun that goes with it."""
    noun = singular if count == 1 else plural_form or f"{singular}s"
    return f"{count:,} {noun}"
