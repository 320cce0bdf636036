"""`mms inspect`: threads drawn message by message, their tokens with the trained ones marked
(plain text when not on a terminal, rich panels on one), and the errors a curator meets."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from rich.console import Console
from rich.panel import Panel
from rich.style import Style
from rich.text import Text
from tokenizers import Tokenizer, models, pre_tokenizers

from pipeline.cli import main
from pipeline.mms import Message, Thread
from pipeline.tokenize import Renderer, load_tokenizer
from pipeline.tokenize.inspect import TRAINED_BACKGROUNDS, rich_tokens, show, token_blocks
from tests.reading import read_all, write_records
from tests.tokenizer_fixtures import SMALL_TOKENIZERS, tokenizer_file

WEATHER = {
    "id": "weather-1",
    "messages": [
        {"role": "developer", "content": "Call `weather:json` for the weather."},
        {"role": "user", "content": "Weather in Paris?\nThanks!"},
        {
            "role": "assistant",
            "format": "weather:json",
            "content": '{"city": "Paris"}',
            "end_turn": False,
        },
        {"role": "context", "name": "weather", "content": '{"sky": "clear", "temp": 22}'},
        {"role": "assistant", "format": "markdown", "content": "Clear, 22°C.", "end_turn": True},
    ],
}
SECOND = {
    "id": "second",
    "messages": [
        {"role": "user", "content": ""},
        {"role": "assistant", "format": "markdown", "content": "ok", "end_turn": True},
    ],
}


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def threads_file(tmp_path):
    return write_records(tmp_path, WEATHER, SECOND, name="threads.jsonl")


def test_a_thread_is_drawn_message_by_message(threads_file):
    result = run("inspect", str(threads_file))
    assert result.exit_code == 0
    assert result.stdout == (
        f"thread weather-1 · 5 message(s) · from {threads_file.name}:1\n"
        "[1] developer\n"
        "  1 | Call `weather:json` for the weather.\n"
        "[2] user\n"
        "  1 | Weather in Paris?\n"
        "  2 | Thanks!\n"
        "[3] assistant · format weather:json · no end_turn\n"
        '  1 | {"city": "Paris"}\n'
        "[4] context · name weather\n"
        '  1 | {"sky": "clear", "temp": 22}\n'
        "[5] assistant · format markdown · end_turn\n"
        "  1 | Clear, 22°C.\n"
    )


PLAIN_TOKENS = {
    "real": (
        "[1] developer  (23 tokens, 0 trained)\n"
        "    <|role|> 'de' 've' 'l' 'op' 'er' <|content|> 'C' 'all' ' ' '`' 'we' 'ather' ':' "
        "'j' 's' 'on' '`' ' for' ' the' ' we' 'ather' '.'\n"
        "[2] user  (16 tokens, 0 trained)\n"
        "    <|role|> 'us' 'er' <|content|> 'W' 'e' 'ather' ' in' ' P' 'ar' 'is' '?\\n'\n"
        "    'T' 'han' 'ks' '!'\n"
        "[3] assistant · format weather:json · no end_turn  (24 tokens, 19 trained)\n"
        "    <|role|> 'ass' 'ist' 'ant' <|format|> [['we']] [['ather']] [[':']] [['j']] [['s']] "
        "[['on']] [[<|content|>]] [['{']] [['\"']] [['c']] [['ity']] [['\"']] [[':']] "
        "[[' \"']] [['P']] [['ar']] [['is']] [['\"']] [['}']]\n"
        "[4] context · name weather  (30 tokens, 1 trained)\n"
        "    [[<|role|>]] 'con' 'te' 'xt' <|name|> 'we' 'ather' <|content|> '{' '\"' 's' 'k' 'y' "
        "'\"' ':' ' \"' 'c' 'le' 'ar' '\"' ',' ' \"' 'tem' 'p' '\"' ':' ' ' '2' '2' '}'\n"
        "[5] assistant · format markdown · end_turn  (22 tokens, 17 trained)\n"
        "    <|role|> 'ass' 'ist' 'ant' <|format|> [['m']] [['ark']] [['d']] [['own']] "
        "[[<|content|>]] [['C']] [['le']] [['ar']] [[',']] [[' ']] [['2']] [['2']] [['°'{2}]] "
        "[['C']] [['.']] [[<|end_turn|>]]\n"
        "total  (115 tokens, 37 trained)\n"
    ),
    "small": (
        "[1] developer  (24 tokens, 0 trained)\n"
        "    <|role|> 'd' 'ev' 'el' 'op' 'er' <|content|> 'C' 'all' ' `' 'w' 'e' 'ath' 'er' ':' "
        "'json' '`' ' for' ' the' ' w' 'e' 'ath' 'er' '.'\n"
        "[2] user  (19 tokens, 0 trained)\n"
        "    <|role|> 'us' 'er' <|content|> 'W' 'e' 'ath' 'er' ' in' ' P' 'ar' 'is' '?' '\\n'\n"
        "    'T' 'h' 'an' 'ks' '!'\n"
        "[3] assistant · format weather:json · no end_turn  (23 tokens, 19 trained)\n"
        "    <|role|> 'as' 'sistant' <|format|> [['w']] [['e']] [['ath']] [['er']] [[':']] "
        "[['json']] [[<|content|>]] [['{']] [['\"']] [['c']] [['it']] [['y']] [['\":']] "
        "[[' \"']] [['P']] [['ar']] [['is']] [['\"']] [['}']]\n"
        "[4] context · name weather  (29 tokens, 1 trained)\n"
        "    [[<|role|>]] 'cont' 'ext' <|name|> 'w' 'e' 'ath' 'er' <|content|> '{' '\"' 's' 'k' "
        "'y' '\":' ' \"' 'c' 'le' 'ar' '\",' ' \"' 't' 'e' 'mp' '\":' ' ' '2' '2' '}'\n"
        "[5] assistant · format markdown · end_turn  (23 tokens, 19 trained)\n"
        "    <|role|> 'as' 'sistant' <|format|> [['m']] [['ar']] [['k']] [['d']] [['ow']] [['n']] "
        "[[<|content|>]] [['C']] [['le']] [['ar']] [[',']] [[' ']] [['2']] [['2']] [['°'{2}]] "
        "[['C']] [['.']] [[<|end_turn|>]]\n"
        "total  (118 tokens, 39 trained)\n"
    ),
}
"""`mms inspect --tokenizer` of WEATHER past its first two lines, with the bytelevel-plain
family's tokenizer: torchtune's test asset (../shared) or the small one trained here."""


def test_tokens_show_trained_ones_in_double_brackets(threads_file):
    tokenizer = tokenizer_file("bytelevel-plain")
    result = run("inspect", str(threads_file), "--tokenizer", str(tokenizer))
    assert result.exit_code == 0
    which = "small" if tokenizer.is_relative_to(SMALL_TOKENIZERS) else "real"
    assert result.stdout == (
        f"thread weather-1 · 5 message(s) · from {threads_file.name}:1\n"
        "tokens: [[trained]]  'prompt text'  <|special|>  'x'{N} = N tokens making one char\n"
        + PLAIN_TOKENS[which]
    )


def test_limit_shows_the_first_threads_and_id_picks_one(threads_file):
    both = run("inspect", str(threads_file), "--limit", "5").stdout
    assert both.count("thread ") == 2
    assert "\n\nthread second · 2 message(s)" in both
    assert "[1] user\n  (empty content)\n" in both
    picked = run("inspect", str(threads_file), "--id", "second").stdout
    assert picked.startswith("thread second · 2 message(s)")
    assert "weather-1" not in picked


def test_an_unknown_id_exits_2_and_lists_ids_the_file_has(threads_file):
    result = run("inspect", str(threads_file), "--id", "weather-2")
    assert result.exit_code == 2
    assert f"{threads_file}: no thread has id 'weather-2'" in result.stderr
    assert "holds 2 thread(s) with ids 'weather-1', 'second'" in result.stderr


def test_records_that_are_no_threads_are_counted_not_hidden(tmp_path):
    mixed = write_records(tmp_path, {"id": "x"}, SECOND, name="mixed.jsonl")
    shown = run("inspect", str(mixed), "--from", "mms", "--limit", "2")
    assert shown.exit_code == 0
    assert shown.stdout.startswith("thread second")
    assert "1 record(s) read could not become threads" in shown.stderr
    broken = write_records(tmp_path, {"id": "x"}, name="broken.jsonl")
    none = run("inspect", str(broken), "--from", "mms")
    assert none.exit_code == 2
    assert f"{broken}: no threads to show; 1 record(s) read could not become threads" in (
        none.stderr
    )


def test_options_that_do_not_go_together_are_usage_errors(threads_file):
    both = run("inspect", str(threads_file), "--id", "second", "--limit", "2")
    assert both.exit_code == 2
    assert "--limit applies without it" in both.stderr
    bos = run("inspect", str(threads_file), "--bos")
    assert bos.exit_code == 2
    assert "--bos applies only with --tokenizer" in bos.stderr


def test_a_tokenizer_that_cannot_load_is_a_usage_error(threads_file):
    """Llama-2's tokenizer.json as older `tokenizers` wrote it (the real one, or the small
    one of its shape) does not load: a usage error naming the file and the reason."""
    folder = tokenizer_file("sentencepiece-llama2-legacy").parent
    result = run("inspect", str(threads_file), "--tokenizer", str(folder))
    assert result.exit_code == 2
    assert f"{folder.name}/tokenizer.json" in result.stderr
    assert "Merges text file invalid" in result.stderr


def test_any_input_format_is_normalized_first(tmp_path):
    record = {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Yo"}]}
    source = write_records(tmp_path, record, name="chat.jsonl")
    result = run("inspect", str(source), "--from", "sharegpt")
    assert result.exit_code == 0
    assert "[1] user\n  1 | Hi\n[2] assistant · format markdown · end_turn\n  1 | Yo\n" in (
        result.stdout
    )


def test_help_teaches_with_examples():
    text = run("inspect", "--help").output
    assert "mms inspect out/threads.jsonl --id" in text
    assert "--tokenizer tokenizers/llama3" in text
    assert "[['Hello']]" in text


def test_blocks_count_every_token_of_real_threads(data):
    """Phi-3 spells CJK characters in byte tokens: grouped per character, they still add
    up to the renderer's counts and decode to the same text (real Chinese tool-call threads,
    tests/data's copy; the real Phi-3 tokenizer, or the small one of its family)."""
    threads, _, _ = read_all(data / "realdata" / "llamafactory" / "glaive_toolcall_zh_demo.json")
    renderer = Renderer(load_tokenizer(tokenizer_file("sentencepiece-phi3").parent), bos=True)
    grouped = 0
    for thread in threads[:30]:
        encoded = renderer.encode(thread)
        blocks = token_blocks(renderer, thread)
        tokens = [token for block in blocks for token in block.tokens]
        assert sum(b.num_tokens for b in blocks) == encoded.num_tokens
        assert sum(b.num_trained for b in blocks) == encoded.num_trained
        decoded = renderer.tokenizer.decode(encoded.input_ids, skip_special_tokens=False)
        assert "".join(token.text for token in tokens) == decoded
        grouped += sum(token.count > 1 for token in tokens)
    assert grouped, "no character was spelled in several byte tokens"


