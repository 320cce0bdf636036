"""PPE `[[...]]` replacements in message text: generation slots (`[[AI]]`,
`[[X:temperature=0.1]]`, `[[X:|a|b]]`), script calls (`[[@file(...)]]`,
`[[@$echo]]`) and regex replacements (`[[/re/:VAR]]`). They are found, never run."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

SLOT = re.compile(r"\[\[(.+?)\]\](?!\])", re.DOTALL)
NAMED = re.compile(r"(?P<name>[A-Za-z_]\w*)(?::(?P<params>.*))?", re.DOTALL)
RANDOM = re.compile(r":\s*(?:random|type\s*=\s*['\"]?random['\"]?)\s*$")


@dataclass(frozen=True, slots=True)
class Slot:
    """One `[[...]]`: `ai` (the model writes it), `random` (a local random pick from a
    choice list), `call` (another script or directive) or `regex` (a replacement on a
    run-time result). `text` is the slot as written."""

    kind: Literal["ai", "random", "call", "regex"]
    text: str
    name: str = ""
    params: str = ""
    choices: tuple[str, ...] = ()


def find_slots(text: str) -> list[Slot]:
    """Every `[[...]]` replacement in `text`, in order (other double brackets are text)."""
    slots = []
    for match in SLOT.finditer(text):
        slot = _slot(match.group(0), match.group(1).strip())
        if slot is not None:
            slots.append(slot)
    return slots


def _slot(text: str, inner: str) -> Slot | None:
    if inner.startswith("@"):
        return Slot("call", text)
    if inner.startswith("/"):
        return Slot("regex", text)
    named = NAMED.fullmatch(inner)
    if named is None:
        return None
    params = (named["params"] or "").strip()
    if not params.startswith("|"):
        return Slot("ai", text, named["name"], params)
    random = RANDOM.search(params)
    choices = params[: random.start()] if random else params
    values = tuple(value.strip() for value in choices.split("|")[1:] if value.strip())
    return Slot("random" if random else "ai", text, named["name"], "", values)
