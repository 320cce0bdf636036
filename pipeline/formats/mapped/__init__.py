"""Records in any shape a curator describes with a field mapping (`inputs[].mapping` in a
pipeline config, `mms convert --mapping FILE`, or the entries of a LLaMA-Factory
`dataset_info.json` through `mms convert --dataset-info`): each record is rewritten
into ShareGPT turns or Alpaca columns and converted by that adapter, so renamed keys
give the same threads as the original shape. Never detected: a mapping names it.

Example: a record with its own keys, the mapping that names them, and the thread it
becomes.

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> from pipeline.formats.field_mapping import FieldMapping
>>> mapping = FieldMapping(
...     messages="dialog", role="who", content="said",
...     roles=(("customer", "user"), ("agent", "assistant")),
... )
>>> record = {"dialog": [{"who": "customer", "said": "Hi"}, {"who": "agent", "said": "Hello!"}]}
>>> [thread] = to_threads(Record("log.json", "log.json#0", record), ConvertOptions(mapping=mapping))
>>> [(m.role, m.content) for m in thread.messages], thread.meta["source_format"]
([('user', 'Hi'), ('assistant', 'Hello!')], 'mapped')
"""

from __future__ import annotations

import dataclasses

from pipeline.formats import alpaca, sharegpt
from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import json_kind
from pipeline.formats.field_mapping import FieldMapping, FileMappings
from pipeline.formats.mapped.rewrite import alpaca_record, sharegpt_record
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected
from pipeline.sources import Record

NAME = "mapped"
NO_RESPONSE = "the record has no response ({key}): the prompt ends the thread"


def sniff(value: object) -> Sniff:
    """Never chosen by detection: which keys mean what is the mapping's to say."""
    return Sniff(0.0, "read only with a mapping (inputs[].mapping, --mapping, --dataset-info)")


def mapping_for(record: Record, options: ConvertOptions) -> FieldMapping:
    """The mapping of the record's input; RecordRejected when none was given for it."""
    mapping = options.mapping
    if isinstance(mapping, FileMappings):
        mapping = mapping.for_source(record.source)
    if mapping is None:
        raise RecordRejected(
            "missing_field",
            "the mapped format needs a mapping (inputs[].mapping, --mapping or --dataset-info)",
        )
    return mapping


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """The record rewritten as its mapping says, converted by the ShareGPT or Alpaca
    adapter; the threads say `source_format: mapped`."""
    if not isinstance(record.value, dict):
        raise RecordRejected("not_an_object", f"expected an object, got {json_kind(record.value)}")
    return convert_with(record, options, mapping_for(record, options))


def convert_with(record: Record, options: ConvertOptions, mapping: FieldMapping) -> list[Thread]:
    """The record (an object) rewritten as `mapping` says, converted by the ShareGPT or
    Alpaca adapter (the threads say `source_format: mapped`)."""
    data = record.value
    prompt_only = False
    if mapping.shape == "alpaca":
        rewritten = alpaca_record(data, mapping)
        if "output" not in rewritten and "chosen" not in rewritten:
            rewritten["output"] = ""
            prompt_only = True
        threads = alpaca.to_threads(dataclasses.replace(record, value=rewritten), options)
    else:
        rewritten = sharegpt_record(data, mapping)
        threads = sharegpt.to_threads(dataclasses.replace(record, value=rewritten), options)
    return [_as_mapped(thread, mapping, prompt_only) for thread in threads]


def _as_mapped(thread: Thread, mapping: FieldMapping, prompt_only: bool) -> Thread:
    meta = {**thread.meta, "source_format": NAME}
    if prompt_only:
        note = NO_RESPONSE.format(key=mapping.response or "output")
        empty = "the answer is empty; the thread ends with the user message"
        notes = [n for n in meta.get("notes", []) if n != empty]
        meta |= {"prompt_only": True, "notes": [*notes, note]}
    return Thread(thread.id, thread.messages, thread.settings, meta)


FORMAT = InputFormat(
    name=NAME,
    summary="any record shape described by a field mapping (messages/role/content keys, "
    "role names, system, tools, chosen/rejected, weights; LLaMA-Factory dataset_info "
    "and axolotl field mappings)",
    sniff=sniff,
    to_threads=to_threads,
)