def word_renderer() -> Renderer:
    words = ["[UNK]", "user", "assistant", "markdown", "Hi", "there"]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, "[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return Renderer(tokenizer)


def test_on_a_terminal_trained_tokens_are_highlighted():
    renderer = word_renderer()
    thread = Thread("t", [Message.user("Hi there"), Message.assistant("Hi", end_turn=False)])
    panels = [r for r in rich_tokens(thread, token_blocks(renderer, thread)).renderables]
    bodies = [p.renderable for p in panels if isinstance(p, Panel)]
    assert all(isinstance(body, Text) for body in bodies)
    highlighted = [
        body.plain[span.start : span.end]
        for body in bodies
        for span in body.spans
        if str(span.style).endswith(TRAINED_BACKGROUNDS)
    ]
    assert highlighted == [" markdown", "<|content|>", " Hi", "<|role|>"]
    console = Console(force_terminal=True, record=True, width=100)
    show(console, [thread], renderer)
    assert "halt" in console.export_text()


def test_every_token_sets_its_own_colours_so_light_terminals_read_it():
    """No token is drawn in the terminal's default colour on a fixed background: that is
    dark on dark grey on a light-themed terminal."""
    renderer = word_renderer()
    thread = Thread("t", [Message.user("Hi there"), Message.assistant("Hi", end_turn=False)])
    panels = [r for r in rich_tokens(thread, token_blocks(renderer, thread)).renderables]
    bodies = [p.renderable for p in panels if isinstance(p, Panel)]
    styles = [Style.parse(str(span.style)) for body in bodies for span in body.spans]
    assert styles and all(style.bgcolor is not None for style in styles)
    assert all(style.color is not None for style in styles)


