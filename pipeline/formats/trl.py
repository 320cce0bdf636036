"""TRL's dataset types in their standard form (strings), and the string prompt/answer pairs
other projects share: OpenAI's legacy fine-tuning files and mlx-lm's `completions` data
(`prompt` + `completion`), llm-foundry's and Dolly-derived sets (`prompt` + `response`).
The conversational forms (message lists) are OpenAI-shaped and read by the `openai` format.

Record shapes read (TRL's "Dataset formats and types" guide):
- prompt-completion: `prompt` + `completion` (or `response`) strings -> the prompt as a
  user message, the completion as the assistant's answer;
- unpaired preference (KTO): the same with a boolean `label` -> `meta.preference`
  "desirable" / "undesirable", as the openai format reads a conversational one;
- preference: `prompt` + `chosen` + `rejected` strings -> a chosen and a rejected thread
  (ids `{base}:chosen` / `{base}:rejected`, `meta.pair_id` the base id, `meta.preference`
  the side), as alpaca.py and hh_rlhf.py write pairs. Without `prompt` (TRL's implicit
  prompt) the prompt is the longest common prefix of the two, cut at a word boundary:
  it ends where a word ends and the whitespace after it begins each answer (TRL backs off
  one space the same way; the cut here is also never inside a word, and leaves neither
  answer blank), so prompt + answer is the side's exact text. Sides with no such prefix
  are each kept whole as the answer of a thread without a user message (noted);
- stepwise supervision: `prompt` + `completions` (a list of step strings) + `labels` (one
  per step) -> the prompt as a user message, then one assistant message per step; the
  steps are consecutive assistant messages, so every step but the last has
  `end_turn: false` and they render as one answer written in steps (TRL's trainer joins
  them with its `step_separator`, which is a training setting, not data: no separator is
  added). The labels are kept as `meta.step_labels`; a count that differs from the steps'
  quarantines the record (`missing_field`);
- prompt-only: a `prompt` string alone -> a prompt-only thread (the `prompts` format
  detects the plain ones; this one takes prompts with other columns, as GRPO sets have).

A standard-form completion often continues the prompt mid-sentence (`"The sky is"` +
`" blue."`): it is still the assistant's message, its text kept exactly (its leading
space too), since that is the part the source trains on. Keys not read go to
`meta.extra_fields`; a usable `id` (a non-empty string or an integer) is the thread id.

Detection declines what another format reads better: message lists (openai), `instruction`
/ `question` / `query` records (alpaca, swift, prompts), Human:/Assistant: transcripts
(hh-rlhf), prompts with a list of completion objects (completions).

Example: a preference row and the chosen and rejected threads it becomes.

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> row = {"prompt": "The sky is", "chosen": " blue.", "rejected": " green."}
>>> threads = to_threads(Record("pref.jsonl", "pref.jsonl:1", row), ConvertOptions())
>>> [(t.meta["preference"], [(m.role, m.content) for m in t.messages]) for t in threads]
[('chosen', [('user', 'The sky is'), ('assistant', ' blue.')]), ('rejected', [('user', 'The sky is'), ('assistant', ' green.')])]
"""

from __future__ import annotations

from typing import Any

from pipeline.formats import hh_rlhf
from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder, a_json_kind, source_thread_id
from pipeline.formats.field_names import answer_fields
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "trl"
PROMPT = "prompt"
ANSWER_KEYS = ("completion", "response")
"""The answer of a prompt: TRL's and OpenAI legacy's `completion`, llm-foundry's `response`."""
SOURCES = {
    "completion": "TRL prompt-completion, OpenAI legacy fine-tuning, mlx-lm",
    "response": "prompt-response: llm-foundry, Dolly-derived sets",
}
SIDES = ("chosen", "rejected")
STEPS, STEP_LABELS = "completions", "labels"
LABEL = "label"
OTHER_SHAPES = frozenset(
    {
        "messages",
        "conversations",
        "conversation",
        "contents",
        "instruction",
        "question",
        "query",
        "input",
        "output",
        "history",
        "turns",
    }
)
"""Keys of shapes other formats read: a record holding one is declined by detection."""
PROMPT_ONLY_REASON = "a prompt without an answer: the assistant turn is to be generated"


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_source_id(value: Any) -> bool:
    """Whether `id` became the thread id (a non-empty string or an integer)."""
    return (isinstance(value, str) and value != "") or (
        isinstance(value, int) and not isinstance(value, bool)
    )


