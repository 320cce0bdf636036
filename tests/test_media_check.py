"""Media are data, checked like data (DESIGN §3): the media a thread refers to are
read (a path inside its input file's folder, base64 data; URLs only with --fetch-media),
sniffed by their magic bytes, decoded, limited and hashed; a record with a bad one is
quarantined with the media's own code. Copy mode stores each distinct media once under
media/<sha256>.<ext>, listed in the manifest; dedup compares media by their bytes.

Every media file is made here, tiny and real: Pillow writes the images, the audio and video
are minimal containers written byte by byte."""

from __future__ import annotations

import base64
import contextlib
import io
import os
import struct
from pathlib import Path
from typing import ClassVar

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import convert
from pipeline.jobs.read import ReadSpec
from pipeline.jobs.verify import verify_output
from pipeline.media import MediaChecker, MediaProblem, MediaSettings
from pipeline.media.decode import Corrupt, check_decodes
from pipeline.media.sniff import sniff
from pipeline.mms import Media, Message, Thread
from pipeline.quarantine import ERROR_CODES
from tests.output_rows import shard_rows
from tests.test_run import run_cli, write_config


def png(color: tuple[int, int, int] = (255, 0, 0), size: tuple[int, int] = (4, 4)) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


def jpeg(color: tuple[int, int, int] = (0, 128, 0)) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (16, 16), color).save(out, "JPEG")
    return out.getvalue()


def wav(samples: int = 8) -> bytes:
    """A minimal PCM WAV: RIFF, `fmt `, `data`."""
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16)
    data = bytes(2 * samples)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def mp4() -> bytes:
    """A minimal ISO media file: an `ftyp` box and an empty `moov`."""
    ftyp = b"isom" + struct.pack(">I", 512) + b"isommp41"
    return struct.pack(">I", 8 + len(ftyp)) + b"ftyp" + ftyp + struct.pack(">I", 8) + b"moov"


def record(thread_id: str, part: dict, text: str = "What is shown?") -> dict:
    """An MMS-like record: a user message with one media part, and an answer."""
    return {
        "id": thread_id,
        "messages": [
            {"role": "user", "content": [part, {"type": "text", "text": text}]},
            {"role": "assistant", "content": "A picture."},
        ],
    }


def write_input(folder: Path, records: list[dict], name: str = "threads.jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def converted(path: Path, out: Path, **media: object) -> tuple[list[dict], list[dict]]:
    """`convert` with the media checked as `mms convert` does: (threads, rejected)."""
    chosen = MediaSettings(**media)  # type: ignore[arg-type]
    store = str(out.parent / "media") if chosen.copy else None
    spec = ReadSpec(media=chosen, media_store=store)
    result = convert([str(path)], out, spec, quarantine=out.with_suffix(".rejected.jsonl"))
    assert result.account.balanced
    rejected = out.with_suffix(".rejected.jsonl")
    lines = rejected.read_bytes().splitlines() if rejected.exists() else []
    return [orjson.loads(x) for x in out.read_bytes().splitlines()], [
        orjson.loads(x) for x in lines
    ]


# sniffing and decoding -------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "container", "kind"),
    [
        (png(), "png", "image"),
        (jpeg(), "jpeg", "image"),
        (wav(), "wav", "audio"),
        (mp4(), "mp4", "video"),
        (b"fLaC" + bytes(40), "flac", "audio"),
        (b"OggS" + bytes(40), "ogg", "audio"),
        (b"\x1a\x45\xdf\xa3" + bytes(8) + b"webm", "webm", "video"),
        (b"RIFF\x04\x00\x00\x00AVI ", "avi", "video"),
    ],
)
def test_the_kind_comes_from_the_magic_bytes(data: bytes, container: str, kind: str) -> None:
    found = sniff(data[:64])
    assert found is not None and found.container == container and kind in found.kinds


@pytest.mark.parametrize("data", [png(), jpeg(), wav(), mp4()])
def test_whole_media_decode(data: bytes) -> None:
    found = sniff(data)
    assert found is not None
    check_decodes(data, found, 10_000)


