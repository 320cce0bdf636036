"""What of a text is code, math or markup (no language), by cheap line heuristics: fenced
blocks, then each line scored on keywords, operators, calls, assignments, identifiers,
symbol density, indentation, braces and semicolons, tags, JSON and YAML keys, LaTeX
commands and formulas. A line scoring CODE_SCORE or more is code; a comment or indented
line that scores less is code when a code line is its neighbour. From the prose lines
the words that are code (`np.array()`, `x=1`, `snake_case`, `$x^2$`) are left out too.

    >>> split_code("Sort it:\\nitems.sort(key=len)\\nreturn items[0]", 400)
    ('Sort it:', True)
"""

from __future__ import annotations

import re

CODE_SCORE = 2
"""Signals a line needs to be code (one signal alone is an accident of prose)."""
FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_HINT = re.compile(
    r"[{}()\[\];=<>\\_$|^]|^(?:[ \t]|[a-z]+\s|[A-Z]{2,}\b|[A-Z][a-z]+-)", re.MULTILINE
)
"""A symbol, or a line opening indented, in lower case or in capitals, without which a text
holds no code line (most prose: returned as it is)."""
_KEYWORD = re.compile(
    r"^(?:def|class|import|if|elsif|unless|when|require|include|puts|val|from\s+[\w.]+\s+import|return|elif|else|try|except|finally|raise"
    r"|lambda|yield|async|await|function|var|let|const|public|private|protected|static|void"
    r"|int|float|double|char|bool|struct|enum|impl|fn|func|package|using|namespace|new"
    r"|#include|#define|#!|echo|print|printf|console\.|System\.|std::|foreach|sudo|pip|npm"
    r"|git|SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WHERE|FROM|\$)\b[^\n]*[^\w\s,.!?'\"]"
)
"""A line opening with a keyword of a programming language, SQL or a shell, a symbol in it."""
_STATEMENT = re.compile(
    r"(?:from\s+[\w.]+\s+)?import\s+[\w.*, ]+(?:\s+as\s+\w+)?"
    r"|(?:(?:public|private|internal|static|abstract|final|export)\s+)*"
    r"(?:class|interface|struct|enum|namespace|module|package|using)\s+[\w.]+"
    r"|(?:SELECT|FROM|WHERE|(?:LEFT |RIGHT |INNER |OUTER |FULL |CROSS )?JOIN|GROUP BY|ORDER BY"
    r"|HAVING|LIMIT|UNION(?: ALL)?|INSERT INTO|VALUES|DELETE FROM|CREATE TABLE|ALTER TABLE"
    r"|AND|OR|ON|CASE|WHEN|THEN|ELSE|END)(?:\s.*)?"
    r"|(?:python3?|node|npm|npx|pip3?|git|curl|wget|sudo|apt-get|docker|cargo|mkdir|cd|ls"
    r"|chmod|export)(?:\s+\S+){1,5}"
    r"|[A-Z][a-z]+-[A-Z][A-Za-z]+\s+-\w.*"
    r"|(?:for|while|if|elif|with|case|WITH)\s.*[:(]|end|fi|done|esac"
    r"|[A-Z]\w*(?:Error|Exception):.*"
)
"""A whole line that is a statement without symbols: an import, a declaration, a line of
SQL (its keywords in capitals), a shell command, a PowerShell cmdlet, a loop or condition
opening a block, an error a program printed."""
_TRAILING_COMMENT = re.compile(r"\S\s+(?:#|//)\s")
_OPERATOR = re.compile(r"==|!=|<=|>=|=>|->|:=|\+=|-=|&&|\|\||::|\+\+|/\*|\*/|</|/>")
_CALL = re.compile(r"\w\(|\w\.\w+\(|\w\[")
_OPENING_CALL = re.compile(r"^[A-Za-z_][\w.]*\(", re.ASCII)
"""A line opening with a call (`print(x)`, `app.run(`): code, as prose never writes one."""
_ASSIGNMENT = re.compile(r"^[\w.\[\]'\"]+\s*=[^=]")
_IDENTIFIER = re.compile(r"\b[a-z]+_\w|\b[a-z]+[A-Z][a-z]")
_TAG = re.compile(r"^</?[A-Za-z][\w:-]*(?:\s[^>]*)?/?>")
_JSON = re.compile(r"^[\[{]|^\"[^\"]*\"\s*:")
_YAML = re.compile(r"^-?\s*[\w.-]+:(?:\s+\S+)?$")
_TABLE_RULE = re.compile(r"^[|+][-+|:= ]*$")
"""The rule of a text table (`+----+`, `|---|:--|`); its rows are weak (`_weak`)."""
_TABLE_ROW = re.compile(r"^\|.*\|$")
_YAML_ITEM = re.compile(r"^\s*- [\w.@/-]+$")
"""A YAML list item of one value: markup next to a key."""
_LATEX = re.compile(r"\\[A-Za-z]+")
_ENDS_CODE = (";", "{", "}", "(", "[", "):", "],", "),", "};", ");")
_CODE_CHAR = re.compile(r"[{}()\[\];=<>\\_$|^&*+/@~%#`]")
"""A symbol of code: a line without one (nor indentation) is scored by `_plain_score`."""
_SYMBOLS = frozenset("{}[]()<>=;/\\|&*+^%$#@~_")
_FORMULA = frozenset("=+*/^<>")
_COMMENT = ("#", "//", "/*", "*/", "--", "<!--", "%")
_BULLET = re.compile(r"^(?:[-*+>]|\d+[.)])\s")
_CODE_WORD = re.compile(r"[!-~]*(?:[_{};=<>\\|$^]|[A-Za-z0-9]\()[!-~]*")
"""An ASCII word of a prose line that is code (`np.array()`, `x=1`, `snake_case`, `$x^2$`)."""
_WORD = re.compile(r"[^\W\d_]{4}")
"""A word of four letters: a line holding one is prose with a formula, not a formula."""
_EAST_ASIAN_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]{3}")
"""Three East Asian characters in a row: prose (in code they are comments and strings)."""


