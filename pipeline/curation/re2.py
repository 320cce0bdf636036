"""Regular expressions over a whole batch of texts at once, by Arrow's RE2: one scan of all
the texts costs a small part of one Python search per text, so the curation stages ask RE2
which texts hold a sign of what they look for and search only those in Python.

    >>> matching(["Mail ann@example.com", "nothing here"], "@")
    [True, False]
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

PYTHON_SPACE = r"\s\x{0b}\x{1c}-\x{1f}\x{85}\p{Z}"
"""What Python's `\\s` matches, in RE2's terms (RE2's own `\\s` is ASCII only), for use
inside brackets."""


def matching(
    texts: Sequence[str] | pa.Array, pattern: str, *, any_case: bool = False
) -> list[bool]:
    """Whether each text holds a match of the RE2 `pattern` (`texts` as Python strings, or
    an Arrow array of them a caller scans more than once)."""
    if not len(texts):
        return []
    column = texts if isinstance(texts, pa.Array) else pa.array(texts, pa.string())
    found = pc.match_substring_regex(column, pattern, ignore_case=any_case)
    return found.to_pylist()  # type: ignore[no-any-return]
