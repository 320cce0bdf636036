"""Benchmark `mms convert` on a large MMS JSONL file against an orjson round-trip baseline.

Run from the repository root:

    python benchmarks/convert.py                  # 1 GiB input (a few minutes)
    python benchmarks/convert.py --size-mb 20     # smoke run
    python benchmarks/convert.py --json out.json --keep --workdir /tmp/mms-bench
    python benchmarks/convert.py --repeat 3       # best of 3 runs each
    python benchmarks/convert.py --workers 1,2,4  # convert with 1, 2 and 4 workers

Child processes, one after the other:

1. generate: writes a seeded, deterministic MMS JSONL file of about --size-mb MiB of
   varied threads (all five roles, tool calls, reasoning, multi-message turns, settings,
   unicode, no text repeated between threads) into the work directory (never the repo);
2. baseline: reads that file line by line, `orjson.loads` + `orjson.dumps` each line
   to an output file: the floor any converter pays;
3. convert: `mms convert INPUT -o OUT --from mms --quarantine Q --workers N`, once for
   each N of --workers (default 1 and 2); with N > 1 the file is read in parts of about
   8 MiB by N worker processes, and every N must write the same bytes.

Wall time comes from `time.perf_counter`, peak RSS and CPU time from `os.wait4` on the
child. Linux charges a child the RSS of its parent at spawn time (the parent's pages count
until `exec`), so this script keeps itself small: generation runs in a child too.

The exit status is 1 when convert fails, writes a different number of threads than were
generated, quarantines anything, writes other bytes with other workers, or peaks at >= 300
MiB RSS in a process (it must stream). Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import orjson
from table import print_aligned

MIB = 1024 * 1024
RSS_LIMIT_MB = 300
"""Convert must stay below this peak RSS (MiB) whatever the input size."""
DEFAULT_SIZE_MB = 1024
DEFAULT_SEED = 20261121
WRITE_CHUNK = 8 * MIB
REPO_ROOT = Path(__file__).resolve().parent.parent
CONVERT_OPTIONS = ("--from", "mms")
DEFAULT_WORKERS = "1,2"
WORK_FILES = ("input.jsonl", "baseline.jsonl", "baseline.log")


# --------------------------------------------------------------------------- text


CLUSTERS = ("br", "ch", "cl", "dr", "fl", "gr", "pl", "qu", "sh", "st", "th", "tr")
CONSONANTS = (*"bcdfghjklmnprstvwz", *CLUSTERS)
VOWELS = (*"aeiouaeio", "ai", "ea", "ou", "ie")
ACCENTED = {"a": "á", "e": "é", "i": "í", "o": "ö", "u": "ü", "n": "ñ", "c": "ç"}
GREEK = "αβγδεζηθικλμνξοπρστυφχψω"
CYRILLIC = "абвгдежзиклмнопрстуфхцчшыэюя"
HIRAGANA = (
    "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわん"
)
EMOJI = ("🙂", "🚀", "✅", "⚠️", "🔥", "📈", "🌍", "🎉", "🤔", "💡", "📦", "🧪")
ODD_WORDS = ['"quoted"', "C:\\temp\\x", "a\tb", "<tag>", "&amp;", "50%", "x=y+1", "'single'"]
VOCAB_SIZE = 65536
"""Word indices are 16-bit, drawn from `randbytes`: fast and deterministic."""

TOOLS = ("weather", "search", "calculator", "calendar", "sql", "browser", "translate", "stocks")
TOPICS = ("tool use", "coding", "math", "travel", "cooking", "finance", "health", "support")
LANGUAGES = ("python", "typescript", "rust", "sql", "bash")


def _latin_word(rng: random.Random) -> str:
    return "".join(
        rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(rng.choice((1, 2, 2, 3, 3, 4)))
    )


def _unicode_word(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return "".join(rng.choice(GREEK) for _ in range(rng.randint(3, 9)))
    if kind == 1:
        return "".join(rng.choice(CYRILLIC) for _ in range(rng.randint(3, 10)))
    if kind == 2:
        return "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(rng.randint(2, 4)))
    if kind == 3:
        return "".join(rng.choice(HIRAGANA) for _ in range(rng.randint(2, 6)))
    if kind == 4:
        return rng.choice(EMOJI)
    word = _latin_word(rng)
    return "".join(ACCENTED.get(ch, ch) if rng.random() < 0.3 else ch for ch in word)


def build_vocab(rng: random.Random, unicode_share: float) -> list[str]:
    """VOCAB_SIZE words: pseudo-Latin plus `unicode_share` non-ASCII words, some numbers,
    markup and escapes; some capitalised or carrying punctuation, so that a plain
    `" ".join` of random words reads like (odd) prose."""
    words: list[str] = []
    for _ in range(VOCAB_SIZE):
        roll = rng.random()
        if roll < unicode_share:
            word = _unicode_word(rng)
        elif roll < unicode_share + 0.005:
            word = rng.choice(ODD_WORDS)
        elif roll < unicode_share + 0.015:
            word = str(rng.randint(0, 100_000))
        else:
            word = _latin_word(rng)
        roll = rng.random()
        if roll < 0.06:
            word = word.capitalize()
        elif roll < 0.14:
            word += ","
        elif roll < 0.19:
            word += "."
        elif roll < 0.20:
            word += "?"
        words.append(word)
    return words


class Words:
    """Random words from the vocabulary, drawn a million at a time."""

    REFILL = 1 << 20

    def __init__(self, rng: random.Random, vocab: list[str]) -> None:
        self._rng = rng
        self._vocab = vocab
        self._buffer: list[str] = []
        self._pos = 0
        self.mean_len = sum(map(len, vocab)) / len(vocab) + 1

    def take(self, count: int) -> list[str]:
        if self._pos + count > len(self._buffer):
            size = max(count, self.REFILL)
            indices = array("H", self._rng.randbytes(2 * size))
            self._buffer = list(map(self._vocab.__getitem__, indices))
            self._pos = 0
        words = self._buffer[self._pos : self._pos + count]
        self._pos += count
        return words

    def text(self, chars: float) -> str:
        """About `chars` characters of words."""
        return " ".join(self.take(max(1, round(chars / self.mean_len))))


# --------------------------------------------------------------------------- threads


class ThreadFactory:
    """Builds varied, realistic MMS thread dicts; every text carries a unique reference."""

    INTERNATIONAL_SHARE = 0.2
    """Threads written mostly in Greek, Cyrillic, CJK, kana and accented words; the rest
    are mostly ASCII with a little unicode (accents, emoji, the odd foreign word)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self._latin = Words(self.rng, build_vocab(self.rng, unicode_share=0.02))
        self._international = Words(self.rng, build_vocab(self.rng, unicode_share=0.6))
        self.words = self._latin
        self._ref = 0

    # -- small pieces

    def _length(self, low: int, high: int) -> float:
        """Log-uniform: mostly short, sometimes long."""
        return math.exp(self.rng.uniform(math.log(low), math.log(high)))

    def _tag(self, thread_no: int) -> str:
        self._ref += 1
        return f"{thread_no}.{self._ref}"

    def _prose(self, thread_no: int, low: int, high: int) -> str:
        return f"{self.words.text(self._length(low, high))} (ref {self._tag(thread_no)})"

    def _code_block(self) -> str:
        rng, words = self.rng, self.words
        name = "_".join(w.strip(",.?").lower() for w in words.take(2))
        body = "\n".join(f"    {' '.join(words.take(rng.randint(2, 8)))}" for _ in range(3))
        return f"```{rng.choice(LANGUAGES)}\ndef {name}(x):\n{body}\n    return x\n```"

    def _markdown(self, thread_no: int, low: int, high: int) -> str:
        rng, words = self.rng, self.words
        parts: list[str] = []
        if rng.random() < 0.3:
            parts.append("## " + " ".join(words.take(rng.randint(2, 6))))
        budget = self._length(low, high)
        paragraphs = rng.randint(1, 4)
        parts.extend(words.text(budget / paragraphs) for _ in range(paragraphs))
        if rng.random() < 0.3:
            parts.append(
                "\n".join(f"- {words.text(rng.randint(15, 80))}" for _ in range(rng.randint(2, 5)))
            )
        if rng.random() < 0.15:
            parts.append(self._code_block())
        if rng.random() < 0.08:
            rows = [" | ".join(words.take(3)) for _ in range(rng.randint(2, 5))]
            parts.append("| a | b | c |\n|---|---|---|\n" + "\n".join(f"| {r} |" for r in rows))
        parts.append(f"(ref {self._tag(thread_no)})")
        return "\n\n".join(parts)

    # -- messages

    def _developer(self, thread_no: int, tools: Sequence[str]) -> dict[str, Any]:
        text = self._prose(thread_no, 60, 2500)
        for tool in tools:
            text += (
                f"\n\n## {tool} tool\nUse the `{tool}:json` format:\n```typescript\n"
                f"type {tool.title()}Args = {{ query: string; limit?: number }}\n```"
            )
        return {"role": "developer", "content": text}

    def _tool_call(self, thread_no: int, tool: str) -> list[dict[str, Any]]:
        rng, words = self.rng, self.words
        args = {
            "query": words.text(rng.randint(10, 120)),
            "limit": rng.randint(1, 50),
            "request_id": self._tag(thread_no),
        }
        if rng.random() < 0.5:
            result: str = orjson.dumps(
                {
                    "results": [
                        {"title": words.text(30), "snippet": words.text(self._length(20, 400))}
                        for _ in range(rng.randint(1, 5))
                    ],
                    "request_id": self._tag(thread_no),
                }
            ).decode()
        else:
            result = self._prose(thread_no, 20, 1500)
        return [
            {
                "role": "assistant",
                "format": f"{tool}:json",
                "content": orjson.dumps(args).decode(),
                "end_turn": False,
            },
            {"role": "context", "name": tool, "content": result},
        ]

    def _assistant_turn(
        self, thread_no: int, tools: Sequence[str], used: set[str]
    ) -> list[dict[str, Any]]:
        """One assistant turn: optional reasoning, tool calls and intermediate messages,
        then a final message with end_turn true."""
        rng = self.rng
        messages: list[dict[str, Any]] = []
        if rng.random() < 0.3:
            used.add("reasoning")
            messages.append(self._assistant("reasoning", self._prose(thread_no, 40, 2500), False))
        if tools and rng.random() < 0.7:
            for tool in rng.sample(list(tools), rng.randint(1, len(tools))):
                messages.extend(self._tool_call(thread_no, tool))
        if rng.random() < 0.1:
            messages.append(self._assistant("markdown", self._markdown(thread_no, 40, 800), False))
        roll = rng.random()
        if roll < 0.08:
            used.add("json")
            content = orjson.dumps(
                {"answer": self.words.text(self._length(20, 600)), "ref": self._tag(thread_no)}
            ).decode()
            messages.append(self._assistant("json", content, True))
        elif roll < 0.12:
            used.add("jsonl")
            lines = [
                orjson.dumps({"item": self.words.text(40), "ref": self._tag(thread_no)}).decode()
                for _ in range(rng.randint(2, 6))
            ]
            messages.append(self._assistant("jsonl", "\n".join(lines), True))
        else:
            messages.append(self._assistant("markdown", self._markdown(thread_no, 40, 4000), True))
        return messages

    @staticmethod
    def _assistant(fmt: str, content: str, end_turn: bool) -> dict[str, Any]:
        return {"role": "assistant", "format": fmt, "content": content, "end_turn": end_turn}

    def _settings(self, tools: Sequence[str], used: set[str]) -> dict[str, Any] | None:
        rng = self.rng
        formats: list[Any] = [
            {
                "name": f"{tool}:json",
                "halt_on_start": False,
                "halt_on_completion": True,
                "sampler": "json",
            }
            for tool in tools
        ]
        if "reasoning" in used:
            formats.append({"name": "reasoning", "halt_on_start": False})
        if "json" in used:
            formats.append({"name": "json", "sampler": "json"})
        if "jsonl" in used:
            formats.append({"name": "jsonl", "halt_on_completion": True, "sampler": "jsonl"})
        if not formats and rng.random() < 0.6:
            return None
        formats.insert(0, "markdown" if rng.random() < 0.5 else {"name": "markdown"})
        return {"formats": formats}

    def thread(self, thread_no: int) -> dict[str, Any]:
        rng = self.rng
        international = rng.random() < self.INTERNATIONAL_SHARE
        self.words = self._international if international else self._latin
        tools = rng.sample(TOOLS, rng.choice((0, 0, 0, 1, 1, 2, 3)))
        messages: list[dict[str, Any]] = []
        if rng.random() < 0.25:
            messages.append({"role": "platform", "content": self._prose(thread_no, 30, 400)})
        if tools or rng.random() < 0.7:
            messages.append(self._developer(thread_no, tools))
        if rng.random() < 0.15:
            name = rng.choice(("document", "news_article", "email", "ticket"))
            text = self._prose(thread_no, 100, 4000)
            messages.append({"role": "context", "name": name, "content": text})
        used: set[str] = set()
        no_user = rng.random() < 0.05
        for _ in range(1 if no_user else rng.choice((1, 1, 1, 2, 2, 3, 4))):
            if not no_user:
                messages.append({"role": "user", "content": self._prose(thread_no, 15, 1500)})
            if rng.random() < 0.08:
                messages.append(
                    {"role": "context", "name": None, "content": self._prose(thread_no, 30, 1500)}
                )
            messages.extend(self._assistant_turn(thread_no, tools, used))
        thread: dict[str, Any] = {"id": f"bench-{thread_no:09d}", "messages": messages}
        settings = self._settings(tools, used)
        if settings is not None or rng.random() < 0.5:
            thread["settings"] = settings
        thread["meta"] = {"topic": rng.choice(TOPICS), "difficulty": rng.randint(1, 5)}
        return thread


