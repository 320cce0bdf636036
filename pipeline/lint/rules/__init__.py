"""The rule registry: every lint rule of DESIGN §6 (one module per family), and the
selection of rules by code, family prefix or `ALL`, as `--select`/`--ignore` give it."""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.lint.rule import Rule
from pipeline.lint.rules import capability, content, dataset, halting, media, pairs, structure

RULES: tuple[Rule, ...] = tuple(
    sorted(
        [
            *structure.RULES,
            *media.RULES,
            *capability.RULES,
            *halting.RULES,
            *content.RULES,
            *dataset.RULES,
            *pairs.RULES,
        ],
        key=lambda rule: rule.code,
    )
)
RULES_BY_CODE: dict[str, Rule] = {rule.code: rule for rule in RULES}
RULES_BY_NAME: dict[str, Rule] = {rule.name: rule for rule in RULES}


class UnknownRuleError(ValueError):
    """A selector that names no rule; the message suggests what exists."""


def find_rule(selector: str) -> Rule:
    """The rule with this code (`MMS201`, any case) or name (`capability-not-enabled`)."""
    rule = RULES_BY_CODE.get(selector.upper()) or RULES_BY_NAME.get(selector.lower())
    if rule is None:
        raise UnknownRuleError(_unknown(selector))
    return rule


def _unknown(selector: str) -> str:
    family = selector.upper()[:4]
    near = [rule.code for rule in RULES if rule.code.startswith(family)] or [r.code for r in RULES]
    return f"no rule {selector!r}; rules are {', '.join(near)} (see `mms rules`)"


def _matches(selector: str, rule: Rule) -> int:
    """How specifically `selector` names `rule`: 0 not at all, 1 ALL, 2+ prefix length."""
    if selector == "ALL":
        return 1
    if selector.lower() == rule.name:
        return 10
    return len(selector) if rule.code.startswith(selector) else 0


def select_rules(select: Iterable[str], ignore: Iterable[str] = ()) -> list[Rule]:
    """The rules `select` names minus those `ignore` names; when both name a rule, the
    more specific selector wins (`--select MMS2 --ignore MMS207` keeps MMS201..MMS206,
    `--ignore MMS2 --select MMS201` keeps MMS201). Raises UnknownRuleError."""
    selected = [s.strip() if s.strip() == "ALL" else s.strip().upper() for s in select if s.strip()]
    ignored = [s.strip() if s.strip() == "ALL" else s.strip().upper() for s in ignore if s.strip()]
    for selector in [*selected, *ignored]:
        if not any(_matches(selector, rule) for rule in RULES):
            raise UnknownRuleError(_unknown(selector))
    chosen = []
    for rule in RULES:
        take = max((_matches(s, rule) for s in selected), default=0)
        drop = max((_matches(s, rule) for s in ignored), default=0)
        if take and take > drop:
            chosen.append(rule)
    return chosen
