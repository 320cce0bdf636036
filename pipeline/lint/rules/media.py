"""MMS1xx for media (DESIGN §3 and §6): images, audio and video where the spec gives
none (an assistant message; a platform message, or a media part naming no source, which
never become threads), `<image>`-style tags that disagree with the media (LLaMA-Factory's
most reported data error) and media that can never be found. No rule reads a file nor
fetches a URL: whether a path exists is a later step's check (its own quarantine)."""

from __future__ import annotations

import ntpath
import posixpath
import re
import urllib.parse
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from pipeline.capabilities import without_code
from pipeline.lint.rule import Finding, Rule
from pipeline.lint.rules.examples import assistant, thread, user
from pipeline.lint.thread_view import ThreadView
from pipeline.mms import Media, Message

MEDIA_TAG = re.compile(r"<(image|video|audio)>")
"""The tags LLaMA-Factory, ms-swift and xtuner write where a listed media stands."""
_PART = re.compile(r"\.content\[\d+\]")
_NO_SOURCE_MESSAGES = ("not a path, URL or data",)
"""What a converter says of a listed media that names nothing (media_tags.py)."""
_MISSING_VALUES = frozenset({"nan", "none", "null", "undefined", "n/a"})
"""A missing value written as text (a table exported with pandas): never a file."""
_BASE64 = re.compile(r"[A-Za-z0-9+/_=\s-]*")
"""Base64 text, standard or URL-safe, padded or not, wrapped or not."""


# --------------------------------------------------------------------------- rejections


def rejection_code(path: str, message: str, kind: str) -> str | None:
    """The media rule of one validation problem of a record (`path`, `message`, `kind` as
    pipeline/mms/validation.py names it), or None when it is not about media: markers
    that disagree with the media (MMS108), an empty source (MMS109), a media part that
    is no media part or a list of parts on a role that holds none (MMS107)."""
    if "U+FFFC" in message and (path.endswith(".text") or "media marker" in message):
        return "MMS108"
    if _PART.search(path):
        if message == "must not be empty" and path.rsplit(".", 1)[-1] in ("path", "url", "data"):
            return "MMS109"
        return "MMS107"
    if (
        path.endswith(".content")
        and kind == "type"
        and message.startswith("expected string, got [")
    ):
        return "MMS107"  # only a platform message's content cannot be a list of parts
    return None


def rejection_text(code: str, path: str, message: str) -> str:
    """The finding's text for a validation problem `rejection_code` took."""
    if code == "MMS107" and message.startswith("expected string, got ["):
        return f"{path}: a platform message holds no media (its content is a string)"
    return f"{path or 'thread'}: {message}"


MISSING_CODES = frozenset({"media_missing", "media_outside_input", "media_unreadable"})
"""Quarantine codes of the media check (pipeline/media) that say a media cannot be had."""
INVALID_CODES = frozenset({"media_kind", "media_corrupt", "media_too_large"})
"""Quarantine codes of the media check that say a media's bytes are not usable as it."""


def rejected_code(code: str, message: str) -> str | None:
    """The media rule of a record a converter quarantined (its quarantine `code` and
    `message`), or None."""
    if code == "media_mismatch":
        return "MMS108"
    if code in MISSING_CODES:
        return "MMS109"
    if code in INVALID_CODES:
        return "MMS107"
    if code == "missing_field" and any(text in message for text in _NO_SOURCE_MESSAGES):
        return "MMS109"
    return None


# --------------------------------------------------------------------------- threads


def _counted(media: tuple[Media, ...]) -> str:
    counts = Counter(m.kind for m in media)
    return ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in counts.items())


def media_in_assistant(view: ThreadView, config: object) -> Iterator[Finding]:
    for index, message in enumerate(view.thread.messages):
        if message.role == "assistant" and message.media:
            held = _counted(message.media)
            if message.trained:
                yield Finding(
                    index,
                    f"assistant message holds {held}: the spec gives media to user and "
                    "developer messages (context for tool outputs); trained, it teaches "
                    "the model to write media it cannot produce",
                )
            else:
                yield Finding(
                    index,
                    f"assistant message holds {held} (weight 0: not trained); the spec gives "
                    "media to user and developer messages",
                    "warning",
                )


def _tags(message: Message) -> Counter[str]:
    text = message.content
    if "<" not in text or not MEDIA_TAG.search(text):
        return Counter()
    return Counter(MEDIA_TAG.findall(without_code(text)))


