"""The media lint rules (MMS106..MMS109): each fires where it must and stays
silent where it must not, through MMS JSONL and through the converters (a LLaMA-Factory
file with two `<image>` tags and one image gives one MMS108 naming the record)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.jobs.lint import lint, lint_threads
from pipeline.jobs.read import ReadSpec
from pipeline.lint import LintConfig
from pipeline.lint.rules.examples import assistant, context, developer, thread, user
from pipeline.lint.rules.structure import rejection_findings
from pipeline.mms import Media, Message, Thread
from pipeline.quarantine import Rejection
from tests.linting import findings, fired

IMAGE = {"type": "image", "path": "images/cat.jpg"}
MEDIA_CODES = ("MMS105", "MMS106", "MMS107", "MMS108", "MMS109")


def parts(*items: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": i} if isinstance(i, str) else i for i in items]


def holding(message: dict[str, Any], *items: Any) -> dict[str, Any]:
    return {**message, "content": parts(*items)}


def lint_file(path: Path, *codes: str, spec: ReadSpec | None = None) -> list[Any]:
    report = lint(str(path), spec or ReadSpec(), config=LintConfig(select=codes or ("ALL",)))
    assert report.stats.balanced
    return list(report.diagnostics)


# --------------------------------------------------------------------------- MMS106


def test_media_in_an_assistant_message_is_an_error_and_a_warning_when_untrained(tmp_path):
    trained = holding(assistant(""), "Here: ", IMAGE)
    untrained = {**holding(assistant(""), IMAGE), "weight": 0}
    record = thread(user("Draw two cats."), untrained, user("Again?"), trained)
    found = [(d.message_index, d.severity) for d in fired(tmp_path, [record], "MMS106")]
    assert found == [(1, "warning"), (3, "error")]
    (d,) = [d for d in fired(tmp_path, [record], "MMS106") if d.severity == "error"]
    assert "1 image" in d.message and "user and developer" in d.message


@pytest.mark.parametrize("role", [user, developer, lambda text: context(text, "camera")])
def test_media_in_user_developer_and_context_messages_are_fine(tmp_path, role):
    record = thread(holding(role(""), IMAGE, "What is this?"), assistant("A cat."))
    assert fired(tmp_path, [record], "MMS106") == []


# --------------------------------------------------------------------------- MMS107


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            {"role": "platform", "content": parts(IMAGE)},
            "messages[0].content: a platform message holds no media (its content is a string)",
        ),
        (
            holding(user(""), {"type": "image"}),
            "messages[0].content[0]: a media part needs one of path, url, data",
        ),
        (
            holding(user(""), {"type": "image", "path": "a.jpg", "url": "https://x/a.jpg"}),
            "messages[0].content[0]: holds path and url: a media part has exactly one",
        ),
        (
            holding(user(""), IMAGE, {"type": "file", "path": "a.pdf"}),
            'messages[0].content[1].type: unknown part type "file" '
            "(expected text, image, audio, video)",
        ),
    ],
)
def test_invalid_media_parts_are_mms107_not_mms102(tmp_path, message, expected):
    record = thread(message, assistant("ok"))
    found = findings(tmp_path, [record], "MMS1")
    assert [(d.code, d.message, d.message_index) for d in found] == [("MMS107", expected, 0)]


def test_a_record_with_media_and_other_field_problems_gets_each_its_own_code(tmp_path):
    record = thread(holding(user(""), {"type": "image"}), {"role": "assistant", "content": "x"})
    found = sorted((d.code, d.message) for d in findings(tmp_path, [record], "MMS1"))
    assert found == [
        ("MMS102", "messages[1].end_turn: required field is missing"),
        ("MMS107", "messages[0].content[0]: a media part needs one of path, url, data"),
    ]


# --------------------------------------------------------------------------- MMS108


def write_json(tmp_path: Path, name: str, records: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(records))
    return path


LLAMA_FACTORY = [
    {
        "messages": [
            {"role": "user", "content": "<image><image>What differs between these?"},
            {"role": "assistant", "content": "The colour."},
        ],
        "images": ["mllm_demo_data/1.jpg"],
    },
    {
        "messages": [
            {"role": "user", "content": "<image>Who is this?"},
            {"role": "assistant", "content": "A cat."},
        ],
        "images": ["mllm_demo_data/2.jpg"],
    },
]


def test_llama_factory_tags_that_outnumber_the_images_are_one_mms108_naming_the_record(
    tmp_path,
):
    path = write_json(tmp_path, "mllm_demo.json", LLAMA_FACTORY)
    (d,) = lint_file(path, *MEDIA_CODES)
    assert (d.code, d.severity, d.source) == ("MMS108", "error", str(path))
    assert d.locator == f"{path}#0" and d.thread_id
    assert d.message == "images lists 1 file(s) but the turns hold 2 <image> [media_mismatch]"


def test_mms_lint_on_the_llama_factory_file_reports_mms108_and_fails(tmp_path):
    path = write_json(tmp_path, "mllm_demo.json", LLAMA_FACTORY)
    result = CliRunner().invoke(main, ["lint", str(path), "--workers", "1"])
    assert result.exit_code == 1, result.output
    assert "MMS108" in result.output and "#0" in result.output
    assert "MMS105" not in result.output


def test_a_llava_sharegpt_record_with_two_tags_for_its_one_image_is_mms108(tmp_path):
    record = {
        "id": "llava-1",
        "image": "coco/1.jpg",
        "conversations": [
            {"from": "human", "value": "<image>\n<image>\nDescribe."},
            {"from": "gpt", "value": "A kitchen."},
        ],
    }
    path = write_json(tmp_path, "llava.json", [record])
    (d,) = lint_file(path, *MEDIA_CODES, spec=ReadSpec("sharegpt"))
    assert (d.code, d.thread_id) == ("MMS108", "llava-1") and "[media_mismatch]" in d.message


def test_tags_of_a_record_without_its_media_list_are_a_warning_on_the_thread(tmp_path):
    records = [
        {
            "messages": [
                {"role": "user", "content": "<image>Who?"},
                {"role": "assistant", "content": "A cat."},
            ]
        }
    ]
    path = write_json(tmp_path, "no_images.json", records)
    (d,) = lint_file(path, *MEDIA_CODES)
    assert (d.code, d.severity, d.message_index) == ("MMS108", "warning", 0)
    assert "has no image" in d.message


def test_tags_beside_media_of_their_kind_are_an_error_and_other_kinds_a_warning(tmp_path):
    record = thread(holding(user(""), IMAGE, "<image> and <video>, <image>"), assistant("A cat."))
    found = sorted((d.severity, d.message) for d in fired(tmp_path, [record], "MMS108"))
    assert [severity for severity, _ in found] == ["error", "warning"]
    assert "`<image>` x 2 beside the thread's 1 image" in found[0][1]
    assert "`<video>` but the thread has no video" in found[1][1]


def test_tags_inside_code_and_other_tags_are_not_reported(tmp_path):
    record = thread(
        user("Embed it with `<video>` or:\n```html\n<audio>\n```\nor <img> or <images>"),
        assistant("Use `<video controls>`."),
    )
    assert fired(tmp_path, [record], "MMS108") == []


def test_a_marker_in_a_text_part_is_a_place_without_a_media(tmp_path):
    record = thread(holding(user(""), IMAGE, "and \ufffc here"), assistant("ok"))
    (d,) = findings(tmp_path, [record], "MMS1")
    assert d.code == "MMS108" and "U+FFFC" in d.message and d.message_index == 0


def test_markers_and_media_that_differ_in_a_converted_thread_are_mms108():
    detail = {
        "path": "messages[1].content",
        "kind": "value",
        "message": "holds 2 media marker(s) (U+FFFC) for 1 media",
    }
    rejection = Rejection("x.jsonl", "x.jsonl:1", "invalid_thread", "m", details=(detail,))
    ((code, finding),) = list(rejection_findings(rejection))
    assert (code, finding.message_index) == ("MMS108", 1)


# --------------------------------------------------------------------------- MMS109


def image(**source: str) -> dict[str, Any]:
    return {"type": "image", **source}


@pytest.mark.parametrize(
    ("part", "says"),
    [
        (image(path=""), "must not be empty"),
        (image(path="   "), "its path is blank"),
        (image(path="NaN"), "a missing value written as text"),
        (image(path="images/"), "names a folder"),
        (image(path="~/data/1.jpg"), "starts with `~`"),
        (image(url="https:///1.jpg"), "names no host"),
        (image(url="s3:///1.jpg"), "names no bucket"),
        (image(data="not base64!"), "is not base64"),
        (image(data="QUJD?"), "is not base64"),
        (image(data="Q"), "its length is impossible"),
        (image(data="=="), "is empty"),
    ],
)
def test_media_that_can_never_be_found_are_mms109_errors(tmp_path, part, says):
    record = thread(holding(user(""), part, "What is this?"), assistant("A cat."))
    (d,) = fired(tmp_path, [record], "MMS109")
    assert d.severity == "error" and says in d.message and d.message_index == 0


def test_an_absolute_path_is_a_warning_only_outside_the_folder_of_its_input(tmp_path):
    inside = image(path=str(tmp_path / "images" / "1.jpg"))
    outside = image(path="/elsewhere/images/1.jpg")
    windows = image(path="C:\\Users\\me\\1.jpg")
    url = image(url="file:///elsewhere/2.jpg")
    record = thread(holding(user(""), inside, outside, windows, url), assistant("ok"))
    found = fired(tmp_path, [record], "MMS109")
    assert [(d.severity, d.message.split(":")[0]) for d in found] == [
        ("warning", "image 2 of the message"),
        ("warning", "image 3 of the message"),
        ("warning", "image 4 of the message"),
    ]
    assert "'/elsewhere/images/1.jpg' is absolute and outside" in found[0].message


def test_a_llama_factory_image_that_names_nothing_is_mms109(tmp_path):
    records = [{**LLAMA_FACTORY[1], "images": [""]}]
    path = write_json(tmp_path, "empty.json", records)
    (d,) = lint_file(path, *MEDIA_CODES)
    assert (d.code, d.locator) == ("MMS109", f"{path}#0")


def test_media_the_check_quarantines_are_mms109_when_missing_and_mms107_when_broken(tmp_path):
    """`mms lint` checks media as a run does (pipeline/media): a file that is not there is
    MMS109 (missing-media), one whose bytes are no image MMS107 (invalid-media), each
    naming its record."""
    (tmp_path / "not_an_image.png").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
    records = [
        {**LLAMA_FACTORY[1], "images": ["gone.jpg"]},
        {**LLAMA_FACTORY[1], "images": ["not_an_image.png"]},
    ]
    path = write_json(tmp_path, "checked.json", records)
    result = CliRunner().invoke(main, ["lint", str(path), "--output-format", "json"])
    found = [
        (d["code"], d["locator"])
        for d in json.loads(result.output)["diagnostics"]
        if d["code"] in MEDIA_CODES
    ]
    assert found == [("MMS109", f"{path}#0"), ("MMS107", f"{path}#1")]


sources = st.sampled_from(["path", "url", "data"])
relative_paths = st.from_regex(
    r"[a-z0-9_]{1,8}(/[a-z0-9_]{1,8}){0,2}\.(jpg|png|wav|mp4)", fullmatch=True
)
urls = st.from_regex(r"https://[a-z]{1,8}\.org/[a-z0-9]{1,8}\.jpg", fullmatch=True)
payloads = st.binary(min_size=1, max_size=40).map(lambda b: base64.b64encode(b).decode())
media_items = st.one_of(
    st.builds(
        lambda k, p: Media(k, path=p), st.sampled_from(["image", "audio", "video"]), relative_paths
    ),
    st.builds(lambda k, u: Media(k, url=u), st.sampled_from(["image", "audio", "video"]), urls),
    st.builds(
        lambda k, d: Media(k, data=d), st.sampled_from(["image", "audio", "video"]), payloads
    ),
)


@st.composite
def media_threads(draw: st.DrawFn) -> Thread:
    messages = []
    for role in draw(
        st.lists(st.sampled_from(["user", "assistant", "context"]), min_size=1, max_size=5)
    ):
        media = tuple(draw(st.lists(media_items, max_size=2)))
        text = "\ufffc".join(
            draw(st.sampled_from(["", "Look ", "this"])) for _ in range(len(media) + 1)
        )
        text = text or "x"
        if role == "assistant":
            messages.append(Message.assistant(text, media=media))
        else:
            messages.append(Message(role, text, media=media))  # type: ignore[arg-type]
    return Thread(draw(st.from_regex(r"t[0-9]{1,4}", fullmatch=True)), messages)


@settings(max_examples=60, deadline=None)
@given(st.lists(media_threads(), min_size=1, max_size=4))
def test_well_formed_media_only_fire_mms106_once_per_assistant_message_holding_some(batch):
    report = lint_threads(batch, LintConfig(select=("MMS106", "MMS107", "MMS108", "MMS109")))
    expected = sorted(
        (t.id, i)
        for t in batch
        for i, m in enumerate(t.messages)
        if m.role == "assistant" and m.media
    )
    got = sorted((d.thread_id, d.message_index) for d in report.diagnostics)
    assert [d.code for d in report.diagnostics] == ["MMS106"] * len(got)
    assert got == expected


def _listed_codes(tmp_path: Path, name: str, records: list[dict[str, Any]]) -> list[str]:
    path = tmp_path / name
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    out = tmp_path / f"{name}.json"
    args = ["lint", str(path), "--output-format", "json", "-o", str(out), "--no-check-media"]
    result = CliRunner().invoke(main, [*args, "--fail-on", "never"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["summary"]["rules"] == [rule["code"] for rule in report["rules"]]
    return report["summary"]["rules"]


def test_media_rules_are_listed_as_run_only_when_the_data_holds_media(tmp_path):
    """A text-only dataset's reports list the rules they listed before the media rules
    existed (its output bytes are pinned); a dataset with media, or a media rule that fired, lists
    them."""
    text = thread(user("hi"), assistant("hello"))
    media_codes = {"MMS106", "MMS107", "MMS108", "MMS109"}
    assert media_codes.isdisjoint(_listed_codes(tmp_path, "text.jsonl", [text]))
    pictured = thread(holding(user("look"), IMAGE, "at this"), assistant("a cat"))
    assert media_codes <= set(_listed_codes(tmp_path, "media.jsonl", [text, pictured]))
    tagged = thread(user("<image> what is it?"), assistant("a cat"))
    listed = set(_listed_codes(tmp_path, "tags.jsonl", [tagged]))
    assert listed & media_codes == {"MMS108"}