@pytest.mark.parametrize("data", [png(size=(32, 32)), jpeg(), wav(64), mp4()])
def test_a_truncated_media_is_corrupt(data: bytes) -> None:
    found = sniff(data)
    assert found is not None
    with pytest.raises(Corrupt):
        check_decodes(data[: len(data) * 2 // 3], found, 10_000)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_sniffed_and_checked_without_an_unexpected_error(data: bytes) -> None:
    found = sniff(data[:64])
    if found is not None:
        # Corrupt or TooManyPixels (a quarantine code), never another error
        with contextlib.suppress(ValueError):
            check_decodes(data, found, 10_000)


# the check of a conversion -----------------------------------------------------------


@pytest.fixture
def media_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    (folder / "img").mkdir(parents=True)
    (folder / "img" / "red.png").write_bytes(png())
    (folder / "img" / "red_again.png").write_bytes(png())
    (folder / "img" / "blue.png").write_bytes(png((0, 0, 255)))
    (folder / "img" / "photo.png").write_bytes(jpeg())  # a JPEG named .png: still an image
    (folder / "img" / "sound.png").write_bytes(wav())  # claims image, holds audio
    whole = png(size=(64, 64))
    (folder / "img" / "cut.png").write_bytes(whole[: len(whole) // 2])
    (folder / "img" / "big.png").write_bytes(png(size=(300, 300)))
    (folder / "clip.mp4").write_bytes(mp4())
    (folder / "voice.wav").write_bytes(wav())
    return folder


CASES = [
    ("good", {"type": "image", "path": "img/red.png"}, None),
    ("jpeg_named_png", {"type": "image", "path": "img/photo.png"}, None),
    ("audio", {"type": "audio", "path": "voice.wav"}, None),
    ("video", {"type": "video", "path": "clip.mp4"}, None),
    ("data", {"type": "image", "data": base64.b64encode(png()).decode()}, None),
    ("missing", {"type": "image", "path": "img/nowhere.png"}, "media_missing"),
    ("wrong_kind", {"type": "image", "path": "img/sound.png"}, "media_kind"),
    ("truncated", {"type": "image", "path": "img/cut.png"}, "media_corrupt"),
    ("huge", {"type": "image", "path": "img/big.png"}, "media_too_large"),
    ("dotdot", {"type": "image", "path": "../secret.png"}, "media_outside_input"),
    ("bad_base64", {"type": "image", "data": "not base64!"}, "media_corrupt"),
    ("bad_data", {"type": "audio", "data": base64.b64encode(b"hello").decode()}, "media_kind"),
]


def test_each_bad_media_quarantines_its_record_with_its_code(media_folder, tmp_path):
    (tmp_path / "secret.png").write_bytes(png())
    path = write_input(media_folder, [record(name, part) for name, part, _ in CASES])
    limit = len(png(size=(300, 300))) - 1
    threads, rejected = converted(path, tmp_path / "out" / "t.jsonl", max_bytes=limit)
    assert [t["id"] for t in threads] == [name for name, _, code in CASES if code is None]
    codes = {line["locator"].rsplit(":", 1)[1]: line["code"] for line in rejected}
    expected = {str(i + 1): code for i, (_, _, code) in enumerate(CASES) if code is not None}
    assert codes == expected
    for line in rejected:
        assert line["code"] in ERROR_CODES and line["stage"] == "media"
        assert line["locator"] in line["message"] and "messages[0] (user), " in line["message"]
        assert " at 0x" not in line["message"]  # no memory address in a quarantine line
    checked = threads[0]["meta"]["media_checked"]
    assert checked == [
        {
            "sha256": __import__("hashlib").sha256(png()).hexdigest(),
            "bytes": len(png()),
            "mime": "image/png",
        }
    ]
    assert threads[0]["messages"][0]["content"][0] == {"type": "image", "path": "img/red.png"}


def test_a_symlink_out_of_the_input_folder_is_refused(media_folder, tmp_path):
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(png())
    os.symlink(outside, media_folder / "img" / "link.png")
    os.symlink(media_folder / "img" / "red.png", media_folder / "img" / "inside.png")
    parts = [{"type": "image", "path": "img/link.png"}, {"type": "image", "path": "img/inside.png"}]
    path = write_input(media_folder, [record(f"t{i}", p) for i, p in enumerate(parts)])
    threads, rejected = converted(path, tmp_path / "out" / "t.jsonl")
    assert [t["id"] for t in threads] == ["t1"]
    assert [line["code"] for line in rejected] == ["media_outside_input"]


def test_a_url_is_not_fetched_by_default(media_folder, tmp_path, monkeypatch):
    import urllib.request

    def no_network(*args, **kwargs):
        raise AssertionError("the default run fetched a URL")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    parts = [
        {"type": "image", "url": "https://example.com/cat.png"},
        {"type": "image", "url": "s3://bucket/cat.png"},
    ]
    path = write_input(media_folder, [record(f"u{i}", p) for i, p in enumerate(parts)])
    threads, rejected = converted(path, tmp_path / "out" / "t.jsonl")
    assert not rejected and len(threads) == 2
    for thread in threads:
        assert thread["meta"]["media_checked"] == [None]
        assert any("fetching is off" in note for note in thread["meta"]["notes"])


def test_fetching_a_url_has_a_size_limit(tmp_path, monkeypatch):
    import urllib.request

    class Response(io.BytesIO):
        headers: ClassVar[dict[str, str]] = {}

    body = png(size=(50, 50))
    seen = {}

    def fake(request, timeout):
        seen["timeout"] = timeout
        return Response(body)

    monkeypatch.setattr(urllib.request, "urlopen", fake)
    checker = MediaChecker(MediaSettings(fetch=True, timeout=3, max_bytes=len(body) - 1))
    thread = Thread("x", [Message.user("\ufffc", [Media("image", url="https://h/x.png")])])
    with pytest.raises(MediaProblem) as caught:
        checker.check([thread], "in/t.jsonl")
    assert caught.value.code == "media_too_large" and seen["timeout"] == 3
    fits = MediaChecker(MediaSettings(fetch=True, max_bytes=len(body)))
    [checked] = fits.check([thread], "in/t.jsonl")
    assert checked.meta["media_checked"][0]["bytes"] == len(body)


def test_the_library_reads_no_media_unless_asked(media_folder, tmp_path):
    path = write_input(media_folder, [record("m", {"type": "image", "path": "img/gone.png"})])
    out = tmp_path / "out" / "t.jsonl"
    result = convert([str(path)], out)
    assert result.account.quarantined_total == 0
    assert b"media_checked" not in out.read_bytes()


def test_copy_mode_stores_each_media_once_under_its_sha(media_folder, tmp_path):
    parts = [
        {"type": "image", "path": "img/red.png"},
        {"type": "image", "path": "img/red_again.png"},
        {"type": "image", "path": "img/blue.png"},
    ]
    path = write_input(media_folder, [record(f"c{i}", p) for i, p in enumerate(parts)])
    out = tmp_path / "out" / "t.jsonl"
    threads, _ = converted(path, out, copy=True)
    stored = sorted(p.name for p in (out.parent / "media").iterdir())
    import hashlib

    expected = sorted(f"{hashlib.sha256(d).hexdigest()}.png" for d in (png(), png((0, 0, 255))))
    assert stored == expected
    paths = [t["messages"][0]["content"][0]["path"] for t in threads]
    assert paths[0] == paths[1] == f"media/{hashlib.sha256(png()).hexdigest()}.png"
    assert threads[1]["meta"]["media_checked"][0]["source"] == parts[1]


# dedup ---------------------------------------------------------------------------------


def test_dedup_compares_media_by_their_bytes(media_folder, tmp_path):
    from pipeline.dedup import content_key

    parts = [
        {"type": "image", "path": "img/red.png"},
        {"type": "image", "path": "img/red_again.png"},  # the same bytes, another name
        {"type": "image", "path": "img/blue.png"},  # the same text, other bytes
    ]
    path = write_input(media_folder, [record(f"d{i}", p) for i, p in enumerate(parts)])
    threads, _ = converted(path, tmp_path / "out" / "t.jsonl")
    keys = [content_key(Thread.from_dict(t)) for t in threads]
    assert keys[0] == keys[1] != keys[2]


# a run -----------------------------------------------------------------------------------


def _run(tmp_path: Path, folder: Path, *extra: str, media: str | None = None) -> Path:
    stages = ["lint: {fail_on: never}", "dedup: {enabled: true}"]
    if media is not None:
        stages.append(f"media: {media}")
    config = write_config(tmp_path, "media", folder / "threads.jsonl", *stages)
    out = tmp_path / "out"
    result = run_cli(str(config), "-o", str(out), "--workers", "2", *extra)
    assert result.exit_code == 0, result.output
    return out


def test_a_run_quarantines_bad_media_and_dedups_by_bytes(media_folder, tmp_path):
    records = [
        record("same_a", {"type": "image", "path": "img/red.png"}),
        record("same_b", {"type": "image", "path": "img/red_again.png"}),
        record("other", {"type": "image", "path": "img/blue.png"}),
        record("gone", {"type": "image", "path": "img/gone.png"}),
        record("cut", {"type": "image", "path": "img/cut.png"}),
        record("web", {"type": "image", "url": "https://example.com/a.png"}),
    ]
    write_input(media_folder, records)
    out = _run(tmp_path, media_folder)
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    counts = manifest["counts"]
    assert counts["balanced"] is True
    assert counts["records_quarantined"] == {"media_corrupt": 1, "media_missing": 1}
    assert counts["threads_dropped"] == {"duplicate": 1}
    assert sorted(row["id"] for row in shard_rows(out)) == ["other", "same_a", "web"]
    dropped = orjson.loads((out / "quarantine" / "dropped.jsonl").read_bytes().splitlines()[0])
    assert dropped["id"] == "same_b"
    assert not (out / "media").exists()
    assert "media" not in manifest["config"]["stages"]  # the defaults are not recorded


def test_a_run_copies_media_once_and_the_manifest_hashes_them(media_folder, tmp_path):
    import hashlib

    records = [
        record("a", {"type": "image", "path": "img/red.png"}),
        record("b", {"type": "image", "path": "img/red_again.png"}, text="Another question"),
        record("c", {"type": "audio", "path": "voice.wav"}),
    ]
    write_input(media_folder, records)
    out = _run(tmp_path, media_folder, "--copy-media")
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["config"]["stages"]["media"]["copy"] is True
    listed = {e["path"]: e for e in manifest["files"] if e["path"].startswith("media/")}
    expected = {
        f"media/{hashlib.sha256(png()).hexdigest()}.png": png(),
        f"media/{hashlib.sha256(wav()).hexdigest()}.wav": wav(),
    }
    assert set(listed) == set(expected)
    for name, data in expected.items():
        assert (out / name).read_bytes() == data
        assert listed[name]["bytes"] == len(data)
        assert listed[name]["sha256"] == hashlib.sha256(data).hexdigest()
    assert verify_output(out, render=False, template=False).passed
    (out / next(iter(expected))).write_bytes(png((1, 2, 3)))
    assert not verify_output(out, render=False, template=False).passed


@contextlib.contextmanager
def http_server(body: bytes, pause: float):
    """A local HTTP server answering every GET with `body`, `pause` seconds between its
    bytes (0: at once), on a free port; yields the base URL."""
    import http.server
    import threading
    import time

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                if not pause:
                    self.wfile.write(body)
                    return
                for byte in body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(pause)
            except OSError:  # the client gave up
                return

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_fetched_url_is_read_whole_within_the_timeout():
    """A server that sends a byte now and then (each within the socket timeout) is given up
    once the whole fetch passes --media-timeout; a prompt one is fetched and checked."""
    body = png(size=(64, 64))
    settings = MediaSettings(fetch=True, timeout=0.5)
    with http_server(body, pause=0) as url:
        thread = Thread("x", [Message.user("\ufffc", [Media("image", url=f"{url}/a.png")])])
        [checked] = MediaChecker(settings).check([thread], "in/t.jsonl")
        assert checked.meta["media_checked"][0]["bytes"] == len(body)
    with http_server(body, pause=0.05) as url:
        thread = Thread("y", [Message.user("\ufffc", [Media("image", url=f"{url}/b.png")])])
        with pytest.raises(MediaProblem) as caught:
            MediaChecker(settings).check([thread], "in/t.jsonl")
    assert caught.value.code == "media_unreadable" and "took more than 0.5 s" in caught.value.why


@pytest.mark.parametrize("check", [True, False])
def test_mms_curate_checks_media_as_convert_does(media_folder, tmp_path, check):
    from click.testing import CliRunner

    from pipeline.cli import main

    good = record("good", {"type": "image", "path": "img/red.png"})
    gone = record("gone", {"type": "image", "path": "img/gone.png"})
    path = write_input(media_folder, [good, gone])
    out = tmp_path / "out" / "curated.jsonl"
    flags = [] if check else ["--no-check-media"]
    args = ["curate", str(path), "-o", str(out), "--redact-pii", *flags]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    kept = [orjson.loads(line)["id"] for line in out.read_bytes().splitlines()]
    rejected = out.with_name("curated.rejected.jsonl")
    if check:
        assert kept == ["good"]
        [line] = rejected.read_bytes().splitlines()
        assert orjson.loads(line)["code"] == "media_missing"
    else:
        assert kept == ["good", "gone"] and not rejected.exists()


@pytest.fixture
def no_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every internet socket connection and name lookup refused, in this process and the
    workers it forks: each attempt is noted in the file this gives (empty: none) and
    raises. Local (Unix) sockets stay open: workers may talk through them."""
    import socket

    noted = tmp_path / "network-attempts.txt"
    noted.touch()

    def refuse(what: str) -> None:
        with open(noted, "a") as out:
            out.write(f"{what}\n")
        raise OSError(f"no network in this test: {what}")

    connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            refuse(f"connect {address}")
        connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setattr(socket.socket, "connect_ex", lambda self, address: refuse(str(address)))
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: refuse(f"lookup {args}"))
    return noted


URLS = [
    ("https_url", {"type": "image", "url": "https://example.com/cat.png"}),
    ("s3_url", {"type": "image", "url": "s3://bucket/cat.png"}),
]


@pytest.mark.parametrize("command", ["convert", "run"])
def test_the_commands_quarantine_bad_media_by_default_offline(
    media_folder, tmp_path, no_network, command
):
    """`mms convert` and `mms run` with their default media options: each bad media's record
    quarantined with its code (missing, wrong kind, truncated, too large, outside the
    folder, bad data), the good ones kept, URLs kept unread, and nothing touches the
    network."""
    from click.testing import CliRunner

    from pipeline.cli import main

    (tmp_path / "secret.png").write_bytes(png())
    cases = [(name, part, code) for name, part, code in CASES] + [
        (name, part, None) for name, part in URLS
    ]
    write_input(media_folder, [record(name, part) for name, part, _ in cases])
    limit = len(png(size=(300, 300))) - 1
    if command == "convert":
        out = tmp_path / "out" / "t.jsonl"
        args = ["convert", str(media_folder / "threads.jsonl"), "-o", str(out)]
        result = CliRunner().invoke(main, [*args, "--max-media-bytes", str(limit)])
        threads = [orjson.loads(x) for x in out.read_bytes().splitlines()]
        rejected = out.with_suffix(".rejected.jsonl")
    else:
        media = f"media: {{max_bytes: {limit}}}"
        stages = ("lint: {fail_on: never}", "dedup: {enabled: false}", media)  # `data` is `good`
        config = write_config(tmp_path, "media", media_folder / "threads.jsonl", *stages)
        out = tmp_path / "out"
        result = run_cli(str(config), "-o", str(out), "--workers", "2")
        threads = shard_rows(out)
        for thread in threads:
            thread["meta"] = orjson.loads(thread["meta"])
        rejected = out / "quarantine" / "rejected.jsonl"
    assert result.exit_code == 0, result.output
    lines = [orjson.loads(x) for x in rejected.read_bytes().splitlines()]
    kept = sorted(name for name, _, code in cases if code is None)
    assert sorted(t["id"] for t in threads) == kept
    codes = {line["locator"].rsplit(":", 1)[1]: line["code"] for line in lines}
    assert codes == {str(i + 1): code for i, (_, _, code) in enumerate(cases) if code is not None}
    unread = {t["id"]: t["meta"]["media_checked"] for t in threads if t["id"].endswith("_url")}
    assert unread == {"https_url": [None], "s3_url": [None]}
    assert no_network.read_text() == ""