def generate(path: Path, size_bytes: int, seed: int) -> dict[str, int]:
    """Write threads to `path` until it holds at least `size_bytes`; return the counts."""
    factory = ThreadFactory(seed)
    threads = messages = written = 0
    chunk: list[bytes] = []
    chunk_bytes = 0
    with open(path, "wb") as out:
        while written + chunk_bytes < size_bytes:
            thread = factory.thread(threads)
            line = orjson.dumps(thread, option=orjson.OPT_APPEND_NEWLINE)
            chunk.append(line)
            chunk_bytes += len(line)
            threads += 1
            messages += len(thread["messages"])
            if chunk_bytes >= WRITE_CHUNK:
                out.write(b"".join(chunk))
                written += chunk_bytes
                chunk, chunk_bytes = [], 0
        out.write(b"".join(chunk))
        written += chunk_bytes
    return {"threads": threads, "messages": messages, "bytes": written}


# --------------------------------------------------------------------------- children


def baseline(src: Path, dst: Path) -> int:
    """The floor: parse and re-serialise every line with orjson, nothing else."""
    count = 0
    with open(src, "rb", buffering=MIB) as fin, open(dst, "wb", buffering=MIB) as fout:
        for line in fin:
            if line.strip():
                fout.write(orjson.dumps(orjson.loads(line), option=orjson.OPT_APPEND_NEWLINE))
                count += 1
    return count


