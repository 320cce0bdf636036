"""What a file's sampled records say about each field, for a suggested mapping
(pipeline/formats/suggest.py): how many records hold it, its distinct values, their mean
and longest length, and the role its values point to. A label (few short values, each
repeated), an assertion (promptfoo's `contains:`/`equals`/`is-json`, its `assert` lists,
deepeval's metrics), an id or a number is never an answer; text may be one.

    {"question_id": 1, "text": "How can I ...?", "category": "generic"}  x 43 records
    -> question_id: id; text: text; category: label ("category: 9 distinct values over
       43 records, mean 7 chars: a label, not an answer")

Example: a classification file's label column, and its evidence in words.

>>> rows = [{"message": f"ticket {n}", "department": ["Sales", "Billing"][n % 2]} for n in range(8)]
>>> [(e.key, e.role) for e in field_evidence(rows)]
[('message', 'text'), ('department', 'label')]
>>> field_evidence(rows)[1].said()
'department: 2 distinct values over 8 records, mean 6 chars: a label, not an answer'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

LABEL_RECORDS = 4
"""A field is judged a label over at least this many records holding it."""
LABEL_VALUES = 12
"""A label has at most this many distinct values ..."""
LABEL_CHARS = 40
"""... none longer than this ..."""
LABEL_SHARE = 0.5
"""... and at most this many distinct values per record (its values repeat)."""
ASSERTION_SHARE = 0.8
"""A field is an assertion when this share of its values read as one."""
ASSERTION_TYPES = (
    r"(?:not-)?(?:i?contains(?:-any|-all|-json)?|i?equals|starts-with|regex|is-json|is-sql"
    r"|is-valid-openai-\w+|javascript|python|llm-rubric|model-graded-\w+|similar|levenshtein"
    r"|rouge-n|bleu|answer-relevance|context-\w+|factuality|classifier|cost|latency"
    r"|perplexity(?:-score)?|webhook)"
)
"""promptfoo's assertion types (and their `not-` forms)."""
ASSERTION_TEXT = re.compile(rf"\s*{ASSERTION_TYPES}\s*(?::|$)", re.IGNORECASE)
"""A value such as `contains:Billing Inquiries` or `is-json` (promptfoo's CSV tests)."""
ASSERTION_TYPE = re.compile(rf"{ASSERTION_TYPES}$", re.IGNORECASE)
ASSERTION_KEYS = ("assert", "asserts", "assertion", "assertions", "__expected")
"""Keys holding a test's assertions (promptfoo's `assert` and CSV `__expected` columns)."""
ID_NAME = re.compile(
    r"(?:^|[_.\-\s])(?:id|uid|uuid|idx|key)$|(?-i:[a-z]Id)$|^id[_\-]", re.IGNORECASE
)
LINK = re.compile(r"\s*(?:https?|ftp)://\S+\s*")
"""A value that is one link (a source URL)."""
ID_TEXT = re.compile(r"[\w.:/#-]*\d[\w.:/#-]*")
"""An id written as one token with a digit (`T-1001`, `q_17`, a UUID)."""


@dataclass(frozen=True, slots=True)
class FieldEvidence:
    """A field of the sampled records: where it is (a dotted path), the role its values
    point to (text, label, assertion, id, number, link, messages, objects, list, object,
    mixed, empty)
    and the measures that say so."""

    key: str
    role: str
    records: int
    distinct: int
    mean_chars: float
    max_chars: int

    @property
    def answerable(self) -> bool:
        """Whether the field may hold an answer: text, never a label, an assertion or an id."""
        return self.role == "text"

    def measures(self) -> str:
        """The measures in words: "9 distinct values over 43 records, mean 7 chars"."""
        return (
            f"{self.distinct} distinct value{'s' * (self.distinct != 1)} over {self.records}"
            f" record{'s' * (self.records != 1)}, mean {self.mean_chars:.0f} chars"
        )

    def said(self) -> str:
        """The evidence in a line: the field, its measures and what they make it."""
        what = {
            "label": "a label, not an answer",
            "assertion": "assertions on an answer, not an answer",
            "id": "an id, not an answer",
            "number": "numbers, not an answer",
            "link": "links, not an answer",
        }.get(self.role, self.role)
        return f"{self.key}: {self.measures()}: {what}"


def field_evidence(records: Sequence[Any], prefix: str = "") -> list[FieldEvidence]:
    """The evidence of every top-level field of `records`, in the order first seen, each
    object-valued one followed by its own fields (`vars.query`, as promptfoo nests them)."""
    found: list[FieldEvidence] = []
    for key, values in _columns(records).items():
        found.append(_evidence(f"{prefix}{key}", values))
        if not prefix and values and all(isinstance(value, dict) for value in values):
            found += field_evidence(values, f"{prefix}{key}.")
    return found


