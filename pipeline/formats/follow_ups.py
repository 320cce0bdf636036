"""Multi-turn benchmark prompts (MT-Bench, BFCL multi-turn): the thread ends at the first
turn's prompt, and the later turns wait in `meta.follow_ups`.

Each later turn of such a benchmark is written against the model's answer to the turn
before ("Rewrite your previous response ..."), so it cannot be part of the prompt: two
user messages in a row would ask for one answer to both, and a thread per turn prefix
would hold turn 2 without the answer it refers to. A curator generating answers (for
distillation, or to run the benchmark) answers the thread, appends the answer and the
first follow-up, answers again, and so on, as FastChat's `gen_model_answer` and BFCL's
multi-turn runner do. Each follow-up is the list of MMS messages (`{role, content}`) to
append; BFCL's empty turns (where withheld functions arrive) stay as empty lists, so
turn numbers keep matching the source.
"""

from __future__ import annotations

from pipeline.formats.builder import ThreadBuilder

FOLLOW_UPS = "follow_ups"
"""The meta key of the later turns."""


def keep_follow_ups(builder: ThreadBuilder, turns: list[list[dict[str, str]]], where: str) -> None:
    """Keep the turns after the first in `meta.follow_ups`, noting why they are not messages."""
    if not turns:
        return
    builder.meta[FOLLOW_UPS] = turns
    builder.note(
        f"{where} holds {len(turns)} later turn(s), each written against the answer to the "
        "turn before; kept in meta.follow_ups, to append one by one after generating each answer"
    )