@dataclass(frozen=True, slots=True)
class ChildRun:
    """One measured child process."""

    name: str
    returncode: int
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    parent_rss_mb: float
    """The parent's peak RSS at spawn: a floor on the child's reported peak (see module doc)."""
    all_seconds: tuple[float, ...] = ()
    """With --repeat: the wall time of every run (`seconds` is the fastest)."""


def run_child(name: str, argv: Sequence[str], log: Path) -> ChildRun:
    """Run `argv` with stdout+stderr to `log`; wall time, CPU time and peak RSS via wait4."""
    parent_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open(log, "wb") as log_file:
        start = time.perf_counter()
        proc = subprocess.Popen(list(argv), stdout=log_file, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped by wait4
    return ChildRun(
        name=name,
        returncode=proc.returncode,
        seconds=seconds,
        cpu_seconds=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,  # KiB on Linux
        parent_rss_mb=parent_rss,
    )


def best_of(runs: Sequence[ChildRun]) -> ChildRun:
    """The fastest run, with the worst exit status and the highest peak RSS of them all."""
    fastest = min(runs, key=lambda run: run.seconds)
    failed = [run.returncode for run in runs if run.returncode != 0]
    return replace(
        fastest,
        returncode=failed[0] if failed else 0,
        peak_rss_mb=max(run.peak_rss_mb for run in runs),
        all_seconds=tuple(round(run.seconds, 2) for run in runs),
    )


def count_lines(path: Path) -> int:
    """Newlines in `path`, read in small chunks so this process stays small."""
    count = 0
    with open(path, "rb", buffering=0) as stream:
        while block := stream.read(MIB):
            count += block.count(b"\n")
    return count


# --------------------------------------------------------------------------- report


@dataclass(frozen=True, slots=True)
class Figures:
    name: str
    threads: int
    mb: float
    seconds: float
    cpu_seconds: float
    threads_per_s: float
    mb_per_s: float
    peak_rss_mb: float
    parent_rss_mb: float
    all_seconds: tuple[float, ...]


def figures(run: ChildRun, threads: int, size_bytes: int) -> Figures:
    mb = size_bytes / MIB
    return Figures(
        name=run.name,
        threads=threads,
        mb=round(mb, 1),
        seconds=round(run.seconds, 2),
        cpu_seconds=round(run.cpu_seconds, 2),
        threads_per_s=round(threads / run.seconds),
        mb_per_s=round(mb / run.seconds, 1),
        peak_rss_mb=round(run.peak_rss_mb, 1),
        parent_rss_mb=round(run.parent_rss_mb, 1),
        all_seconds=run.all_seconds,
    )


def print_table(rows: Sequence[Figures]) -> None:
    header = ("run", "threads", "MiB", "seconds", "CPU s", "threads/s", "MiB/s", "peak RSS MiB")
    lines = [header] + [
        (
            r.name,
            f"{r.threads:,}",
            f"{r.mb:,.1f}",
            f"{r.seconds:.2f}",
            f"{r.cpu_seconds:.2f}",
            f"{r.threads_per_s:,.0f}",
            f"{r.mb_per_s:.1f}",
            f"{r.peak_rss_mb:.1f}",
        )
        for r in rows
    ]
    print_aligned(lines)


def tail(path: Path, lines: int = 20) -> str:
    text = path.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=DEFAULT_SIZE_MB, help="input MiB")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--workdir", type=Path, help="where to write (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run baseline and convert N times each, alternating; report the fastest",
    )
    parser.add_argument(
        "--workers",
        type=_worker_counts,
        default=DEFAULT_WORKERS,
        help=f"convert with each of these --workers, comma-separated (default {DEFAULT_WORKERS})",
    )
    # Internal: the child processes.
    parser.add_argument("--generate-child", nargs=1, metavar="OUT", help=argparse.SUPPRESS)
    parser.add_argument("--baseline-child", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.size_mb <= 0:
        parser.error("--repeat and --size-mb must be positive")
    return args


def _worker_counts(text: str) -> tuple[int, ...]:
    """`1,2` -> (1, 2): positive and distinct."""
    counts = tuple(int(part) for part in text.split(","))
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"expected distinct positive counts like 1,2, not {text}")
    return counts