def _columns(records: Sequence[Any]) -> dict[str, list[Any]]:
    """Each key of the records (the objects among them) and its non-null values."""
    columns: dict[str, list[Any]] = {}
    for record in records:
        if isinstance(record, dict):
            for key, value in record.items():
                column = columns.setdefault(str(key), [])
                if value is not None:
                    column.append(value)
    return columns


def _evidence(key: str, values: list[Any]) -> FieldEvidence:
    texts = [_as_text(value) for value in values]
    lengths = [len(text) for text in texts]
    return FieldEvidence(
        key,
        _role(key, values, texts),
        len(values),
        len(set(texts)),
        sum(lengths) / len(lengths) if lengths else 0.0,
        max(lengths, default=0),
    )


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _role(key: str, values: list[Any], texts: list[str]) -> str:
    """What the values of the field `key` are, judged from the values themselves first."""
    if not values:
        return "empty"
    if all(isinstance(value, list) for value in values):
        return _list_role(values)
    if all(isinstance(value, dict) for value in values):
        return "assertion" if _assertion_objects(values) else "object"
    if _asserting(key, values):
        return "assertion"
    if all(isinstance(value, (bool, int, float)) for value in values):
        return "id" if ID_NAME.search(key) and len(set(texts)) == len(texts) else "number"
    if not all(isinstance(value, str) for value in values):
        return "mixed"
    if _is_id(key, values):
        return "id"
    if all(LINK.fullmatch(value) for value in values):
        return "link"
    return "label" if _is_label(values) else "text"


def _list_role(values: list[list[Any]]) -> str:
    """A list field: messages (objects with a speaker and a text), assertions, strings."""
    items = [item for value in values for item in value]
    if items and all(isinstance(item, dict) for item in items):
        if _assertion_objects(items):
            return "assertion"
        return "messages" if _message_like(items) else "objects"
    if items and all(isinstance(item, str) for item in items):
        return "list"
    return "mixed"


def _asserting(key: str, values: list[Any]) -> bool:
    """Whether the field holds assertions: by its name, or by most of its string values."""
    if key.lower() in ASSERTION_KEYS:
        return True
    strings = [value for value in values if isinstance(value, str)]
    hits = sum(1 for value in strings if ASSERTION_TEXT.match(value))
    return bool(strings) and hits >= ASSERTION_SHARE * len(values)


def _assertion_objects(items: Sequence[Any]) -> bool:
    """Objects such as promptfoo's `{type: contains, value}` or deepeval's metrics
    (`{metric|name: ...Metric, threshold}`)."""
    dicts = [item for item in items if isinstance(item, dict)]
    hits = sum(1 for item in dicts if _assertion_object(item))
    return bool(dicts) and hits >= ASSERTION_SHARE * len(items)


def _assertion_object(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    if isinstance(kind, str) and ASSERTION_TYPE.match(kind):
        return True
    named = [item.get("metric"), item.get("name")]
    return "threshold" in item or any(isinstance(n, str) and n.endswith("Metric") for n in named)


def _message_like(items: list[dict[str, Any]]) -> bool:
    """Objects of at least two string fields, one of them with few values (a speaker)."""
    strings: dict[str, set[str]] = {}
    for item in items:
        for key, value in item.items():
            if isinstance(value, str):
                strings.setdefault(key, set()).add(value)
    few = [key for key, seen in strings.items() if len(seen) <= LABEL_VALUES]
    return len(strings) >= 2 and bool(few)


def _is_id(key: str, values: list[str]) -> bool:
    """Distinct one-token values with a digit, or distinct values under an id-like name."""
    if len(set(values)) != len(values):
        return False
    return bool(ID_NAME.search(key)) or all(ID_TEXT.fullmatch(value) for value in values)


def _is_label(values: list[str]) -> bool:
    """Few distinct short values, each repeated: a class, category or tag."""
    distinct = set(values)
    return (
        len(values) >= LABEL_RECORDS
        and len(distinct) <= LABEL_VALUES
        and len(distinct) <= LABEL_SHARE * len(values)
        and max(map(len, distinct)) <= LABEL_CHARS
    )


def name_words(key: str) -> list[str]:
    """The words of a field's name (`Best Answer`, `model_reply`, `bestAnswer` -> words)."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", key.split(".")[-1])
    return re.findall(r"[a-z]+", spaced.lower())
