"""The `mms-v0` renderer's inverse (DESIGN §4), for serving: what a model generated after the
generation prompt `<|role|>assistant<|format|>`, as ids or text, back to MMS assistant
messages, how the output stopped, and its tool calls.

A completion is what the renderer trains after that prompt:

    {format}<|content|>{content}<|end_turn|>              the turn ended
    {format}<|content|>{content}<|role|>                  a halt: a tool result or other
                                                          message comes next (end_turn false)
    {format}<|content|>{content}<|role|>assistant<|format|>{format}<|content|>...
                                                          the model went on with another
                                                          assistant message (a continuation)

Ids are exact: the text between two MMS tokens is decoded on its own, as the renderer encoded
it (without special-token matching), so content that spells `<|role|>` stays content. Text
cannot tell a special token from content that spells it: every literal `<|role|>` ... in
text is read as the token. Parse ids whenever you have them."""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pipeline.mms import Message
from pipeline.tokenize.special import CONTENT, END_TURN, FORMAT, MMS_SPECIAL_TOKENS, ROLE

StopKind = Literal["end_turn", "halt"]
"""How a completion stopped: `end_turn` (the assistant ended its turn: `<|end_turn|>`) or
`halt` (`<|role|>` after a message with end_turn false: the server runs the tool, or adds
whatever message comes next, and generates again)."""

_SPECIAL_TEXT = re.compile("|".join(map(re.escape, MMS_SPECIAL_TOKENS)))
_ASSISTANT = "assistant"


class CompletionParseError(ValueError):
    """A completion that is not what mms-v0 trains a model to write. `expected` and `found`
    say what, `position` where (a token index for ids, a character offset for text, counted
    from the start of the completion); `parsed` holds the messages complete before it."""

    def __init__(
        self,
        expected: str,
        found: str,
        position: int,
        unit: Literal["token", "character"],
        parsed: Sequence[Message] = (),
    ):
        self.expected = expected
        self.found = found
        self.position = position
        self.unit = unit
        self.parsed = tuple(parsed)
        super().__init__(
            f"malformed completion: expected {expected}, got {found} at {unit} {position}"
        )


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call: an assistant message of format `name:json`, its arguments parsed."""

    name: str
    arguments: Any
    format: str


@dataclass(frozen=True, slots=True)
class PartialMessage:
    """The message a completion was writing when it ended without a stop (`partial=True`):
    `format` is None while the header after a halt is written, `content` None while the
    format is (what a server watching for `halt_on_start` formats checks)."""

    format: str | None
    content: str | None


@dataclass(frozen=True)
class Completion:
    """A parsed completion: its assistant messages (all but the last with end_turn false),
    and how it stopped. `stop` is None only for a completion parsed with `partial=True` that
    ended before a stop token (`max_new_tokens`, or a stream read so far); `unfinished` is
    then the message being written, if one had started."""

    messages: tuple[Message, ...]
    stop: StopKind | None
    unfinished: PartialMessage | None = None

    @property
    def ended_turn(self) -> bool:
        """The assistant ended its turn (`<|end_turn|>`): the user speaks next."""
        return self.stop == "end_turn"

    @property
    def halted(self) -> bool:
        """The assistant halted (`<|role|>`): a tool result (context message) comes next."""
        return self.stop == "halt"

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The calls among the messages: every message whose format is `name:json`
        (CompletionParseError when its content is not JSON)."""
        return [tool_call(m) for m in self.messages if is_json_tool_call(m.format or "")]


def is_json_tool_call(format: str) -> bool:
    """Whether `format` names a tool call with JSON arguments: `name:json` (DESIGN §5)."""
    name, colon, language = format.rpartition(":")
    return bool(colon and name and language == "json")


def tool_call(message: Message) -> ToolCall:
    """The tool call an assistant message of format `name:json` makes: the tool's name and
    its arguments, parsed; CompletionParseError when the format is no `name:json` tool call
    or the content is not JSON."""
    fmt = message.format or ""
    if message.role != "assistant" or not is_json_tool_call(fmt):
        what = (
            f"an assistant message of format {fmt!r}"
            if message.role == "assistant"
            else (f"a {message.role} message")
        )
        raise CompletionParseError(
            "a tool call (an assistant message of format `name:json`)", what, 0, "character"
        )
    try:
        arguments = json.loads(message.content)
    except json.JSONDecodeError as err:
        raise CompletionParseError(
            f"JSON arguments for the tool call {fmt!r}",
            f"{message.content[:60]!r} ({err.msg})",
            err.pos,
            "character",
        ) from None
    return ToolCall(name=fmt.rpartition(":")[0], arguments=arguments, format=fmt)


