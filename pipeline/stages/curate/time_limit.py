"""A call that may take at most so many seconds (a curator's plugin on one thread): on the
main thread of a process (the CLI, a local worker process) a SIGALRM timer interrupts it
where it waits or runs Python code; elsewhere it runs on a thread of its own while the
caller waits, and is left behind when its time is up (the caller then stops with an
error)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from types import FrameType
from typing import TypeVar

T = TypeVar("T")


class TimedOut(BaseException):
    """The call did not return in time (not an Exception, so that the called code's own
    `except Exception` does not swallow it)."""


def call_within(seconds: float, call: Callable[[], T]) -> T:
    """What `call()` returns or raises; TimedOut once it has taken `seconds`."""
    if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
        return _with_alarm(seconds, call)
    return _on_own_thread(seconds, call)


def _time_is_up(signum: int, frame: FrameType | None) -> None:
    raise TimedOut


def _with_alarm(seconds: float, call: Callable[[], T]) -> T:
    """`call()` under a SIGALRM timer of `seconds`; the earlier handler back afterwards."""
    earlier = signal.signal(signal.SIGALRM, _time_is_up)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, earlier if earlier is not None else signal.SIG_DFL)


def _on_own_thread(seconds: float, call: Callable[[], T]) -> T:
    """`call()` on a daemon thread, waited for at most `seconds` (signals can only be
    handled on a process's main thread)."""
    result: Future[T] = Future()

    def run() -> None:
        try:
            result.set_result(call())
        except BaseException as err:  # handed to the caller as it is
            result.set_exception(err)

    threading.Thread(target=run, name="time-limited call", daemon=True).start()
    done, _ = wait([result], timeout=seconds)
    if not done:
        raise TimedOut
    return result.result()
