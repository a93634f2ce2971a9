"""The controller's channel to one machine's part (machines/part.py): `ccemu part` started on the
machine as Ansible reaches it (ssh with the inventory's host, port, user, key and ssh arguments;
a machine with `ansible_connection: local` runs it here), one JSON line per request and reply.

A machine that disappears (powered off, its network cut, its part or sshd killed) is noticed
within MachineLost's bound: ssh's own keep-alive ends a session whose machine stopped answering
after SERVER_ALIVE_S x SERVER_ALIVE_COUNT, and a reply not come in REPLY_TIMEOUT_S is one too.
The ssh processes are this process's children, in their own session (so that Ctrl-C reaches the
controller alone, which then stops each part in order).
"""

from __future__ import annotations

import json
import os
import selectors
import shlex
import subprocess
import tempfile
import time
from collections.abc import Iterable

from ..fabric.tunnels import AcrossMachinesError
from ..logs import ended_saying
from ..sweeps.machines import Machine

SERVER_ALIVE_S = 1
SERVER_ALIVE_COUNT = 3
DEFAULT_ROOT = "/opt/ccemu"  # roles/ccemu_build's ccemu_build_root default


class MachineLost(RuntimeError):
    """A machine's part stopped answering (one line naming it)."""


def _truthy(value: object) -> bool:
    """An Ansible boolean as the inventory gives it (true, "yes", "1", ...)."""
    return value is True or str(value).strip().lower() in ("true", "yes", "on", "1")


def becomes_root(machine: Machine) -> bool:
    """Whether ccemu runs as root on `machine` through sudo (`ansible_become`, as Ansible does);
    AcrossMachinesError (one line) if it would run there as anyone but root: its part builds
    namespaces, devices and bpf programs."""
    own = machine.vars
    if machine.address == "local":  # this ccemu, which runs as root
        return False
    if _truthy(own.get("ansible_become", False)):
        if str(own.get("ansible_become_user", "root")) != "root":
            raise AcrossMachinesError(f"machine {machine.name}: ccemu runs there as root; its ansible_become_user is "
                                      f"{str(own['ansible_become_user'])[:40]!r}: drop it")
        if str(own.get("ansible_become_method", "sudo")) != "sudo":
            raise AcrossMachinesError(f"machine {machine.name}: ccemu becomes root with sudo only; its "
                                      f"ansible_become_method is {str(own['ansible_become_method'])[:40]!r}")
        return True
    user = own.get("ansible_user")
    if user is not None and str(user) != "root":
        raise AcrossMachinesError(f"machine {machine.name}: ccemu runs there as root, and ansible_user is "
                                  f"{str(user)[:40]!r}: log in as root, or set ansible_become: true (passwordless "
                                  "sudo for that user)")
    return False


def ccemu_on(machine: Machine, *args: str) -> list[str]:
    """The argv that runs `ccemu ARGS` on `machine` (its ccemu_build_root's, with its
    ccemu_state_root), through ssh unless it is this one, under `sudo -n` where the inventory
    says ansible_become (becomes_root: one line for a user ccemu cannot run as)."""
    own = machine.vars
    ccemu = f"{own.get('ccemu_build_root', DEFAULT_ROOT)}/.venv/bin/ccemu"
    # sudo -n: a password prompt would wait on the channel forever; without one sudo fails in a line.
    remote = ["sudo", "-n", "--"] if becomes_root(machine) else []
    remote += ["env", f"CCEMU_STATE_ROOT={own['ccemu_state_root']}"] if own.get("ccemu_state_root") else []
    remote += [ccemu, *args]
    if machine.address == "local":
        return remote
    host, _, port = machine.address.rpartition(":")
    argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", f"ServerAliveInterval={SERVER_ALIVE_S}",
            "-o", f"ServerAliveCountMax={SERVER_ALIVE_COUNT}", "-o", "ConnectTimeout=10", "-p", port]
    if own.get("ansible_ssh_private_key_file"):
        argv += ["-i", str(own["ansible_ssh_private_key_file"])]
    argv += shlex.split(str(own.get("ansible_ssh_common_args", "")))
    user = own.get("ansible_user")
    # `--` before the destination: one starting with '-' (-oProxyCommand=...) would be an option
    # of ssh's, and ssh takes options after the destination too unless `--` ended them.
    return argv + ["--", f"{user}@{host}" if user else host, shlex.join(remote)]


class Session:
    """One machine's part, started; ask() sends requests and reads their replies."""

    def __init__(self, machine: Machine, *options: str):
        """`options`: more of `ccemu part`'s (--reader STATE_DIR)."""
        self.machine = machine
        # What ssh and the part say on stderr, quoted when the machine is lost: a file with no name,
        # so that a controller killed outright leaves no file behind.
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(ccemu_on(machine, "part", "--machine", machine.name, *options),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     start_new_session=True)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self._buffer = b""

    def send(self, request: dict) -> None:
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self.lost("while sending it a request") from None

    def reply_line(self) -> bytes | None:
        """A whole reply line if one has arrived (b"" once the channel ended), else None."""
        if b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            return line
        try:
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
        except BlockingIOError:
            return None
        if not chunk:
            return b""
        self._buffer += chunk
        return self.reply_line()

    def lost(self, when: str) -> MachineLost:
        try:
            self.proc.wait(2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.seek(0)
        lines = [line.strip() for line in self.log.read().decode(errors="replace").splitlines() if line.strip()]
        # Its last line: ssh's word on the connection, or the part's on why it ended.
        how = ended_saying(self.proc.returncode, lines[-1][-300:] if lines else "")
        return MachineLost(f"machine {self.machine.name} ({self.machine.address}) stopped answering {when}: "
                           f"its part (ccemu part over ssh) {how}")

    def close(self, timeout: float) -> None:
        """Wait for the part to end: it was told "down", or now its input ends, and a reply it may
        still be writing fails (both make it tear down)."""
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def ask(sessions: Iterable[Session], requests: dict[str, dict], timeout: float) -> dict[str, dict]:
    """Send each machine its request (all first, so that they work at once), then wait up to
    `timeout` s for every reply. A machine that does not answer in time, or whose channel ended,
    is MachineLost; a reply saying {"error"} is returned as it is (the caller decides)."""
    by_name = {s.machine.name: s for s in sessions if s.machine.name in requests}
    for session in by_name.values():  # before any request goes out: none is left without its reply read
        if session.proc.poll() is not None:
            raise session.lost(f"before {requests[session.machine.name]['op']!r}")
    for name, session in by_name.items():
        session.send(requests[name])
    replies: dict[str, dict] = {}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        for session in by_name.values():
            selector.register(session.proc.stdout, selectors.EVENT_READ, session)
        while len(replies) < len(by_name):
            for name, session in by_name.items():
                if name not in replies and (line := session.reply_line()) is not None:
                    if line == b"":
                        raise session.lost(f"during {requests[name]['op']!r}")
                    replies[name] = json.loads(line)
                    selector.unregister(session.proc.stdout)  # its end of channel must not wake us again
            left = deadline - time.monotonic()
            if len(replies) < len(by_name):
                if left <= 0:
                    late = next(s for n, s in by_name.items() if n not in replies)
                    late.proc.kill()
                    raise late.lost(f"within {timeout:g} s of {requests[late.machine.name]['op']!r}")
                selector.select(left)
    return replies
