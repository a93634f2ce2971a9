"""Throwaway machines made of network namespaces, for one fabric across machines (the issue's
"test it here"): each machine is a namespace of its own with its own sshd (tests/live/machines.py's,
started inside it: every session, and so every `ccemu part`, runs in the machine's network and
mount namespace), its own state root, and one interface on the machines' network: a Linux bridge in
a controller namespace, where `ccemu` itself runs as the controller. It shows the mechanism, not the
capacity: every machine shares this machine's CPUs.

Everything made is recorded and removed by stop(): the namespaces (by the names made here, with a
random part), the sshd processes and their sessions, the folder. Nothing is made in the namespace
the tests run in.

A machine can have a clock of its own, as a real machine has (CLOCK_MONOTONIC counts from its
boot): `clock_ahead_s` puts its sshd, and so everything it starts, in a time namespace whose
CLOCK_MONOTONIC runs that many seconds ahead of this machine's (the controller's)."""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

from machines import Machines

REPO = Path(__file__).resolve().parents[3]
UNDERLAY = "100.64.250"  # /24 of the machines' network (shared address space: no one else's)
JUMBO_MTU = 9000


@dataclass
class NetnsMachines(Machines):
    underlay_mtu: int = JUMBO_MTU
    tag: str = field(default_factory=lambda: f"ccx{secrets.token_hex(3)}")
    made: list[str] = field(default_factory=list)  # namespaces made, in order
    clock_ahead_s: dict[str, int] = field(default_factory=dict)  # machine -> its CLOCK_MONOTONIC's lead

    @property
    def controller(self) -> str:
        return f"{self.tag}-ctl"

    def namespace(self, name: str) -> str:
        return f"{self.tag}-{name}"

    def address(self, name: str) -> str:
        return f"{UNDERLAY}.{self.names.index(name) + 1}"

    def in_machine(self, name: str) -> list[str]:
        ahead = self.clock_ahead_s.get(name)
        clock = ["unshare", "--time", f"--monotonic={ahead}"] if ahead else []
        return ["ip", "netns", "exec", self.namespace(name), *clock]

    def free_port(self) -> int:
        return 22  # each machine's own namespace: nobody else listens there

    def _listens(self, name: str, port: int) -> bool:
        # psutil reads the sockets of our own namespace: ask the machine's (its only sshd is ours).
        listening = subprocess.run([*self.in_machine(name), "ss", "-Hltn", f"src {self.address(name)}:{port}"],
                                   capture_output=True, text=True)
        return bool(listening.stdout.strip())

    def state_root(self, name: str) -> Path:
        return self.root / name / "state"

    def start(self) -> "NetnsMachines":
        self._make_network()
        return super().start()

    def _ip(self, *args: str, namespace: str | None = None) -> None:
        argv = ["ip", *(["-n", namespace] if namespace else []), *args]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")

    def _make_network(self) -> None:
        for namespace in [self.controller] + [self.namespace(n) for n in self.names]:
            self.made.append(namespace)
            self._ip("netns", "add", namespace)
            self._ip("link", "set", "lo", "up", namespace=namespace)
        ctl = self.controller
        self._ip("link", "add", "ul", "mtu", str(self.underlay_mtu), "type", "bridge", namespace=ctl)
        self._ip("addr", "add", f"{UNDERLAY}.254/24", "dev", "ul", namespace=ctl)
        for name in self.names:
            port = f"ul-{name}"
            self._ip("link", "add", port, "mtu", str(self.underlay_mtu), "type", "veth", "peer", "name", "ul0",
                     "mtu", str(self.underlay_mtu), "netns", self.namespace(name), namespace=ctl)
            self._ip("link", "set", port, "master", "ul", "up", namespace=ctl)
            self._ip("addr", "add", f"{self.address(name)}/24", "dev", "ul0", namespace=self.namespace(name))
            self._ip("link", "set", "ul0", "up", namespace=self.namespace(name))
        self._ip("link", "set", "ul", "up", namespace=ctl)
        (self.root / "known_hosts").touch()

    def cut(self, name: str) -> None:
        """Machine `name` disappears from the network (its cable pulled)."""
        self._ip("link", "set", "ul0", "down", namespace=self.namespace(name))

    def inventory(self, unreachable: dict[str, int] | None = None, name: str = "inventory.yml",
                  own: dict[str, dict] | None = None) -> Path:
        """`own`: variables of single machines, over the shared ones."""
        hosts = {machine: {"ansible_host": self.address(machine), "ansible_port": port,
                           "ccemu_state_root": str(self.state_root(machine)), **(own or {}).get(machine, {})}
                 for machine, port in self.ports.items()}
        path = self.root / name
        path.write_text(yaml.safe_dump({"ccemu": {"hosts": hosts, "vars": {
            "ansible_user": "root", "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_ssh_private_key_file": str(self.key), "ccemu_build_root": str(REPO),
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={self.root / 'known_hosts'} "
                                       "-o StrictHostKeyChecking=yes -o ControlPath=none",
        }}}))
        return path

    @property
    def controller_state_root(self) -> Path:
        """The controller's runs (its Prometheus, for live metrics) are recorded here, not in /run/ccemu."""
        return self.root / "controller" / "state"

    def controller_command(self, *argv: str) -> list[str]:
        """`ccemu ARGV` run on the controller (the namespace on the machines' network)."""
        return ["ip", "netns", "exec", self.controller, "env", f"CCEMU_STATE_ROOT={self.controller_state_root}",
                str(REPO / ".venv" / "bin" / "ccemu"), *argv]

    def on_machine_argv(self, name: str, *argv: str) -> list[str]:
        """What runs `ccemu ARGV` on machine `name` as its user would run it there (over ssh, as root)."""
        return self.ssh_argv(name, f"env CCEMU_STATE_ROOT={self.state_root(name)} {REPO / '.venv' / 'bin' / 'ccemu'} "
                                   f"{' '.join(argv)}")

    def ssh_argv(self, name: str, remote: str) -> list[str]:
        """What runs the shell text `remote` on machine `name` over ssh, from the controller."""
        return ["ip", "netns", "exec", self.controller, "ssh", "-T", "-o", "BatchMode=yes", "-i", str(self.key),
                "-o", f"UserKnownHostsFile={self.root / 'known_hosts'}", f"root@{self.address(name)}", remote]

    def monotonic_s(self, name: str) -> float:
        """CLOCK_MONOTONIC as a session on machine `name` reads it."""
        read = subprocess.run(self.ssh_argv(name, "python3 -c 'import time; print(time.monotonic())'"),
                              capture_output=True, text=True, timeout=60, check=True)
        return float(read.stdout)

    def on_machine(self, name: str, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.on_machine_argv(name, *argv), capture_output=True, text=True, timeout=120)

    def processes_in(self, name: str) -> list[psutil.Process]:
        """Processes in machine `name`'s network namespace, its sshd and sessions aside."""
        inode = Path(f"/run/netns/{self.namespace(name)}").stat().st_ino
        keep = {p.pid for p in self.processes()}
        found = []
        for proc in psutil.process_iter():
            try:
                if proc.pid not in keep and Path(f"/proc/{proc.pid}/ns/net").stat().st_ino == inode:
                    found.append(proc)
            except (OSError, psutil.Error):
                continue
        return found

    def stop(self) -> None:
        try:
            if self.controller in self.made and self.controller_state_root.exists():
                # A controller a failing test killed outright: what it recorded goes as `ccemu clean` removes it.
                subprocess.run(self.controller_command("clean"), capture_output=True, timeout=120)
            super().stop()
        finally:
            for namespace in reversed(self.made):
                subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
            self.made.clear()
