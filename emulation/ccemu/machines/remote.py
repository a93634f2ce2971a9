"""A host on another machine, as the experiment runners use a host of this one: `popen_transport`
starts its cchost there (machines/part.py's "spawn", the block's work folder mirrored:
machines/mirror.py) and returns a process object with what the runners use of subprocess.Popen
(poll, wait, terminate, kill, returncode, stdin's write/flush/close), each a request to the
machine's part."""

from __future__ import annotations

import base64
import signal
import subprocess
import time
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING

from .mirror import shipped

if TYPE_CHECKING:
    from .fabric import SplitFabric

WAIT_POLL_S = 0.05
# How old an exit status may be when a runner polls: under a poll period (experiments/base.py
# POLL_S, 0.05 s), so that every poll after a collect reads that collect's.
POLL_FRESH_S = 0.04
_ids = count(1)


class RemoteStdin:
    def __init__(self, process: "RemoteProcess"):
        self.process = process
        self.closed = False

    def write(self, data: bytes) -> None:
        """Sent without waiting for the part (one-way): a round's flows for 127 senders were 127
        round trips, which a round's start delay must cover. A cchost that no longer reads its
        input has ended, which the runner's next poll sees."""
        self.process.fabric.tell(self.process.machine, {"op": "write", "id": self.process.id,
                                                        "data": base64.b64encode(data).decode()})

    def flush(self) -> None:
        """Every write went out whole."""

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.process.ask({"op": "close_stdin", "id": self.process.id})


class RemoteProcess:
    def __init__(self, fabric: "SplitFabric", machine: str, host: str, pid: int, has_stdin: bool, id: int):
        self.fabric, self.machine, self.host, self.pid, self.id = fabric, machine, host, pid, id
        self.returncode: int | None = None
        self.stdin = RemoteStdin(self) if has_stdin else None

    def ask(self, request: dict) -> dict:
        return self.fabric.ask_one(self.machine, request)

    def poll(self) -> int | None:
        """As the fabric's last collect saw it, if that is at most POLL_FRESH_S old (a runner polls
        every process after each collect: one request per machine, not one per process)."""
        if self.returncode is None:
            self.returncode = self.fabric.returncode(self.id, POLL_FRESH_S)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"{self.host}'s cchost", timeout)
            time.sleep(WAIT_POLL_S)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            self.ask({"op": "signal", "id": self.id, "signum": int(signum)})

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class RemoteHost:
    def __init__(self, fabric: "SplitFabric", name: str, machine: str, ip: str):
        self.fabric, self.name, self.machine, self.ip = fabric, name, machine, ip

    def IP(self) -> str:  # noqa: N802 (Mininet's name)
        return self.ip

    @property
    def transport_binary(self) -> Path:
        """A stand-in: the machine runs its own build's cchost (machines/part.py spawn)."""
        return Path("cchost")

    def popen_transport(self, argv: list[str], stdin=subprocess.DEVNULL, stdout=None, stderr=None) -> RemoteProcess:
        """cchost on the host's machine; `stdout` is an open file of the block's work folder (the
        runners' <host>.log): the machine writes the output there in its mirror, and it comes back
        with the records (SplitFabric.collect)."""
        root = self.fabric.workroot
        log = str(Path(stdout.name).resolve())
        id = next(_ids)
        argv = list(argv)
        if "--epoch-ns" in argv:  # the block's epoch on this machine's clock, as on its machine's
            at = argv.index("--epoch-ns") + 1
            argv[at] = str(int(argv[at]) + self.fabric.clock_offsets_ns[self.machine])
        reply = self.fabric.ask_one(self.machine, {
            "op": "spawn", "id": id, "host": self.name, "argv": argv, "stdin": stdin == subprocess.PIPE,
            "log": log, "root": str(root), "files": shipped(list(argv), root)})
        return RemoteProcess(self.fabric, self.machine, self.name, reply["pid"], stdin == subprocess.PIPE, id)
