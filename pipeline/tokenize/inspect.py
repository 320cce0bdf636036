"""`mms inspect`: threads drawn the way the MMS spec draws them (one block per message: role,
context name, assistant format, numbered content lines, end_turn), and with a tokenizer the
tokens the model sees, trained ones marked, so a curator sees exactly what is learned.

On a terminal the blocks are rich panels in colors per role; otherwise plain text that
survives a pipe to a file: token text repr-escaped (`'Hello'`, `' world'`, `'\\n'`), special
tokens bare (`<|role|>`), trained tokens in double brackets (`[['Hello']]`)."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

from pipeline.mms import Message, Thread, shown_content
from pipeline.tokenize.renderer import IGNORE, EncodedThread, Renderer
from pipeline.wording import visible

ROLE_STYLES = {
    "platform": "magenta",
    "developer": "yellow",
    "user": "cyan",
    "assistant": "green",
    "context": "blue",
}
SHOWN_IDS = 5
"""How many of the input's ids an unknown --id error lists."""
TRAINED_BACKGROUNDS = ("on green4", "on dark_green")
PROMPT_BACKGROUNDS = ("on grey19", "on grey27")
"""Neighbouring tokens alternate between two backgrounds so their boundaries show."""
TRAINED_TEXT = "bold grey100"
PROMPT_TEXT = "grey93"
SPECIAL_TEXT = "bold magenta1"
"""Every token has its foreground and background set, so it reads the same on a dark or a
light terminal (the terminal's own default colour is never drawn on these backgrounds)."""
PLAIN_LEGEND = "tokens: [[trained]]  'prompt text'  <|special|>  'x'{N} = N tokens making one char"


class ThreadNotFoundError(LookupError):
    """No thread has the id asked for; the message lists some ids the input does have."""


def pick_threads(
    threads: Iterable[Thread], thread_id: str | None = None, limit: int = 1
) -> list[Thread]:
    """The first thread whose id is `thread_id`, or (without an id) the first `limit` threads;
    reading stops as soon as they are found."""
    if thread_id is None:
        return list(itertools.islice(threads, limit))
    seen: list[str] = []
    count = 0
    for thread in threads:
        if thread.id == thread_id:
            return [thread]
        count += 1
        if len(seen) < SHOWN_IDS:
            seen.append(thread.id)
    if not count:
        raise ThreadNotFoundError(f"no thread has id {thread_id!r}: the input holds no threads")
    more = ", ..." if count > len(seen) else ""
    raise ThreadNotFoundError(
        f"no thread has id {thread_id!r}; the input holds {count:,} thread(s) with ids "
        f"{', '.join(repr(i) for i in seen)}{more}"
    )


# --------------------------------------------------------------------------- tokens


@dataclass(frozen=True, slots=True)
class ShownToken:
    """One token as shown; `count` > 1 when byte tokens only together make a character."""

    text: str
    count: int
    trained: bool
    special: bool


@dataclass(frozen=True, slots=True)
class TokenBlock:
    """The tokens of one message, or of the BOS before the messages (`message` None,
    `label` "bos") or the halt signal after them (`label` "halt")."""

    label: str
    message: Message | None
    tokens: tuple[ShownToken, ...]

    @property
    def num_tokens(self) -> int:
        return sum(token.count for token in self.tokens)

    @property
    def num_trained(self) -> int:
        return sum(token.count for token in self.tokens if token.trained)


def stored_encoding(
    renderer: Renderer, thread: Thread, input_ids: Sequence[int], labels: Sequence[int]
) -> EncodedThread:
    """A shard row's stored tokens as an EncodedThread: each message starts at its
    `<|role|>` (content never holds a special id), so its ends are the next message's start,
    and the last one's the halting `<|role|>` after it, if any, else the end."""
    roles = [i for i, token in enumerate(input_ids) if token == renderer.special_ids.role]
    count = len(thread.messages)
    ends = [*roles[1:count], roles[count] if len(roles) > count else len(input_ids)]
    return EncodedThread(list(input_ids), list(labels), ends if count else [])


def read_stored(
    path: str, thread_id: str | None, limit: int
) -> list[tuple[Thread, list[int], list[int]]]:
    """Rows of a tokenized Parquet shard as (thread, stored input_ids, stored labels):
    the row `thread_id`, or the first `limit` rows."""
    import pyarrow.parquet as pq

    from pipeline.mms import normalize_thread_dict

    found = []
    seen: list[str] = []
    for batch in pq.ParquetFile(path).iter_batches(
        batch_size=256, columns=["id", "messages", "input_ids", "labels"]
    ):
        for row in batch.to_pylist():
            if thread_id is None or row["id"] == thread_id:
                thread = Thread.from_dict(
                    normalize_thread_dict({"id": row["id"], "messages": row["messages"]})
                )
                found.append((thread, row["input_ids"], row["labels"]))
                if thread_id is not None or len(found) == limit:
                    return found
            elif len(seen) < SHOWN_IDS:
                seen.append(row["id"])
    if thread_id is not None:
        more = ", ..." if seen else ""
        raise ThreadNotFoundError(
            f"no row has id {thread_id!r}; the shard's first ids are "
            f"{', '.join(repr(i) for i in seen)}{more}"
        )
    return found


