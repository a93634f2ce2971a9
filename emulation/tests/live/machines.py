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

    @staticmethod
    def free_port() -> int:
        """A port of 127.0.0.1 nobody listens on (now)."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]

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
            port = self.ports[name] = self.free_port()
            known.append(f"[127.0.0.1]:{port} {(self.root / f'{name}_host_key.pub').read_text().strip()}")
            config = self.root / f"{name}_sshd_config"
            config.write_text("\n".join([
                f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {host_key}",
                f"AuthorizedKeysFile {self.root / 'authorized_keys'}", f"PidFile {self.root / name}.pid",
                "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
                "UsePAM no", "StrictModes no", "Subsystem sftp internal-sftp", ""]))
            proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stderr=open(self.root / f"{name}.log",
                                                                                           "w"))
            self.sshd[name] = psutil.Process(proc.pid)
        (self.root / "known_hosts").write_text("\n".join(known) + "\n")
        for name, port in self.ports.items():
            self._wait_listening(name, port)
        return self

    def _wait_listening(self, name: str, port: int) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"sshd of {name} did not listen on {port}: {(self.root / f'{name}.log').read_text()}")

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
