"""Adversarial values cost nothing but themselves: an integer beyond 64
bits anywhere in a record is kept exact, as text with a note, by `mms convert`, `mms run`
and `mms lint` alike; a YAML file nested tens of thousands of levels deep is refused as
`too_deep` once the allowed depth is passed, never read to its end."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
import yaml.scanner
from click.testing import CliRunner

from pipeline.cli import main

LONG = 2**70
DIGITS = str(LONG)  # 1180591620717411303424
NOTE = "integer(s) beyond 64 bits as text"

YAML_SHAPES = {
    "glm.yaml": (
        f"history:\n  - user: Weather in Oslo?\n  - assistant:\n      content: Sunny\n"
        f"      tokens: {LONG}\n"
    ),
    "sk.yaml": (
        "template_format: semantic-kernel\ntemplate: Tell me a story.\n"
        f"execution_settings:\n  default:\n    seed: {LONG}\n"
    ),
    "script.ai.yaml": f"---\nname: demo\nseed: {LONG}\n---\nuser: hey\nassistant: hello there\n",
    "openai.yaml": (
        "messages:\n  - role: user\n    content: hi\n  - role: assistant\n    content: hello\n"
        f"seed: {LONG}\n"
    ),
}
"""A GLM history, Semantic Kernel `execution_settings`, PPE front matter and an
OpenAI-shaped record, each with 2**70 in it."""


def _write_shapes(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in YAML_SHAPES.items():
        (folder / name).write_text(text)
        paths.append(folder / name)
    return paths


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@pytest.mark.parametrize("name", sorted(YAML_SHAPES))
def test_a_yaml_integer_beyond_64_bits_is_converted_exactly_as_text(tmp_path, name):
    (path,) = [p for p in _write_shapes(tmp_path / "in") if p.name == name]
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["convert", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "internal error" not in result.output
    (thread,) = _lines(out)
    assert f'"{DIGITS}"' in out.read_text()  # the exact digits, as a string
    assert any(NOTE in note for note in thread["meta"]["notes"])
    assert not (tmp_path / "out.rejected.jsonl").exists()


def test_one_file_with_a_long_integer_never_stops_the_others(tmp_path):
    paths = _write_shapes(tmp_path / "in")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["convert", *map(str, paths), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert len(_lines(out)) == len(YAML_SHAPES)
    lint = CliRunner().invoke(main, ["lint", *map(str, paths)])
    assert lint.exit_code == 0, lint.output
    assert "MMS105" not in lint.output  # nothing unreadable


def test_a_run_keeps_long_integers_exact_in_the_shards(tmp_path):
    folder = tmp_path / "in"
    _write_shapes(folder)
    (folder / "extra.jsonl").write_text(
        '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", '
        f'"content": "yo"}}], "meta": {{"n": {2**64}}}}}\n'
    )
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: long-integers\ninputs:\n  - path: {folder}\noutput: {tmp_path / 'out'}\n"
        "stages:\n  lint: {fail_on: never}\n"
    )
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 0, result.output
    (shard,) = (tmp_path / "out" / "data").glob("*.parquet")
    metas = pq.read_table(shard).column("meta").to_pylist()
    assert len(metas) == len(YAML_SHAPES) + 1
    assert sum(f'"{DIGITS}"' in meta for meta in metas) == len(YAML_SHAPES)
    assert sum(f'"{2**64}"' in meta for meta in metas) == 1
    assert all(NOTE in meta for meta in metas)


def test_a_json_integer_beyond_64_bits_in_an_extra_key_keeps_its_digits(tmp_path):
    source = tmp_path / "in.jsonl"
    big, small, largest = 2**64, -(2**63) - 1, 2**64 - 1
    source.write_text(
        '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", '
        f'"content": "yo"}}], "meta": {{"n": {big}, "m": {small}, "ok": {largest}}}, '
        f'"huge": {10**400}}}\n'
    )
    document = tmp_path / "in.json"
    document.write_text(f"[{source.read_text().strip()}]")
    for path in (source, document):
        out = tmp_path / f"{path.suffix[1:]}.jsonl"
        result = CliRunner().invoke(main, ["convert", str(path), "-o", str(out)])
        assert result.exit_code == 0, result.output
        (thread,) = _lines(out)
        extra = thread["meta"]["extra_fields"]
        assert extra["meta"] == {"n": str(big), "m": str(small), "ok": largest}
        assert extra["huge"] == str(10**400)
        assert any("kept 3 " + NOTE in note for note in thread["meta"]["notes"])


def test_a_yaml_flow_sequence_nested_50000_deep_is_refused_without_reading_it(
    tmp_path, monkeypatch
):
    """The refusal reads only about as far as the allowed depth: the YAML scanner fetches a
    bounded number of tokens, not one per level of the file (200,000 here)."""
    fetched = [0]
    fetch = yaml.scanner.Scanner.fetch_more_tokens

    def counted(scanner):
        fetched[0] += 1
        assert fetched[0] < 10_000, "the YAML was read far past the depth allowed"
        return fetch(scanner)

    monkeypatch.setattr(yaml.scanner.Scanner, "fetch_more_tokens", counted)
    source = tmp_path / "deep.yaml"
    source.write_text("[" * 50_000 + "]" * 50_000 + "\n")
    good = tmp_path / "good.yaml"
    good.write_text(YAML_SHAPES["openai.yaml"].replace(f"seed: {LONG}", "seed: 1"))
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["convert", str(source), str(good), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert len(_lines(out)) == 1
    (rejection,) = _lines(tmp_path / "out.rejected.jsonl")
    assert rejection["code"] == "too_deep", rejection["message"]
    assert "more than 129 levels deep" in rejection["message"]