def sniff(value: object) -> Sniff:
    """Sure for stepwise supervision; likely for prompt + completion/response strings and
    chosen/rejected strings (with or without a prompt); unlikely for a lone prompt with
    other columns (the prompts format takes plain ones)."""
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object")
    others = sorted(OTHER_SHAPES & set(value))
    if others:
        return Sniff(0.0, f"has {', '.join(others[:3])}: another format's record")
    prompt = value.get(PROMPT)
    if PROMPT in value and not _is_text(prompt):
        return Sniff(0.0, "prompt is not a string (a message list is the openai format's)")
    steps = value.get(STEPS)
    if STEPS in value:
        if not (isinstance(steps, list) and steps and all(map(_is_text, steps))):
            return Sniff(0.0, "completions is not a list of step strings")
        if _is_text(prompt) and isinstance(value.get(STEP_LABELS), list):
            return Sniff(1.0, "prompt + completions steps + labels (TRL stepwise supervision)")
        return Sniff(0.0, "completions steps without a prompt and labels")
    if any(key in value for key in SIDES):
        if not all(_is_text(value.get(key)) for key in SIDES):
            return Sniff(0.0, "chosen/rejected are not both strings")
        if hh_rlhf.sniff(value).score > 0:
            return Sniff(0.0, "chosen/rejected transcripts of Human:/Assistant: turns (hh-rlhf)")
        if _is_text(prompt):
            return Sniff(0.9, "prompt + chosen/rejected strings (TRL standard preference)")
        return Sniff(0.8, "chosen/rejected strings, implicit prompt (TRL standard preference)")
    answer = next((key for key in ANSWER_KEYS if key in value), None)
    if answer is not None:
        if not (_is_text(prompt) and _is_text(value[answer])):
            return Sniff(0.0, f"prompt and {answer} are not both strings")
        if isinstance(value.get(LABEL), bool):
            return Sniff(0.9, f"prompt + {answer} strings + label (TRL unpaired preference)")
        return Sniff(0.9, f"prompt + {answer} strings ({SOURCES[answer]})")
    if _is_text(prompt):
        answers = answer_fields(value)
        if answers:  # a prompt with its answer under another name: a pair, not a prompt
            return Sniff(0.0, f"a prompt with an answer field ({', '.join(answers[:3])})")
        return Sniff(0.3, "a lone prompt string (TRL prompt-only)")
    return Sniff(0.0, "no prompt, completion/response or chosen/rejected strings")


def _text(data: dict[str, Any], key: str) -> str:
    """A string field; anything else quarantines the record, naming the field."""
    value = data.get(key)
    if not isinstance(value, str):
        hint = " (a message list is read by --from openai)" if isinstance(value, list) else ""
        raise RecordRejected("missing_field", f"{key} is {a_json_kind(value)}, not a string{hint}")
    return value