def media_tag_mismatch(view: ThreadView, config: object) -> Iterator[Finding]:
    tagged = [(index, tags) for index, m in enumerate(view.thread.messages) if (tags := _tags(m))]
    if not tagged:
        return
    held: Counter[str] = Counter(media.kind for m in view.thread.messages for media in m.media)
    for index, tags in tagged:
        for kind, count in tags.items():
            tag = f"`<{kind}>`" + (f" x {count}" if count > 1 else "")
            if held[kind]:
                yield Finding(
                    index,
                    f"content still holds the tag {tag} beside the thread's {held[kind]} "
                    f"{kind} media: the tag was not converted to the {kind}'s place "
                    "(the model sees both, or a media has no tag)",
                )
            else:
                yield Finding(
                    index,
                    f"content holds the tag {tag} but the thread has no {kind}: the "
                    f"record's {kind} list is missing or was dropped",
                    "warning",
                )


def _sources(message: Message) -> Iterator[tuple[str, Media]]:
    """Each source a message's media are read from, with how a finding names it: a media,
    or each frame of a video given as frames (`video 2 of the message, frame 3 of 8`)."""
    for number, media in enumerate(message.media, 1):
        where = f"{media.kind} {number} of the message" if len(message.media) > 1 else media.kind
        if not media.frames:
            yield where, media
            continue
        for frame_number, frame in enumerate(media.frames, 1):
            yield f"{where}, frame {frame_number} of {len(media.frames)}", frame


def missing_media(view: ThreadView, config: object) -> Iterator[Finding]:
    folder: str | None = None
    for index, message in enumerate(view.thread.messages):
        for where, media in _sources(message):
            if media.data is not None:
                problem = _data_problem(media.data)
                if problem:
                    yield Finding(index, f"{where}: its data {problem}; it can never be decoded")
                continue
            path = media.path
            if media.url is not None:
                path = _file_url_path(media.url)
                if path is None:
                    problem = _url_problem(media.url)
                    if problem:
                        yield Finding(index, f"{where}: its URL {problem}; it can never be fetched")
                    continue
            assert path is not None
            problem = _path_problem(path)
            if problem:
                yield Finding(index, f"{where}: its path {problem}; it can never be found")
            elif _absolute(path):
                if folder is None:
                    folder = _input_folder(view) or ""
                if not folder or not _under(path, folder):
                    yield Finding(
                        index,
                        f"{where}: its path {_short(path)} is absolute and outside the folder "
                        "of its input file: it resolves only on the machine that wrote it",
                        "warning",
                    )


