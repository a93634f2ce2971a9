"""Throwaway "machines" for the Ansible tests: sshd instances on 127.0.0.1, each on a port of its
own with its own host key, one client key, a known_hosts naming exactly them, and an inventory
that gives each machine its own ccemu folder (they share this machine's file system). Everything
is under one temporary folder (ssh's control sockets under a short one of their own); `stop()`
kills exactly the sshd processes started here and their sessions, and removes that folder."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

SSHD = Path("/usr/sbin/sshd")
# sshd refuses to start without its privilege separation folder (the Debian service makes it).
PRIVSEP = Path("/run/sshd")


@dataclass
class Machines:
    root: Path
    names: list[str]
    ports: dict[str, int] = field(default_factory=dict)
    sshd: dict[str, psutil.Process] = field(default_factory=dict)
    made_privsep: bool = False
    # ssh's control sockets: a short folder of their own (a socket's path must fit in 108 bytes).
    control: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ccemu-ssh-")))

    @property
    def key(self) -> Path:
        return self.root / "client_key"

    def ccemu_root(self, name: str) -> Path:
        return self.root / name / "ccemu"

    def address(self, name: str) -> str:
        """Where machine `name`'s sshd listens (and Ansible reaches it)."""
        return "127.0.0.1"

    def in_machine(self, name: str) -> list[str]:
        """The prefix that runs a command on machine `name` (here: this machine itself)."""
        return []

    # Ports held bound and not listening, so that nobody can listen on them: closed_port's.
    held: list[socket.socket] = field(default_factory=list)

    @staticmethod
    def free_port() -> int:
        """A port of 127.0.0.1 nobody listens on now (another process may take it before it is
        used: start() checks that its sshd got it)."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]

    def closed_port(self) -> int:
        """A port of 127.0.0.1 nobody listens on until stop(): held bound here, never listening, so
        connecting to it is refused (a port that was merely free could be anyone's by then)."""
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.held.append(sock)
        return sock.getsockname()[1]

    def start(self) -> "Machines":
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key)], check=True)
        (self.root / "authorized_keys").write_text((self.root / "client_key.pub").read_text())
        known = []
        if not PRIVSEP.exists():
            self.made_privsep = True
            PRIVSEP.mkdir(mode=0o755)
        for name in self.names:
            host_key = self.root / f"{name}_host_key"
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True)
            # A free port can be taken by another process before sshd binds it: then sshd exits,
            # and it is started again on another.
            for _ in range(5):
                if self._start_sshd(name, host_key, self.free_port()):
                    break
            else:
                raise RuntimeError(f"sshd of {name} could not listen: {(self.root / f'{name}.log').read_text()}")
            port = self.ports[name]  # known_hosts names port 22 plainly, any other as [host]:port
            where = self.address(name) if port == 22 else f"[{self.address(name)}]:{port}"
            known.append(f"{where} {(self.root / f'{name}_host_key.pub').read_text().strip()}")
        (self.root / "known_hosts").write_text("\n".join(known) + "\n")
        return self

    def _start_sshd(self, name: str, host_key: Path, port: int) -> bool:
        """sshd for `name` on `port`; True once it listens there itself, False if it exited."""
        config = self.root / f"{name}_sshd_config"
        config.write_text("\n".join([
            f"Port {port}", f"ListenAddress {self.address(name)}", f"HostKey {host_key}",
            # A session whose client is gone ends within 3 s (its command then sees its input end).
            "ClientAliveInterval 1", "ClientAliveCountMax 3",
            f"AuthorizedKeysFile {self.root / 'authorized_keys'}", f"PidFile {self.root / name}.pid",
            "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "UsePAM no", "StrictModes no", "Subsystem sftp internal-sftp", ""]))
        proc = subprocess.Popen([*self.in_machine(name), str(SSHD), "-D", "-e", "-f", str(config)],
                                stderr=open(self.root / f"{name}.log", "w"))
        self.sshd[name], self.ports[name] = psutil.Process(proc.pid), port
        deadline = time.monotonic() + 60  # generous: only a hang gets this far
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                del self.sshd[name], self.ports[name]
                return False
            # Listening itself: a connection to the port could reach whoever else took it.
            if self._listens(name, port):
                return True
            time.sleep(0.05)
        raise RuntimeError(f"sshd of {name} did not listen on {port}: {(self.root / f'{name}.log').read_text()}")

    def _listens(self, name: str, port: int) -> bool:
        """Whether machine `name`'s sshd itself listens on `port`."""
        return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port
                   for c in self.sshd[name].net_connections(kind="tcp4"))

    def inventory(self, unreachable: dict[str, int] | None = None, name: str = "inventory.yml") -> Path:
        """An inventory of the machines (and of `unreachable` ones: name -> a port nobody listens on)."""
        hosts = {machine: {"ansible_port": port, "ccemu_build_root": str(self.ccemu_root(machine))}
                 for machine, port in self.ports.items()}
        hosts.update({machine: {"ansible_port": port} for machine, port in (unreachable or {}).items()})
        path = self.root / name
        path.write_text(yaml.safe_dump({"ccemu": {"hosts": hosts, "vars": {
            "ansible_host": "127.0.0.1", "ansible_user": "root", "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_ssh_private_key_file": str(self.key),
            # Only these machines' keys are trusted; the control sockets stay in our folder.
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={self.root / 'known_hosts'} "
                                       "-o StrictHostKeyChecking=yes -o ControlPath=" + str(self.control / "%C"),
            "ccemu_sweep_remote_root": str(self.root / "remote"),
        }}}))
        return path

    def processes(self) -> list[psutil.Process]:
        """The sshd processes started here and their sessions, still alive."""
        alive = []
        for proc in self.sshd.values():
            try:
                alive += [proc, *proc.children(recursive=True)]
            except psutil.NoSuchProcess:
                pass
        return alive

    def stop(self) -> None:
        for sock in self.held:
            sock.close()
        self.held.clear()
        procs = self.processes()
        for proc in procs:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(procs, timeout=10)
        if self.made_privsep:
            PRIVSEP.rmdir()
            self.made_privsep = False
        shutil.rmtree(self.control, ignore_errors=True)
