"""Self-Instruct tasks (seed tasks, user-oriented evaluation tasks, generated tasks): an
`instruction` with `instances` of `{input, output}`. Each instance becomes one thread (the
instruction and the instance's input as the user message, its output as the answer),
ids `TASK:INDEX`; every thread of a task carries `meta.group_id` (the task id) so splits,
sampling and dedup keep a task's instances together. The task's other fields (`name`,
`is_classification`, `motivation_app`) are kept in `meta.extra_fields`.

Example: a seed task and the thread of its instance (one per instance, grouped).

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> task = {
...     "id": "seed_task_0", "name": "breakfast", "instruction": "Suggest a breakfast.",
...     "instances": [{"input": "", "output": "Oatmeal with fruit."}], "is_classification": False,
... }
>>> [thread] = to_threads(Record("seed_tasks.jsonl", "seed_tasks.jsonl:1", task), ConvertOptions())
>>> thread.id, [(m.role, m.content) for m in thread.messages]
('seed_task_0:0', [('user', 'Suggest a breakfast.'), ('assistant', 'Oatmeal with fruit.')])
"""

from __future__ import annotations

from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder, a_json_kind, json_kind, source_thread_id
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "self-instruct"
INSTANCE_KEYS = frozenset({"input", "output"})


def sniff(value: object) -> Sniff:
    """Sure for an instruction string with a list of instance objects."""
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object")
    instances = value.get("instances")
    listed = isinstance(instances, list) and all(isinstance(item, dict) for item in instances)
    if listed and instances and isinstance(value.get("instruction"), str):
        return Sniff(1.0, "an instruction with instances of {input, output} (Self-Instruct)")
    return Sniff(0.0, "no instruction with a list of instances")


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RecordRejected("missing_field", f"{where} is {a_json_kind(value)}, not a string")
    return value


def _thread(
    record: Record,
    options: ConvertOptions,
    base: str,
    index: int,
    instance: Any,
    data: dict[str, Any],
    read: set[str],
) -> Thread:
    where = f"instances[{index}]"
    if not isinstance(instance, dict):
        raise RecordRejected("missing_field", f"{where} is {a_json_kind(instance)}, not an object")
    meta = {"group_id": base, "instance": index}
    builder = ThreadBuilder(record, NAME, options, thread_id=f"{base}:{index}", meta=meta)
    instruction = _text(data.get("instruction"), "instruction")
    extra = _text(instance.get("input"), f"{where}.input")
    prompt = "\n\n".join(part for part in (instruction, extra) if part.strip())
    if not prompt.strip():
        raise RecordRejected("empty_conversation", f"instruction and {where}.input are blank")
    builder.user(prompt)
    output = _text(instance.get("output"), f"{where}.output")
    if output.strip():
        builder.assistant(output)
    else:
        builder.prompt_only(f"{where} has no output: the answer is to be generated")
    builder.keep_unread(data, read)
    builder.keep_unread(instance, INSTANCE_KEYS, where="instance")
    return builder.build()


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per instance, all of one group (the task)."""
    data = record.value
    if not isinstance(data, dict):
        raise RecordRejected("not_an_object", f"expected an object, got {json_kind(data)}")
    instances = data.get("instances")
    if not isinstance(instances, list):
        raise RecordRejected("missing_field", f"instances is {a_json_kind(instances)}, not a list")
    if not instances:
        raise RecordRejected("empty_conversation", "instances is an empty list")
    source_id = data.get("id")
    base = source_thread_id(record, source_id)
    read = {"instruction", "instances"} | ({"id"} if base == str(source_id) else set())
    return [
        _thread(record, options, base, index, instance, data, read)
        for index, instance in enumerate(instances)
    ]


FORMAT = InputFormat(
    name=NAME,
    summary="Self-Instruct tasks (instruction + instances of {input, output}): one thread "
    "per instance, grouped by task",
    sniff=sniff,
    to_threads=to_threads,
)
