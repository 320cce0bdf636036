"""Programmable Prompt Engine (PPE) scripts (`.ai.yaml`, offline-ai/cli): front-matter
configuration, then messages, `---`/`***` dialogue separators, `[[AI]]` generation
slots, `$` directives, `->` chains and `!fn` function blocks. A pre-parser reads the
script (script.py), `$if` branches and separators make dialogues (dialogues.py), and
each dialogue becomes a thread (threads.py). Nothing of a script is ever run, and no
script, file or module it names is opened.

Example: a script and the thread it becomes (its configuration goes to meta).

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> from pipeline.sources.text_documents import TextDocument
>>> text = "system: You are helpful.\\nuser: Hello\\nassistant: Hi there!\\n"
>>> script = TextDocument("ppe", "---\\ntemperature: 0.2\\n---\\n" + text)
>>> [thread] = to_threads(Record("hello.ai.yaml", "hello.ai.yaml", script), ConvertOptions())
>>> [(m.role, m.content) for m in thread.messages]
[('developer', 'You are helpful.'), ('user', 'Hello'), ('assistant', 'Hi there!')]
>>> thread.meta["extra_fields"]
{'temperature': 0.2}
"""

from __future__ import annotations

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import a_json_kind
from pipeline.formats.ppe.script import parse_script
from pipeline.formats.ppe.threads import NAME, script_threads
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record, TextDocument

__all__ = ["FORMAT", "parse_script"]


def _is_script(value: object) -> bool:
    return isinstance(value, TextDocument) and value.kind == "ppe"


def sniff(value: object) -> Sniff:
    """Sure for a `.ai.yaml` file read whole as a PPE script; nothing else is one."""
    if _is_script(value):
        return Sniff(1.0, "a PPE script (.ai.yaml file)")
    return Sniff(0.0, "not a PPE script (.ai.yaml file)")


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per dialogue of the script (see threads.py)."""
    value = record.value
    if not _is_script(value):
        raise RecordRejected(
            "not_an_object",
            f"expected a PPE script read from an .ai.yaml file, got {a_json_kind(value)}",
        )
    try:
        return script_threads(record, options, parse_script(value.text))
    except RecursionError:
        raise RecordRejected(
            "invalid_yaml", "the script nests lists or `$if` blocks too deeply to read"
        ) from None


FORMAT = InputFormat(
    name=NAME,
    summary="Programmable Prompt Engine .ai.yaml scripts: front-matter, dialogues split by "
    "---/***, [[AI]] slots as prompt-only threads; directives, chains and !fn never run",
    sniff=sniff,
    to_threads=to_threads,
)