def _shard_of_a_run(tmp_path):
    from tests.conftest import REPO

    out = tmp_path / "out"
    config = REPO / "configs" / "quickstart.yaml"
    assert CliRunner().invoke(main, ["run", str(config), "-o", str(out)]).exit_code == 0
    return sorted((out / "data").glob("train-*.parquet"))[0]


def test_a_shard_shows_its_stored_tokens_not_tokens_rendered_again(tmp_path):
    """Inspecting a shard draws what it stores (with the output's own tokenizer): a label
    changed in the file shows as changed, and --triples lists (offset, id, label, token)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shard = _shard_of_a_run(tmp_path)
    table = pq.read_table(shard)
    row_id = table["id"][0].as_py()
    labels = table["labels"].to_pylist()
    offset = next(i for i, label in enumerate(labels[0]) if label != -100)
    labels[0][offset] = -100
    column = pa.array(labels, pa.list_(pa.int32()))
    pq.write_table(
        table.set_column(table.schema.get_field_index("labels"), "labels", column), shard
    )

    result = CliRunner().invoke(main, ["inspect", str(shard), "--id", row_id, "--triples"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:2] == [f"# {row_id}", "offset\tid\tlabel\ttoken"]
    stored_ids = table["input_ids"][0].as_py()
    shown = [line.split("\t") for line in lines[2:]]
    assert [int(cells[1]) for cells in shown] == stored_ids
    assert int(shown[offset][2]) == -100
    drawn = CliRunner().invoke(main, ["inspect", str(shard), "--id", row_id])
    assert drawn.exit_code == 0 and "stored in the shard" in drawn.output
    missing = CliRunner().invoke(main, ["inspect", str(shard), "--id", "no-such-row"])
    assert missing.exit_code == 2 and "no row has id" in missing.output