# ---------------------------------------------------------------------- the tokenizer side


class _Vocabulary:
    """What parsing ids needs of a tokenizer: the MMS token ids, the ids no completion may
    hold (the base's special tokens: content that spells one is encoded as text), the pad id
    (stripped after the stop: a batch pads finished rows) and a decoder of text pieces.
    Takes a 🤗 Transformers tokenizer, a `tokenizers.Tokenizer` or a Renderer."""

    def __init__(self, tokenizer: Any):
        inner = getattr(tokenizer, "tokenizer", None)  # a Renderer: its augmented tokenizer
        if inner is not None and hasattr(tokenizer, "special_ids"):
            tokenizer = inner
        if hasattr(tokenizer, "convert_tokens_to_ids"):  # transformers
            added = dict(tokenizer.added_tokens_decoder)
            special = {n for n, t in added.items() if t.special} | set(tokenizer.all_special_ids)
            special.discard(tokenizer.unk_token_id)  # text the vocabulary lacks: decoded as is
            pad = tokenizer.pad_token_id
            self.size = len(tokenizer)
            self._decode = _decoder(tokenizer.decode, clean_up_tokenization_spaces=False)
        elif hasattr(tokenizer, "get_added_tokens_decoder"):  # tokenizers
            added = tokenizer.get_added_tokens_decoder()
            special = {n for n, t in added.items() if t.special}
            pad = tokenizer.padding["pad_id"] if tokenizer.padding else None
            self.size = tokenizer.get_vocab_size(with_added_tokens=True)
            self._decode = _decoder(tokenizer.decode)
        else:
            raise TypeError(
                f"parsing ids needs a tokenizer (transformers, `tokenizers` or a Renderer), "
                f"not {type(tokenizer).__name__}"
            )
        by_content = {t.content: n for n, t in added.items()}
        missing = [token for token in MMS_SPECIAL_TOKENS if token not in by_content]
        if missing:
            raise ValueError(
                f"the tokenizer has no {', '.join(missing)}: parse with the tokenizer the "
                "output ships (OUT/tokenizer), which has the MMS tokens"
            )
        self.mms = {by_content[token]: token for token in MMS_SPECIAL_TOKENS}
        self.stray = {n: added[n].content if n in added else f"id {n}" for n in special}
        for number in self.mms:
            self.stray.pop(number, None)
        if pad is None:  # the pad the output names (tokenizer_config.json), when it is added
            pad = next((n for n, t in added.items() if t.content == "<|pad|>"), None)
        self.pad = pad

    def decode(self, ids: list[int]) -> str:
        return self._decode(ids)


def _decoder(decode: Any, **options: Any) -> Callable[[list[int]], str]:
    """`decode` keeping every token (special or not) and every space as encoded."""

    def decoded(ids: list[int]) -> str:
        text: str = decode(ids, skip_special_tokens=False, **options)
        return text

    return decoded


_Item = tuple[str | None, str, int]
"""One piece of a completion: (MMS token or None for text, the text, where it starts)."""