def make_workdir(workdir: Path | None) -> tuple[Path, bool]:
    """The work directory and whether this run created it (and may delete it whole)."""
    if workdir is None:
        return Path(tempfile.mkdtemp(prefix="mms-bench-")), True
    workdir = workdir.resolve()
    if workdir == REPO_ROOT or REPO_ROOT in workdir.parents:
        sys.exit(f"--workdir must be outside the repository ({REPO_ROOT})")
    created = not workdir.exists()
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir, created


def cleanup(workdir: Path, created: bool, files: Sequence[Path]) -> None:
    if created:
        shutil.rmtree(workdir, ignore_errors=True)
        return
    for path in files:
        path.unlink(missing_ok=True)


def run_generate(script: list[str], path: Path, size_mb: float, seed: int) -> dict[str, Any]:
    argv = [*script, "--generate-child", str(path), "--size-mb", str(size_mb), "--seed", str(seed)]
    start = time.perf_counter()
    done = subprocess.run(argv, check=True, capture_output=True)
    counts: dict[str, Any] = json.loads(done.stdout)
    counts["seconds"] = round(time.perf_counter() - start, 2)
    return counts


def check(convert_run: ChildRun, expected: int, written: int, quarantined: int) -> list[str]:
    name = convert_run.name
    problems = []
    if convert_run.returncode != 0:
        problems.append(f"{name} exited with {convert_run.returncode}")
    if written != expected:
        problems.append(f"{name} wrote {written:,} threads, expected {expected:,}")
    if quarantined:
        problems.append(f"{name} quarantined {quarantined:,} records")
    if convert_run.peak_rss_mb >= RSS_LIMIT_MB:
        problems.append(
            f"{name} peaked at {convert_run.peak_rss_mb:.1f} MiB RSS "
            f"(limit {RSS_LIMIT_MB} MiB): it is not streaming"
        )
    return problems