def split_code(text: str, limit: int) -> tuple[str, bool]:
    """`text` without its fenced blocks and code lines, and whether it held any; its lines
    read until `limit` characters of prose lines are found (the rest is not returned)."""
    prose = FENCE.sub("\n", text) if "```" in text else text
    fenced = len(prose) != len(text)
    if not _HINT.search(prose):
        return prose, fenced
    lines, scores = _scored(prose.split("\n"), limit)
    code = _code_lines(lines, scores)
    kept = [
        _CODE_WORD.sub(" ", line) if _CODE_CHAR.search(line) else line
        for line, is_code in zip(lines, code, strict=True)
        if not is_code
    ]
    return "\n".join(kept), fenced or any(code)


def _scored(lines: list[str], limit: int) -> tuple[list[str], list[int]]:
    """The lines up to the one where `limit` characters of prose lines are reached, and
    their scores. Cut after a line that is neither code nor weak, the lines kept are
    judged as they would be with all the others."""
    scores = []
    prose = 0
    for line in lines:
        scores.append(_score(line))
        if scores[-1] < CODE_SCORE and not _weak(line):
            prose += len(line)
            if prose >= limit:
                break
    return lines[: len(scores)], scores


def _code_lines(lines: list[str], scores: list[int]) -> list[bool]:
    """Which lines are code: by their own score, or weak ones (`_weak`) next to code."""
    code = [score >= CODE_SCORE for score in scores]
    weak = [_weak(line) for line in lines]
    keys = [bool(_YAML.match(line.strip()) or _YAML_ITEM.match(line)) for line in lines]
    for row in range(len(lines) - 1):
        if keys[row] and keys[row + 1]:
            code[row] = code[row + 1] = True
    for order in (range(len(lines)), range(len(lines) - 1, -1, -1)):
        previous = False
        for row in order:
            if not lines[row].strip():
                continue
            if weak[row] and previous:
                code[row] = True
            previous = code[row]
    return code


def _weak(line: str) -> bool:
    """Whether a line is code when its neighbour is: indented (not a list item), a comment,
    a YAML key or a table row."""
    stripped = line.strip()
    if stripped.startswith(_COMMENT) or _YAML.match(stripped) or _TABLE_ROW.match(stripped):
        return True
    return line[:1] in (" ", "\t") and not _BULLET.match(stripped)


def _score(line: str) -> int:
    """How many signs of code, math or markup `line` shows (CODE_SCORE make it code)."""
    stripped = line.strip()
    if not stripped:
        return 0
    indented = line[0] in " \t" and not _BULLET.match(stripped)
    if not indented and not _CODE_CHAR.search(stripped):
        return _plain_score(stripped)
    score = int(indented) + 2 * sum(
        bool(pattern.search(stripped))
        for pattern in (_KEYWORD, _ASSIGNMENT, _TAG, _JSON, _OPENING_CALL, _TABLE_RULE)
    )
    score += bool(_OPERATOR.search(stripped)) + bool(_CALL.search(stripped))
    score += bool(_IDENTIFIER.search(stripped)) + bool(_YAML.match(stripped))
    score += bool(_LATEX.search(stripped))
    score += 2 * stripped.endswith(_ENDS_CODE) + 2 * bool(_STATEMENT.fullmatch(stripped))
    score += bool(_TRAILING_COMMENT.search(stripped))
    return score + 2 * _dense(stripped)


def _plain_score(stripped: str) -> int:
    """`_score` of a line neither indented nor holding a symbol of code: only a keyword, a
    statement, a YAML key or an identifier can show it is code."""
    score = 2 * (bool(_KEYWORD.match(stripped)) + bool(_STATEMENT.fullmatch(stripped)))
    return score + bool(_YAML.match(stripped)) + bool(_IDENTIFIER.search(stripped))


def _dense(stripped: str) -> bool:
    """Whether a line is dense with symbols (code) or is operators among few letters and
    no word (a formula); never one holding East Asian prose, which is dense with neither."""
    if _EAST_ASIAN_WORD.search(stripped):
        return False
    solid = len(stripped) - stripped.count(" ")
    if sum(map(_SYMBOLS.__contains__, stripped)) >= 0.15 * solid:
        return True
    letters = sum(map(str.isalpha, stripped))
    return 2 * letters < solid and not _FORMULA.isdisjoint(stripped) and not _WORD.search(stripped)