class CompletionParser:
    """Parses completions with one tokenizer (its special ids looked up once); see
    `parse_completion`. `tokenizer` is None for text only."""

    def __init__(self, tokenizer: Any = None):
        self._vocabulary = _Vocabulary(tokenizer) if tokenizer is not None else None

    def parse(
        self,
        output: str | Sequence[int] | Any,
        *,
        prompt_ended_with_format: bool = True,
        partial: bool = False,
    ) -> Completion:
        unit: Literal["token", "character"]
        if isinstance(output, str):
            items, unit, end = _text_items(output), "character", len(output)
        else:
            if self._vocabulary is None:
                raise TypeError("parsing ids needs the tokenizer: CompletionParser(tokenizer)")
            ids = _as_ids(output)
            items, end = self._id_items(ids), len(ids)
            unit = "token"
        return _Grammar(items, unit, end, partial).completion(prompt_ended_with_format)

    def opens_with_role(self, ids: Sequence[int]) -> bool:
        """Whether `ids` start with `<|role|>` (a header, not a format)."""
        vocabulary = self._vocabulary
        return bool(ids) and vocabulary is not None and vocabulary.mms.get(ids[0]) == ROLE

    def _id_items(self, ids: list[int]) -> list[_Item]:
        vocabulary = self._vocabulary
        assert vocabulary is not None
        while ids and vocabulary.pad is not None and ids[-1] == vocabulary.pad:
            ids = ids[:-1]  # a batch pads the rows that stopped first
        items: list[_Item] = []
        start = 0
        for at, number in enumerate([*ids, None]):
            token = vocabulary.mms.get(number) if number is not None else None
            if number is not None and token is None:
                if not 0 <= number < vocabulary.size:
                    raise CompletionParseError(
                        "an id of the tokenizer",
                        f"id {number} (the vocabulary has {vocabulary.size})",
                        at,
                        "token",
                    )
                if number in vocabulary.stray or number == vocabulary.pad:
                    name = vocabulary.stray.get(number, "the pad token")
                    raise CompletionParseError(
                        "text or an MMS token",
                        f"the special token {name} (id {number}), which mms-v0 never renders",
                        at,
                        "token",
                    )
                continue
            if at > start:
                items.append((None, vocabulary.decode(ids[start:at]), start))
            if token is not None:
                items.append((token, token, at))
            start = at + 1
        return items


def parse_completion(
    output: str | Sequence[int] | Any,
    tokenizer: Any = None,
    *,
    prompt_ended_with_format: bool = True,
    partial: bool = False,
) -> Completion:
    """The assistant messages a model generated, and how it stopped.

    `output`: the generated ids (a list, or a 1-D array/tensor: only what was generated,
    not the prompt; pad ids after the stop are ignored), which need `tokenizer` (the
    output's `OUT/tokenizer` loaded by transformers, a `tokenizers.Tokenizer` or a
    Renderer); or the generated text, decoded with the special tokens kept (ambiguous when
    content spells an MMS token: see the module's docstring).

    `prompt_ended_with_format`: the prompt ended with `<|role|>assistant<|format|>` (the chat
    template's generation prompt, after a halt too), so the output starts with the format.
    False: it starts with a whole header `<|role|>assistant<|format|>`.

    `partial`: an output that ends before `<|end_turn|>` or `<|role|>` (cut by
    `max_new_tokens`, or a stream so far) gives its complete messages, `stop` None and the
    unfinished message; without it, that is a CompletionParseError like any malformed
    output (a missing `<|content|>`, an empty format, a stray special token, another role
    than assistant after a halt, anything after `<|end_turn|>` ...)."""
    return CompletionParser(tokenizer if not isinstance(output, str) else None).parse(
        output, prompt_ended_with_format=prompt_ended_with_format, partial=partial
    )


def _as_ids(output: Any) -> list[int]:
    """A flat list of ints from a list, tuple, numpy array or torch tensor of one sequence."""
    ids = output.tolist() if hasattr(output, "tolist") else list(output)
    try:
        return [operator.index(n) for n in ids]
    except TypeError:
        raise TypeError(
            "expected the ids of one sequence (a flat list of ints; for a batch, parse each "
            "row: output[i, prompt_length:])"
        ) from None


def _text_items(text: str) -> list[_Item]:
    items: list[_Item] = []
    start = 0
    for match in _SPECIAL_TEXT.finditer(text):
        if match.start() > start:
            items.append((None, text[start : match.start()], start))
        items.append((match.group(), match.group(), match.start()))
        start = match.end()
    if start < len(text):
        items.append((None, text[start:], start))
    return items


def _described(item: _Item) -> str:
    token, text, _ = item
    if token is not None:
        return token
    shown = text if len(text) <= 40 else text[:37] + "..."
    return f"text {shown!r}"