def token_triples(renderer: Renderer, encoded: EncodedThread) -> str:
    """One line per token: offset, id, label and the token as the vocabulary spells it
    (repr-escaped), like a trainer's preprocessing debug dump."""
    token = renderer.tokenizer.id_to_token
    lines = ["offset\tid\tlabel\ttoken"]
    for offset, (token_id, label) in enumerate(zip(encoded.input_ids, encoded.labels, strict=True)):
        lines.append(f"{offset}\t{token_id}\t{label}\t{token(token_id)!r}")
    return "\n".join(lines) + "\n"


def token_blocks(
    renderer: Renderer, thread: Thread, encoded: EncodedThread | None = None
) -> list[TokenBlock]:
    """The thread's tokens per message: `encoded` (stored tokens) when given, else as
    `renderer` encodes them for training."""
    encoded = encoded if encoded is not None else renderer.encode(thread)
    ids = encoded.input_ids
    special_ids = {
        number
        for number, added in renderer.tokenizer.get_added_tokens_decoder().items()
        if added.special
    }
    first = ids.index(renderer.special_ids.role) if thread.messages else len(ids)
    edges = [0, first, *encoded.message_ends, len(ids)]  # block k spans edges[k]:edges[k + 1]
    grouped: list[list[ShownToken]] = [[] for _ in range(len(edges) - 1)]
    for last, token in _shown_tokens(renderer.tokenizer, ids, encoded.labels, special_ids):
        grouped[bisect.bisect_right(edges, last) - 1].append(token)
    blocks = [TokenBlock("bos", None, tuple(grouped[0]))] if grouped[0] else []
    blocks += [
        TokenBlock(_title(index, message), message, tuple(grouped[index + 1]))
        for index, message in enumerate(thread.messages)
    ]
    if grouped[-1] and thread.messages:
        blocks.append(TokenBlock("halt", None, tuple(grouped[-1])))
    return blocks


def _shown_tokens(
    tokenizer: Tokenizer, ids: Sequence[int], labels: Sequence[int], special_ids: set[int]
) -> list[tuple[int, ShownToken]]:
    """(offset of the last token, shown token) for each character-complete run of tokens,
    decoded as one stream so each token shows the text it adds (leading spaces included);
    a special token shows as its vocabulary entry."""
    stream = DecodeStream(skip_special_tokens=False)
    shown: list[tuple[int, ShownToken]] = []
    start = 0
    for offset, token_id in enumerate(ids):
        text = stream.step(tokenizer, token_id)
        if text is None and offset + 1 < len(ids):
            continue  # a byte of a character that the next tokens complete
        group = range(start, offset + 1)
        special = len(group) == 1 and token_id in special_ids
        if special:
            text = tokenizer.id_to_token(token_id)
        elif text is None:  # bytes at the very end that never made a character
            text = tokenizer.decode(list(ids[start:]), skip_special_tokens=False)
        assert text is not None  # a special id is one of the tokenizer's added tokens
        trained = all(labels[i] != IGNORE for i in group)
        shown.append((offset, ShownToken(text, len(group), trained, special)))
        start = offset + 1
    return shown


# --------------------------------------------------------------------------- text


def _title(index: int, message: Message) -> str:
    """`[3] assistant · format json · end_turn`: the message's place, role and fields."""
    parts = [f"[{index + 1}] {message.role}"]
    if message.role == "context" and message.name:
        parts.append(f"name {visible(message.name)}")
    if message.role == "assistant":
        parts.append(f"format {visible(message.format or 'markdown')}")
        parts.append("end_turn" if message.end_turn else "no end_turn")
    return " · ".join(parts)


def _header(thread: Thread) -> str:
    where = thread.meta.get("locator") or thread.meta.get("source")
    parts = [f"thread {visible(thread.id)}", f"{len(thread.messages)} message(s)"]
    if where:
        parts.append(f"from {visible(where)}")
    if thread.settings is not None:
        parts.append("formats " + ", ".join(visible(f.name) for f in thread.settings.formats))
    return " · ".join(parts)


def plain_thread(thread: Thread) -> str:
    """The thread as text: a title line per message, then its numbered content lines (their
    control characters escaped, as in the id, the source and the names: `visible`)."""
    lines = [_header(thread)]
    for index, message in enumerate(thread.messages):
        lines.append(_title(index, message))
        content = shown_content(message).split("\n") if message.content else []
        width = len(str(len(content)))
        lines += [f"  {n:>{width}} | {visible(line)}" for n, line in enumerate(content, 1)]
        if not content:
            lines.append("  (empty content)")
    return "\n".join(lines) + "\n"