def convert_files(workdir: Path, workers: int) -> tuple[Path, Path, Path]:
    """The output, quarantine and log of the convert run with `workers`."""
    stem = workdir / f"convert-w{workers}"
    return stem.with_suffix(".jsonl"), stem.with_suffix(".rejected.jsonl"), stem.with_suffix(".log")


def file_digest(path: Path) -> str:
    """The sha256 of a file (empty when it is missing), read in blocks."""
    if not path.exists():
        return ""
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as stream:
        while block := stream.read(MIB):
            digest.update(block)
    return digest.hexdigest()


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, for the record: the machine may be shared."""
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def benchmark(args: argparse.Namespace, workdir: Path) -> tuple[dict[str, Any], list[str]]:
    script = [sys.executable, str(Path(__file__).resolve())]
    mms = Path(sys.executable).parent / "mms"
    source = workdir / "input.jsonl"
    base_out = workdir / "baseline.jsonl"

    print(f"generating ~{args.size_mb:g} MiB of MMS threads in {source} (seed {args.seed}) ...")
    gen = run_generate(script, source, args.size_mb, args.seed)
    size = gen["bytes"]
    print(
        f"generated {gen['threads']:,} threads, {gen['messages']:,} messages, "
        f"{size / MIB:,.1f} MiB in {gen['seconds']:.1f} s"
    )

    load_before = load_average()
    print(f"load average before the runs: {load_before}")
    base_runs: list[ChildRun] = []
    conv_runs: dict[int, list[ChildRun]] = {workers: [] for workers in args.workers}
    for attempt in range(1, args.repeat + 1):
        print(f"run {attempt}/{args.repeat}: baseline (orjson loads + dumps per line) ...")
        base_argv = [*script, "--baseline-child", str(source), str(base_out)]
        base_runs.append(run_child("baseline", base_argv, workdir / "baseline.log"))
        for workers in args.workers:
            out, rejected, log = convert_files(workdir, workers)
            print(f"run {attempt}/{args.repeat}: {mms.name} convert --workers {workers} ...")
            conv_argv = [str(mms), "convert", str(source), "-o", str(out), *CONVERT_OPTIONS]
            conv_argv += ["--quarantine", str(rejected), "--workers", str(workers)]
            name = f"convert --workers {workers}"
            conv_runs[workers].append(run_child(name, conv_argv, log))
    load_after = load_average()
    base = best_of(base_runs)
    convs = {workers: best_of(runs) for workers, runs in conv_runs.items()}

    baseline_written = count_lines(base_out) if base_out.exists() else 0
    problems = []
    if base.returncode != 0 or baseline_written != gen["threads"]:
        problems.append(f"baseline exited with {base.returncode}, wrote {baseline_written:,}")
    outputs = {}
    for workers, conv in convs.items():
        out, rejected, log = convert_files(workdir, workers)
        written = count_lines(out) if out.exists() else 0
        quarantined = count_lines(rejected) if rejected.exists() else 0
        problems += check(conv, gen["threads"], written, quarantined)
        if conv.returncode != 0:
            print(tail(log), file=sys.stderr)
        outputs[workers] = {
            "threads": written,
            "quarantined": quarantined,
            "mb": round(out.stat().st_size / MIB, 1) if out.exists() else 0,
            "sha256": file_digest(out),
            "quarantine_sha256": file_digest(rejected),
        }
    if len({(output["sha256"], output["quarantine_sha256"]) for output in outputs.values()}) > 1:
        problems.append("mms convert wrote other bytes with other --workers")

    rows = [figures(base, gen["threads"], size)]
    rows += [figures(conv, gen["threads"], size) for conv in convs.values()]
    result = {
        "size_mb": round(size / MIB, 1),
        "seed": args.seed,
        "repeat": args.repeat,
        "generate": gen,
        "runs": [asdict(r) for r in rows],
        "baseline_output_threads": baseline_written,
        "convert_outputs": {str(workers): output for workers, output in outputs.items()},
        "time_ratio": {str(w): round(conv.seconds / base.seconds, 2) for w, conv in convs.items()},
        "throughput_ratio": {
            str(w): round(base.seconds / conv.seconds, 3) for w, conv in convs.items()
        },
        "load_average": {"before": load_before, "after": load_after},
        "rss_limit_mb": RSS_LIMIT_MB,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "problems": problems,
    }
    print()
    print_table(rows)
    print()
    for workers, conv in convs.items():
        print(
            f"convert --workers {workers} / baseline: "
            f"{result['time_ratio'][str(workers)]:.2f}x the time, "
            f"{result['throughput_ratio'][str(workers)]:.1%} of the throughput; "
            f"peak RSS {conv.peak_rss_mb:.1f} MiB (limit {RSS_LIMIT_MB} MiB)"
        )
    print(f"load average before the runs: {load_before}; after: {load_after}")
    return result, problems


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.generate_child:
        counts = generate(Path(args.generate_child[0]), int(args.size_mb * MIB), args.seed)
        print(json.dumps(counts))
        return 0
    if args.baseline_child:
        src, dst = args.baseline_child
        print(f"baseline wrote {baseline(Path(src), Path(dst)):,} lines")
        return 0

    workdir, created = make_workdir(args.workdir)
    files = [workdir / name for name in WORK_FILES]
    files += [path for workers in args.workers for path in convert_files(workdir, workers)]
    try:
        result, problems = benchmark(args, workdir)
    finally:
        if args.keep:
            print(f"kept the files in {workdir}")
        else:
            cleanup(workdir, created, files)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