class _Grammar:
    """The completion grammar over pieces, one message after another."""

    def __init__(
        self, items: list[_Item], unit: Literal["token", "character"], end: int, partial: bool
    ):
        self.items = items
        self.unit = unit
        self.end = end
        self.partial = partial
        self.at = 0
        self.messages: list[Message] = []

    def completion(self, prompt_ended_with_format: bool) -> Completion:
        if not prompt_ended_with_format:
            cut = self._header(after_halt=False)
            if cut is not None:
                return cut
        while True:
            fmt = self._text()
            if self._peek() is None:
                return self._cut(PartialMessage(fmt, None))
            if not fmt:
                raise self._error("the format's name (an assistant message opens with it)")
            self._expect(CONTENT, f"<|content|> after the format {fmt!r}")
            content = self._text()
            token = self._peek()
            if token is None:
                return self._cut(PartialMessage(fmt, content))
            if token[0] == END_TURN:
                self.at += 1
                self.messages.append(Message.assistant(content, format=fmt, end_turn=True))
                if self._peek() is not None:
                    raise self._error("the end of the completion after <|end_turn|>")
                return Completion(tuple(self.messages), "end_turn")
            if token[0] != ROLE:
                raise self._error("<|end_turn|> (turn ended) or <|role|> (halt) after the content")
            self.at += 1
            self.messages.append(Message.assistant(content, format=fmt, end_turn=False))
            if self._peek() is None:
                return Completion(tuple(self.messages), "halt")
            cut = self._header(after_halt=True)
            if cut is not None:
                return cut

    def _header(self, *, after_halt: bool) -> Completion | None:
        """`[<|role|>]assistant<|format|>`; a Completion when the output ends inside it."""
        if not after_halt:
            if self._peek() is None:
                return self._cut(PartialMessage(None, None))
            self._expect(ROLE, "a header <|role|>assistant<|format|>")
        where = "after a halt, a completion goes on only with another assistant message:"
        role_at = self.at
        role = self._text()
        if self._peek() is None and _ASSISTANT.startswith(role):
            return self._cut(PartialMessage(None, None))
        if role != _ASSISTANT:
            self.at = role_at
            raise self._error(f"{where} role 'assistant' after <|role|>")
        self._expect(FORMAT, f"{where} <|format|> after <|role|>assistant")
        return None

    # ------------------------------------------------------------ pieces

    def _peek(self) -> _Item | None:
        return self.items[self.at] if self.at < len(self.items) else None

    def _text(self) -> str:
        item = self._peek()
        if item is not None and item[0] is None:
            self.at += 1
            return item[1]
        return ""

    def _expect(self, token: str, expected: str) -> None:
        item = self._peek()
        if item is None or item[0] != token:
            raise self._error(expected)
        self.at += 1

    def _cut(self, unfinished: PartialMessage) -> Completion:
        if not self.partial:
            if not self.items:
                raise self._error("a completion (the format's name first)")
            raise self._error(
                "<|end_turn|> or <|role|>",
                "the end of the output (cut short: max_new_tokens? partial=True reads it so far)",
            )
        return Completion(tuple(self.messages), None, unfinished)

    def _error(self, expected: str, found: str | None = None) -> CompletionParseError:
        item = self._peek()
        if found is None:
            found = _described(item) if item is not None else "the end of the completion"
        position = item[2] if item is not None else self.end
        return CompletionParseError(expected, found, position, self.unit, self.messages)


def parse_spans(
    input_ids: Sequence[int], labels: Sequence[int], tokenizer: Any, *, ignore: int = -100
) -> Iterable[Completion]:
    """Each trained span of a row (a run of labels != `ignore`) parsed as the completion the
    model learns to write there (`partial=True`: a span before an assistant message its source
    weighted 0 ends without the halt, which is not trained). A span that opens with
    `<|role|>` (after such a message) is parsed with its header."""
    parser = CompletionParser(tokenizer)
    return [
        parser.parse(span, prompt_ended_with_format=not parser.opens_with_role(span), partial=True)
        for span in trained_spans(input_ids, labels, ignore=ignore)
    ]


def trained_spans(
    input_ids: Sequence[int], labels: Sequence[int], *, ignore: int = -100
) -> list[list[int]]:
    """The ids of each run of trained positions (labels != `ignore`), in order."""
    spans: list[list[int]] = []
    start = None
    for at, label in enumerate([*labels, ignore]):
        if label != ignore and start is None:
            start = at
        elif label == ignore and start is not None:
            spans.append(list(input_ids[start:at]))
            start = None
    return spans