def _short(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _path_problem(path: str) -> str | None:
    stripped = path.strip()
    if not stripped:
        return "is blank"
    if stripped.lower() in _MISSING_VALUES:
        return f"is {_short(path)}, a missing value written as text"
    if stripped.endswith(("/", "\\")) or posixpath.basename(stripped) in (".", ".."):
        return f"{_short(path)} names a folder, not a file"
    if stripped.startswith("~"):
        return f"{_short(path)} starts with `~`, which nothing reading a dataset expands"
    if "\x00" in path:
        return "holds a NUL character"
    return None


def _absolute(path: str) -> bool:
    return posixpath.isabs(path) or bool(ntpath.splitdrive(path)[0]) or path.startswith("\\")


def _file_url_path(url: str) -> str | None:
    """The path of a `file:` URL (None for any other URL)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme.lower() != "file":
        return None
    return urllib.parse.unquote(parsed.path) if parsed.netloc in ("", "localhost") else url


def _url_problem(url: str) -> str | None:
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme.lower() in ("http", "https") and not parsed.hostname:
        return f"{_short(url)} names no host"
    if parsed.scheme.lower() in ("s3", "gs", "gcs", "az", "abfs", "hf") and not parsed.netloc:
        return f"{_short(url)} names no bucket"
    return None


def _data_problem(data: str) -> str | None:
    """What keeps base64 text from ever decoding to a media (None: nothing)."""
    if not _BASE64.fullmatch(data):
        return "is not base64"
    digits = len("".join(data.split()).rstrip("="))
    if digits % 4 == 1:
        return "is not base64 (its length is impossible)"
    return "is empty" if digits * 3 // 4 == 0 else None


def _input_folder(view: ThreadView) -> str | None:
    """The absolute folder of the file the thread came from, when the linter knows where
    that file is (`places`) and it is a local file."""
    source = view.thread.meta.get("source")
    places: Mapping[str, str] | None = view.places
    if not places or not isinstance(source, str) or source not in places:
        return None
    place = places[source]
    if "://" in place or place.startswith("hf:"):
        return None
    return posixpath.dirname(posixpath.abspath(place))


def _under(path: str, folder: str) -> bool:
    return posixpath.normpath(path).startswith(folder.rstrip("/") + "/")


# --------------------------------------------------------------------------- rules

_IMAGE = {"type": "image", "path": "images/cat.jpg"}


def _parts(*parts: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": p} if isinstance(p, str) else p for p in parts]


def _with(message: dict[str, Any], *parts: Any) -> dict[str, Any]:
    return {**message, "content": _parts(*parts)}


RULES = [
    Rule(
        code="MMS106",
        media=True,
        name="media-in-assistant",
        severity="error",
        summary="An assistant message holds an image, audio or video.",
        rationale=(
            "The spec gives media to user and developer messages (and context messages "
            "hold them for tool outputs that return images): a model understands media, it "
            "does not write them. Converters keep an assistant's media (a generated image, "
            "a spoken answer) so that it is seen rather than lost; trained, it teaches the "
            "model to emit a media marker for something it cannot produce. Move the media "
            "to the user or context message that shows it, or give the message weight 0 "
            "(then it is a warning)."
        ),
        bad=[thread(user("Draw a cat."), _with(assistant(""), "Here it is: ", _IMAGE))],
        good=[thread(_with(user(""), _IMAGE, "What is this?"), assistant("A cat."))],
        check=media_in_assistant,
    ),
    Rule(
        code="MMS107",
        media=True,
        name="invalid-media",
        severity="error",
        scope="record",
        summary="A media part on a role that holds none, or one that names no source.",
        rationale=(
            'A media part is `{"type": KIND, SOURCE: str, "mime"}` with exactly one '
            "SOURCE of `path`, `url` or `data`, in a developer, user, context (or "
            "assistant) message; platform messages are plain text. A media part without "
            "a source, with two, or of another type (a file, a PDF) cannot become a "
            "thread, so the record is quarantined and never trained; so is a record whose "
            "media the media check read and found to be another kind than claimed, "
            "undecodable or truncated, or too large (media_kind, media_corrupt, "
            "media_too_large)."
        ),
        bad=[thread(_with(user(""), {"type": "image", "mime": "image/png"}, "What is this?"))],
        good=[thread(_with(user(""), _IMAGE, "What is this?"), assistant("A cat."))],
    ),
    Rule(
        code="MMS108",
        media=True,
        name="media-tag-mismatch",
        severity="error",
        summary="`<image>`-style tags or media markers disagree with the media.",
        rationale=(
            "LLaMA-Factory, ms-swift and xtuner mark each listed image, video or audio "
            "with a tag in the text; a record whose tags and lists differ in number (two "
            "`<image>` tags, one image: their most reported data error) is quarantined by "
            "its converter, since a media would be lost or have no place. A thread whose "
            "text still holds such tags beside its media shows the model both (an error); "
            "tags in a thread with no media of their kind mean the media list is missing "
            "or was dropped (a warning: it may be prose about HTML). In MMS JSON, a U+FFFC "
            "marker in a text part is a place without a media. Tags inside code are not "
            "reported."
        ),
        bad=[
            thread(_with(user(""), _IMAGE, "<image>What is this?"), assistant("A cat.")),
            thread(user("<image>\nWhat is this?"), assistant("A cat."), id="t2"),
        ],
        good=[
            thread(_with(user(""), _IMAGE, "What is this?"), assistant("A cat.")),
            thread(user("Which HTML tag embeds a picture?"), assistant("`<img>`."), id="t2"),
        ],
        check=media_tag_mismatch,
    ),
    Rule(
        code="MMS109",
        media=True,
        name="missing-media",
        severity="error",
        summary="A media part names a source that can never be found.",
        rationale=(
            "A path that is empty or blank, a folder, `nan` (a table's missing value), "
            "`~/...` (nothing expands it), a URL without a host, data that is not base64: "
            "the media is lost, and the model trains on text about something it never "
            "sees. An absolute path outside the folder of its input file resolves only on "
            "the machine that wrote it (a warning): write it relative to the input file. "
            "The rule reads no file; the media check of `mms lint` and `mms run` "
            "(pipeline/media) does, and a record whose media is not there, leads outside "
            "its input's folder or cannot be read is quarantined and reported here "
            "(media_missing, media_outside_input, media_unreadable)."
        ),
        bad=[
            thread(_with(user(""), {"type": "image", "path": "nan"}, "What is this?")),
            thread(_with(user(""), {"type": "image", "path": ""}, "What is this?"), id="t2"),
        ],
        good=[thread(_with(user(""), _IMAGE, "What is this?"), assistant("A cat."))],
        check=missing_media,
    ),
]
