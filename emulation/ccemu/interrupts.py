"""Ctrl-C and SIGTERM stop a ccemu program by unwinding: the signal becomes an exception, so every
`finally` and `with` runs and what was started (fabrics, daemons, containers) is torn down.

Python's own default for SIGTERM ends the process at once, running no `finally`: a benchmark or a
run stopped by `kill`, `timeout` or a container runtime left its whole fabric behind. And a second
Ctrl-C while tearing down would interrupt the teardown itself; once stopping, further signals are
said and otherwise ignored (SIGKILL still ends us; `ccemu clean` then removes what was left).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable


class Stopped(KeyboardInterrupt):
    """Raised at the first SIGINT or SIGTERM. A KeyboardInterrupt, so that code that handles
    Ctrl-C (writes what finished, passes it on to a child) handles SIGTERM the same way."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number (130 for
        SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum

    @property
    def said(self) -> str:
        return "interrupted" if self.signum == signal.SIGINT else f"stopped by {signal.Signals(self.signum).name}"


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_status(interrupt: KeyboardInterrupt) -> int:
    """A KeyboardInterrupt raised by Python itself (SIGINT's default handler) is 130."""
    return interrupt.exit_status if isinstance(interrupt, Stopped) else 128 + signal.SIGINT


def said(interrupt: KeyboardInterrupt) -> str:
    return interrupt.said if isinstance(interrupt, Stopped) else "interrupted"


def unwind_on_signals(program: str = "ccemu") -> None:
    """From now on the first SIGINT or SIGTERM raises Stopped wherever the main thread is; later
    ones print one line and are ignored, so the teardown they would cut short runs to its end.
    Also when we were started in the background of a shell (which starts us with SIGINT ignored)."""

    def already_stopping(signum, frame):
        # os.write: a print() here could re-enter the buffered writer the main thread is in.
        os.write(sys.stderr.fileno(), f"{program}: {signal.Signals(signum).name} while stopping: the teardown "
                                      "goes on (SIGKILL ends it; `ccemu clean` then removes what is left)\n".encode())

    def stop(signum, frame):
        for sig in STOP_SIGNALS:
            signal.signal(sig, already_stopping)
        raise Stopped(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, stop)


def run_script(main: Callable[[], object], program: str) -> None:
    """A script's main() (the benchmarks'), stopped by Ctrl-C or SIGTERM as ccemu is: unwinding
    through its teardown, then one line and the exit status 128 + the signal."""
    unwind_on_signals(program)
    try:
        main()
    except KeyboardInterrupt as stop:
        print(f"{program}: {said(stop)} (what was up is torn down)", file=sys.stderr)
        sys.exit(exit_status(stop))