def _plain_token(token: ShownToken) -> str:
    text = token.text if token.special else repr(token.text)
    if token.count > 1:
        text += f"{{{token.count}}}"
    return f"[[{text}]]" if token.trained else text


def _counts(tokens: int, trained: int) -> str:
    return f"{tokens:,} token{'s' if tokens != 1 else ''}, {trained:,} trained"


def plain_tokens(thread: Thread, blocks: Sequence[TokenBlock]) -> str:
    """The tokens as text, one block per message; a token line ends after each newline."""
    lines = [_header(thread), PLAIN_LEGEND]
    for block in blocks:
        lines.append(f"{block.label}  ({_counts(block.num_tokens, block.num_trained)})")
        current: list[str] = []
        for token in block.tokens:
            current.append(_plain_token(token))
            if "\n" in token.text and not token.special:
                lines.append("    " + " ".join(current))
                current = []
        if current:
            lines.append("    " + " ".join(current))
    total = _counts(sum(b.num_tokens for b in blocks), sum(b.num_trained for b in blocks))
    lines.append(f"total  ({total})")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- rich


def _panel(
    title: str, message: Message | None, body: RenderableType, subtitle: str | None = None
) -> Panel:
    style = ROLE_STYLES.get(message.role, "white") if message else SPECIAL_TEXT
    return Panel(
        body,
        title=Text(title, style=f"bold {style}"),
        title_align="left",
        subtitle=subtitle,
        subtitle_align="right",
        border_style=style,
    )


def rich_thread(thread: Thread) -> RenderableType:
    """The thread as panels, one per message, content lines numbered as in the spec."""
    panels: list[RenderableType] = [Text(_header(thread), style="bold")]
    for index, message in enumerate(thread.messages):
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="dim", justify="right")
        grid.add_column()
        lines = shown_content(message).split("\n") if message.content else []
        for number, line in enumerate(lines, 1):
            grid.add_row(str(number), Text(visible(line)))
        if not lines:
            grid.add_row("", Text("(empty content)", style="dim italic"))
        panels.append(_panel(_title(index, message), message, grid))
    return Group(*panels)


def _rich_token(token: ShownToken, parity: int) -> Text:
    text = token.text if token.special else repr(token.text)[1:-1]
    if token.count > 1:
        text += f"{{{token.count}}}"
    background = (TRAINED_BACKGROUNDS if token.trained else PROMPT_BACKGROUNDS)[parity]
    color = SPECIAL_TEXT if token.special else TRAINED_TEXT if token.trained else PROMPT_TEXT
    return Text(text, style=f"{color} {background}")


def rich_tokens(thread: Thread, blocks: Sequence[TokenBlock]) -> RenderableType:
    """The tokens as panels, trained ones on green, special tokens in magenta."""
    legend = Text.assemble(
        "tokens: ",
        ("trained", f"{TRAINED_TEXT} {TRAINED_BACKGROUNDS[0]}"),
        " ",
        ("prompt", f"{PROMPT_TEXT} {PROMPT_BACKGROUNDS[0]}"),
        " ",
        ("<|special|>", f"{SPECIAL_TEXT} {PROMPT_BACKGROUNDS[0]}"),
    )
    panels: list[RenderableType] = [Text(_header(thread), style="bold"), legend]
    for block in blocks:
        body = Text()
        for parity, token in enumerate(block.tokens):
            body.append_text(_rich_token(token, parity % 2))
            if "\n" in token.text and not token.special:
                body.append("\n")
        counts = _counts(block.num_tokens, block.num_trained)
        panels.append(_panel(block.label, block.message, body, subtitle=counts))
    total = _counts(sum(b.num_tokens for b in blocks), sum(b.num_trained for b in blocks))
    panels.append(Text(f"total: {total}", style="bold"))
    return Group(*panels)


# --------------------------------------------------------------------------- output


def show(
    console: Console,
    threads: Iterable[Thread],
    renderer: Renderer | None = None,
    stored: dict[str, EncodedThread] | None = None,
) -> None:
    """Print each thread (its tokens when a renderer is given, the `stored` ones of its id
    when there are): rich panels on a terminal, plain text written as is otherwise."""
    for number, thread in enumerate(threads):
        encoded = (stored or {}).get(thread.id)
        blocks = token_blocks(renderer, thread, encoded) if renderer is not None else None
        if console.is_terminal:
            console.print(rich_thread(thread) if blocks is None else rich_tokens(thread, blocks))
            continue
        text = plain_thread(thread) if blocks is None else plain_tokens(thread, blocks)
        console.file.write(("\n" if number else "") + text)
