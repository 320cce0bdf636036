"""The capability verifier and dataset linter (DESIGN §5, §6): a registry of rules with
stable codes, a streaming linter, and report writers (text, JSON, Markdown, HTML, SARIF,
GitHub annotations)."""

from pipeline.lint.config import ConfigError, LintConfig, load_config
from pipeline.lint.diagnostic import Diagnostic
from pipeline.lint.linter import Linter
from pipeline.lint.report import LintReport
from pipeline.lint.rule import Rule
from pipeline.lint.rules import RULES, UnknownRuleError, find_rule, select_rules

__all__ = [
    "RULES",
    "ConfigError",
    "Diagnostic",
    "LintConfig",
    "LintReport",
    "Linter",
    "Rule",
    "UnknownRuleError",
    "find_rule",
    "load_config",
    "select_rules",
]
