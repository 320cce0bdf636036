"""Model outputs to compare: a prompt with several model completions, and AlpacaEval's
model output files.

- `prompt` (or `instruction`) with `completions: [{model, completion}]` (the completion's
  text may also be `response`, `output` or `text`, as UltraFeedback writes it): one thread
  per completion, ids `PROMPT:INDEX`, each carrying `meta.group_id` (the prompt's id) so
  splits, sampling and dedup keep a prompt's completions together, and the model in
  `meta.model`; a completion's other fields (scores, annotations) go to
  `meta.extra_fields` under `completion.`.
- AlpacaEval's `model_outputs.json` rows (`instruction`, `output`, `generator`, `dataset`):
  one thread per row, the generator in `meta.model`. (Rows of different generators for
  the same instruction live in different files: they are not grouped.)

Example: a prompt with two models' completions, and the group of threads it becomes.

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> row = {
...     "prompt": "Say hi.",
...     "completions": [{"model": "a", "completion": "Hi!"}, {"model": "b", "completion": "Hello!"}],
... }
>>> threads = to_threads(Record("outputs.jsonl", "outputs.jsonl:1", row), ConvertOptions())
>>> [(t.meta["model"], [(m.role, m.content) for m in t.messages]) for t in threads]
[('a', [('user', 'Say hi.'), ('assistant', 'Hi!')]), ('b', [('user', 'Say hi.'), ('assistant', 'Hello!')])]
"""

from __future__ import annotations

from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder, a_json_kind, json_kind, source_thread_id
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "completions"
PROMPT_KEYS = ("prompt", "instruction")
TEXT_KEYS = ("completion", "response", "output", "text")
"""Where a completion object holds its text, in the order looked for."""
MODEL_KEYS = ("model", "generator", "model_name")
ID_KEYS = ("id", "prompt_id")


def _prompt_key(value: dict[str, Any]) -> str | None:
    return next((key for key in PROMPT_KEYS if isinstance(value.get(key), str)), None)


def sniff(value: object) -> Sniff:
    """Sure for a prompt with a list of completion objects; likely for an AlpacaEval
    output row (instruction + output + generator)."""
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object")
    completions = value.get("completions")
    listed = completions if isinstance(completions, list) else []
    if listed and _prompt_key(value) and all(isinstance(item, dict) for item in listed):
        return Sniff(1.0, "a prompt with a list of model completions")
    if all(isinstance(value.get(key), str) for key in ("instruction", "output", "generator")):
        return Sniff(0.95, "instruction + output + generator (AlpacaEval model outputs)")
    return Sniff(0.0, "no prompt with completions nor instruction + output + generator")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise RecordRejected("missing_field", f"{where} is {a_json_kind(value)}, not a string")
    return value


def _source_id(value: dict[str, Any]) -> tuple[str | None, Any]:
    for key in ID_KEYS:
        candidate = value.get(key)
        if (isinstance(candidate, str) and candidate) or (
            isinstance(candidate, int) and not isinstance(candidate, bool)
        ):
            return key, candidate
    return None, None


def _model(value: dict[str, Any]) -> tuple[str | None, Any]:
    for key in MODEL_KEYS:
        if isinstance(value.get(key), str) and value[key]:
            return key, value[key]
    return None, None


def _prompted(builder: ThreadBuilder, data: dict[str, Any]) -> str:
    """Adds the system prompt and the prompt; returns the prompt's key."""
    key = _prompt_key(data) or next((k for k in PROMPT_KEYS if k in data), "prompt")
    system = data.get("system")
    if system is not None and _text(system, "system").strip():
        builder.developer(system)
    prompt = _text(data.get(key), key)
    if not prompt.strip():
        raise RecordRejected("empty_conversation", f"{key} is blank: nothing was answered")
    builder.user(prompt)
    return key


def _answer(builder: ThreadBuilder, text: str, where: str) -> None:
    if text.strip():
        builder.assistant(text)
    else:
        builder.prompt_only(f"{where} is empty: the thread ends with the prompt")


def _completion_thread(
    record: Record,
    options: ConvertOptions,
    base: str,
    index: int,
    completion: Any,
    read: set[str],
) -> Thread:
    data: dict[str, Any] = record.value
    where = f"completions[{index}]"
    if not isinstance(completion, dict):
        raise RecordRejected(
            "missing_field", f"{where} is {a_json_kind(completion)}, not an object"
        )
    meta: dict[str, Any] = {"group_id": base, "completion": index}
    model_key, model = _model(completion)
    if model is not None:
        meta["model"] = model
    builder = ThreadBuilder(record, NAME, options, thread_id=f"{base}:{index}", meta=meta)
    prompt_key = _prompted(builder, data)
    text_key = next((key for key in TEXT_KEYS if key in completion), None)
    if text_key is None:
        raise RecordRejected("missing_field", f"{where} has no text ({', '.join(TEXT_KEYS)})")
    _answer(builder, _text(completion[text_key], f"{where}.{text_key}"), f"{where}.{text_key}")
    builder.keep_unread(data, read | {prompt_key})
    builder.keep_unread(completion, {text_key, model_key}, where="completion")
    return builder.build()


def _output_row(record: Record, options: ConvertOptions, data: dict[str, Any]) -> list[Thread]:
    id_key, source_id = _source_id(data)
    model_key, model = _model(data)
    meta = {"model": model} if model is not None else {}
    builder = ThreadBuilder(
        record, NAME, options, thread_id=source_thread_id(record, source_id), meta=meta
    )
    prompt_key = _prompted(builder, data)
    _answer(builder, _text(data.get("output"), "output"), "output")
    builder.keep_unread(data, {prompt_key, "system", "output", model_key, id_key})
    return [builder.build()]


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per completion (grouped by prompt), or per AlpacaEval output row."""
    data = record.value
    if not isinstance(data, dict):
        raise RecordRejected("not_an_object", f"expected an object, got {json_kind(data)}")
    if "completions" not in data:
        if "output" not in data:
            raise RecordRejected("missing_field", "no completions list and no output")
        return _output_row(record, options, data)
    completions = data["completions"]
    if not isinstance(completions, list):
        kind = a_json_kind(completions)
        raise RecordRejected("missing_field", f"completions is {kind}, not a list")
    if not completions:
        raise RecordRejected("empty_conversation", "completions is an empty list")
    id_key, source_id = _source_id(data)
    base = source_thread_id(record, source_id)
    read = {"completions", "system"} | ({id_key} if id_key else set())
    return [
        _completion_thread(record, options, base, index, completion, read)
        for index, completion in enumerate(completions)
    ]


FORMAT = InputFormat(
    name=NAME,
    summary="a prompt with several model completions ({model, completion}), AlpacaEval "
    "model outputs (generator): one thread per completion, grouped, the model in meta",
    sniff=sniff,
    to_threads=to_threads,
)
