"""The published JSON Schema and the Python validator agree on valid and invalid threads."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline import validate_thread_dict
from tests.conftest import REPO

SCHEMA = json.loads((REPO / "schemas" / "mms-thread.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

text = st.text(max_size=8)
names = st.text(min_size=1, max_size=8)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)

simple_roles = st.sampled_from(["platform", "developer", "user"])
media_roles = st.sampled_from(["developer", "user", "assistant", "context"])
sources = st.text(min_size=1, max_size=8)
media_parts = st.builds(
    lambda kind, source, value, mime: (
        {"type": kind, source: value} | ({} if mime is False else {"mime": mime})
    ),
    st.sampled_from(["image", "audio", "video"]),
    st.sampled_from(["path", "url", "data"]),
    sources,
    st.just(False) | st.none() | sources,
)
text_parts = st.builds(
    lambda t: {"type": "text", "text": t},
    st.text(max_size=8).map(lambda t: t.replace("\ufffc", "")),
)
content_lists = st.builds(
    lambda first, rest, at: [*rest[:at], first, *rest[at:]],
    media_parts,
    st.lists(text_parts | media_parts, max_size=3),
    st.integers(0, 3),
)
media_messages = st.builds(
    lambda role, parts: (
        {"role": role, "content": parts} | ({"end_turn": True} if role == "assistant" else {})
    ),
    media_roles,
    content_lists,
)
valid_messages = st.one_of(
    media_messages,
    st.builds(lambda r, c: {"role": r, "content": c}, simple_roles, text),
    st.builds(
        lambda c, f, e, with_format: (
            {"role": "assistant", "content": c, "end_turn": e}
            | ({"format": f} if with_format else {})
        ),
        text,
        names,
        st.booleans(),
        st.booleans(),
    ),
    st.builds(
        lambda c, n, with_name: (
            {"role": "context", "content": c} | ({"name": n} if with_name else {})
        ),
        text,
        st.none() | names,
        st.booleans(),
    ),
)
valid_formats = st.one_of(
    names,
    st.fixed_dictionaries(
        {"name": names},
        optional={
            "halt_on_start": st.booleans(),
            "halt_on_completion": st.booleans(),
            "sampler": st.none()
            | st.sampled_from(["json", "jsonl"])
            | st.dictionaries(text, json_scalars, max_size=2),
        },
    ),
)
valid_settings = st.none() | st.builds(
    lambda f: {"formats": f}, names | st.lists(valid_formats, max_size=3)
)
valid_threads = st.fixed_dictionaries(
    {"id": names, "messages": st.lists(valid_messages, min_size=1, max_size=4)},
    optional={"settings": valid_settings, "meta": st.dictionaries(text, json_values, max_size=3)},
)

FIELDS = [
    "id",
    "messages",
    "settings",
    "meta",
    "role",
    "content",
    "format",
    "end_turn",
    "name",
    "formats",
    "halt_on_start",
    "halt_on_completion",
    "sampler",
    "type",
    "text",
    "path",
    "url",
    "data",
    "mime",
    "extra",
]


@st.composite
def mutated(draw, base=valid_threads):
    """A valid thread with one random edit somewhere inside: a field set to any JSON
    value, a field removed, or a field added (often making it invalid, sometimes not)."""
    thread = draw(base)
    containers = [thread]
    for message in thread["messages"]:
        containers.append(message)
        if isinstance(message["content"], list):
            containers.extend(message["content"])
    settings = thread.get("settings")
    if isinstance(settings, dict):
        containers.append(settings)
        if isinstance(settings["formats"], list):
            containers.extend(f for f in settings["formats"] if isinstance(f, dict))
    target = draw(st.sampled_from(containers))
    action = draw(st.sampled_from(["set", "remove", "role", "marker"]))
    if action == "remove" and target:
        del target[draw(st.sampled_from(sorted(target)))]
    elif action == "role" and "role" in target:
        target["role"] = draw(
            st.sampled_from(["assistant", "context", "user", "tool", "system", "Robot", "platform"])
        )
    elif action == "role" and "type" in target:
        target["type"] = draw(st.sampled_from(["text", "image", "audio", "video", "file"]))
    elif action == "marker" and isinstance(target.get("text"), str):
        target["text"] += "\ufffc"
    else:
        target[draw(st.sampled_from(FIELDS))] = draw(json_values)
    return thread


@given(valid_threads)
def test_generated_valid_threads_pass_both(thread):
    assert validate_thread_dict(thread) == []
    assert list(VALIDATOR.iter_errors(thread)) == []


@given(mutated())
def test_python_validator_and_json_schema_agree(thread):
    python_ok = not validate_thread_dict(thread)
    schema_ok = VALIDATOR.is_valid(thread)
    assert python_ok == schema_ok, (validate_thread_dict(thread), thread)


@given(json_values)
def test_arbitrary_json_values_agree(value):
    assert (not validate_thread_dict(value)) == VALIDATOR.is_valid(value)


@pytest.mark.parametrize(
    ("content", "valid"),
    [
        ([{"type": "image", "path": "a.jpg"}], True),
        ([{"type": "text", "text": "Hi"}], False),
        ([], False),
        ([{"type": "image", "path": "a.jpg", "url": "https://x/a.jpg"}], False),
        ([{"type": "image"}], False),
        ([{"type": "image", "data": ""}], False),
        ([{"type": "file", "path": "a.pdf"}], False),
        ([{"type": "image", "url": "https://x/a.jpg", "mime": None}], True),
        ([{"type": "text", "text": "a\ufffc"}, {"type": "image", "path": "a.jpg"}], False),
    ],
)
def test_content_parts_agree_case_by_case(content, valid):
    thread = {"id": "t", "messages": [{"role": "user", "content": content}]}
    assert (not validate_thread_dict(thread)) == valid == VALIDATOR.is_valid(thread)
    platform = {"id": "t", "messages": [{"role": "platform", "content": content}]}
    assert validate_thread_dict(platform) and not VALIDATOR.is_valid(platform)


def test_schema_is_a_valid_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