class _Reader:
    """One record's threads: its base id, and the keys read so far (for extra_fields)."""

    def __init__(self, record: Record, options: ConvertOptions):
        self.record = record
        self.options = options
        self.data: dict[str, Any] = record.value
        self.base = source_thread_id(record, self.data.get("id"))
        self.read: set[str] = {"id"} if _is_source_id(self.data.get("id")) else set()

    def builder(self, thread_id: str, meta: dict[str, Any] | None = None) -> ThreadBuilder:
        return ThreadBuilder(self.record, NAME, self.options, thread_id=thread_id, meta=meta)

    def finish(self, builder: ThreadBuilder) -> Thread:
        builder.keep_unread(self.data, self.read)
        return builder.build()

    def prompt(self, builder: ThreadBuilder) -> None:
        """The prompt as the user message; blank quarantines the record."""
        self.read.add(PROMPT)
        text = _text(self.data, PROMPT)
        if not text.strip():
            raise RecordRejected("empty_conversation", "prompt is blank: nothing to answer")
        builder.user(text)

    def answer(self, builder: ThreadBuilder, text: str, where: str) -> None:
        """The assistant's answer; a blank one ends the thread with the prompt (noted)."""
        if text.strip():
            builder.assistant(text)
        else:
            builder.note(f"{where} is blank; the thread ends with the user message")

    # ----------------------------------------------------------------- the shapes

    def stepwise(self) -> list[Thread]:
        self.read.update((STEPS, STEP_LABELS))
        steps, labels = self.data.get(STEPS), self.data.get(STEP_LABELS)
        if not isinstance(steps, list) or not steps:
            raise RecordRejected(
                "missing_field", f"completions is {a_json_kind(steps)} (expected step strings)"
            )
        if not isinstance(labels, list):
            raise RecordRejected(
                "missing_field", f"labels is {a_json_kind(labels)} (expected one label per step)"
            )
        if len(labels) != len(steps):
            raise RecordRejected(
                "missing_field",
                f"completions has {len(steps)} step(s) but labels has {len(labels)} label(s)",
            )
        for index, label in enumerate(labels):
            if not isinstance(label, (bool, int, float)):
                raise RecordRejected(
                    "missing_field",
                    f"labels[{index}] is {a_json_kind(label)} (expected a boolean or a number)",
                )
        builder = self.builder(self.base, {"step_labels": list(labels)})
        self.prompt(builder)
        for index, step in enumerate(steps):
            if not isinstance(step, str):
                raise RecordRejected(
                    "missing_field", f"completions[{index}] is {a_json_kind(step)}, not a string"
                )
            if not step.strip():
                builder.note(f"completions[{index}] (step {index + 1}) is blank")
            builder.assistant(step)
        return [self.finish(builder)]

    def preference(self) -> list[Thread]:
        for key, other in (SIDES, SIDES[::-1]):
            if self.data.get(key) is None:
                raise RecordRejected("missing_field", f"{other} is present but {key} is missing")
        self.read.update(SIDES)
        chosen, rejected = _text(self.data, "chosen"), _text(self.data, "rejected")
        if self.data.get(PROMPT) is not None:
            return [
                self._side(side, answer, explicit=True)
                for side, answer in zip(SIDES, (chosen, rejected), strict=True)
            ]
        cut = implicit_prompt_end(chosen, rejected)
        return [
            self._side(side, answer, cut=cut)
            for side, answer in zip(SIDES, (chosen, rejected), strict=True)
        ]

    def _side(self, side: str, text: str, explicit: bool = False, cut: int = 0) -> Thread:
        meta = {"pair_id": self.base, "preference": side}
        builder = self.builder(f"{self.base}:{side}", meta)
        if explicit:
            self.prompt(builder)
            self.answer(builder, text, side)
        elif cut:
            builder.user(text[:cut])
            builder.note(
                "the prompt is implicit: the longest common prefix of chosen and rejected, "
                "cut at a word boundary"
            )
            builder.assistant(text[cut:])
        else:
            builder.note(
                "the prompt is implicit, but chosen and rejected share no prefix up to a word "
                f"boundary: {side} is kept whole as the answer, with no user message"
            )
            if not text.strip():
                raise RecordRejected("empty_conversation", f"{side} is blank and has no prompt")
            builder.assistant(text)
        return self.finish(builder)

    def completion(self, key: str) -> list[Thread]:
        self.read.add(key)
        meta: dict[str, Any] = {}
        label = self.data.get(LABEL)
        if isinstance(label, bool):
            self.read.add(LABEL)
            meta["preference"] = "desirable" if label else "undesirable"
        builder = self.builder(self.base, meta)
        if label is not None and not isinstance(label, bool):
            builder.note(f"label is {a_json_kind(label)}, not a boolean: not read as a verdict")
        self.prompt(builder)
        self.answer(builder, _text(self.data, key), key)
        return [self.finish(builder)]

    def prompt_only(self) -> list[Thread]:
        builder = self.builder(self.base)
        self.prompt(builder)
        builder.prompt_only(PROMPT_ONLY_REASON)
        return [self.finish(builder)]


def implicit_prompt_end(chosen: str, rejected: str) -> int:
    """Where the shared prompt of two texts ends (0: none): the largest cut inside their
    common prefix that ends a word (a non-space before it, whitespace or the end after it
    in both texts) and leaves both answers non-blank."""
    common = 0
    for a, b in zip(chosen, rejected, strict=False):
        if a != b:
            break
        common += 1
    for cut in range(common, 0, -1):
        if chosen[cut - 1].isspace():
            continue
        if not all(cut == len(text) or text[cut].isspace() for text in (chosen, rejected)):
            continue
        if chosen[cut:].strip() and rejected[cut:].strip():
            return cut
    return 0


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per record; two (chosen, rejected) for a preference pair."""
    if not isinstance(record.value, dict):
        raise RecordRejected(
            "not_an_object", f"expected an object with a prompt, got {a_json_kind(record.value)}"
        )
    reader = _Reader(record, options)
    data = reader.data
    if STEPS in data:
        return reader.stepwise()
    if any(data.get(key) is not None for key in SIDES):
        return reader.preference()
    answer = next((key for key in ANSWER_KEYS if key in data), None)
    if answer is not None:
        return reader.completion(answer)
    if PROMPT in data:
        return reader.prompt_only()
    keys = ", ".join(list(data)[:8]) or "none"
    raise RecordRejected(
        "missing_field",
        "no prompt, completion/response, chosen/rejected or completions; the record has keys "
        + keys,
    )


FORMAT = InputFormat(
    name=NAME,
    summary="TRL's standard (string) dataset types: prompt-completion (also OpenAI legacy, "
    "mlx-lm), prompt/response (llm-foundry, Dolly-derived), preference with explicit or "
    "implicit prompt, unpaired preference (label), stepwise supervision, prompt-only",
    sniff=sniff,
    to_threads=to_threads,
)
