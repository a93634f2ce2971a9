"""The fabric's nodes that execute: hosts and the OVS instances' namespaces, each anchored by a
shell recorded in the run's inventory before it runs. (Switches are bridges of an OVS instance:
fabric/net.py's FabricSwitch; Docker hosts: containers/host.py.)"""

from __future__ import annotations

import os
import pty
import select
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from mininet.node import Host, Node, Switch

from ..programs.cchost import cchost_binary
from .inventory import SHELL_OF, Inventory
from .lifecycle import FabricError

if TYPE_CHECKING:
    from .ovs import OvsInstance


# Mininet's shell prompt: a shell is ready once it has printed it.
PROMPT = chr(127)
# What Mininet's startShell runs in a new shell once it is ready.
SHELL_SETTINGS = "unset HISTFILE; stty -echo; set +m"


class RecordedShell:
    """A Mininet node whose shell, the process that creates and holds its namespace, is recorded
    in the run's inventory (params["inventory"]) before it runs (Inventory.spawn).

    With params["defer_prompt"], the node is made without waiting for its shell: FabricNet makes
    a thousand nodes, each shell starting while the next is made, then waits for them all
    (start_shells). Mininet's startShell does both in one call, one node after another."""

    def _popen(self, cmd, **params):
        inventory: Inventory | None = self.params.get("inventory")
        if self.shell is None and inventory is not None:  # startShell's call
            return inventory.spawn(SHELL_OF + self.name, cmd, **params)
        return super()._popen(cmd, **params)

    def startShell(self, mnopts=None):
        if not self.params.get("defer_prompt"):
            return super().startShell(mnopts)
        # Mininet 2.3.0's startShell (mininet/node.py) up to its wait for the prompt.
        cmd = ["mnexec", ("-cd" if mnopts is None else mnopts) + ("n" if self.inNamespace else ""),
               "env", "PS1=" + PROMPT, "bash", "--norc", "--noediting", "-is", "mininet:" + self.name]
        self.master, self.slave = pty.openpty()
        self.shell = self._popen(cmd, stdin=self.slave, stdout=self.slave, stderr=self.slave, close_fds=False)
        self.stdin = self.stdout = os.fdopen(self.master, "r")
        self.pid = self.shell.pid
        self.pollOut = select.poll()
        self.pollOut.register(self.stdout)
        self.outToNode[self.stdout.fileno()] = self
        self.inToNode[self.stdin.fileno()] = self
        self.execed, self.lastCmd, self.lastPid, self.readbuf = False, None, None, ""
        self.waiting = True  # until its prompt: see start_shells
        return None

    def terminate(self) -> None:
        """Mininet's (SIGHUP to the shell's process group), also for a shell that does not lead a
        group yet: one stopped (Ctrl-C, SIGTERM) between its start and mnexec's setsid, still
        waiting on its inventory gate. That shell alone is killed; the inventory removes the rest."""
        try:
            super().terminate()
        except ProcessLookupError:
            self.shell.kill()
            self.cleanup()

    def wait_for_prompt(self) -> None:
        """The rest of Mininet's startShell, after the launch: the shell has printed its prompt."""
        while not self.read(1024).endswith(PROMPT):
            self.pollOut.poll()
        self.waiting = False


def start_shells(nodes: list[Node], then: str = "") -> None:
    """Finish starting the shells of nodes made with defer_prompt (RecordedShell), all at once:
    wait for each prompt, then run Mininet's shell settings and `then` in each, concurrently."""
    for node in nodes:
        node.wait_for_prompt()
    for node in nodes:
        node.sendCmd(f"{SHELL_SETTINGS}; {then}" if then else SHELL_SETTINGS)
    for node in nodes:
        node.waitOutput()


class FabricHost(RecordedShell, Host):
    """A host in a network namespace of its own, running the machine's programs."""

    @property
    def transport_binary(self) -> Path:
        """The cchost this host runs."""
        return cchost_binary()

    def popen_transport(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start the host's transport (or another program of the host's own, as opposed to ccemu's
        probes and configuration): here simply in the host's namespace."""
        return self.popen(argv, **kwargs)


class FabricNamespace(RecordedShell, Node):
    """A namespace of the run holding no host: an OVS instance's."""


class FabricSwitch(Switch):
    """A switch's ports in a namespace it shares with other switches: a bridge of the
    namespace's OvsInstance (FabricNet creates all bridges in one transaction), or, with the bpf
    datapath, no daemon at all (`instance` None). It has no shell of its own."""

    def __init__(self, name, namespace: Node, instance: OvsInstance | None, **params):
        self.namespace = namespace
        self.instance = instance
        params.pop("inNamespace", None)
        super().__init__(name, inNamespace=True, **params)
        self.controlIntf = None

    def startShell(self, mnopts=None):
        self.pid = self.namespace.pid

    def cmd(self, *args, **kwargs):
        return self.namespace.cmd(*args, **kwargs)

    def popen(self, *args, **kwargs):
        return self.namespace.popen(*args, **kwargs)

    def dpctl(self, *args):
        if self.instance is None:
            raise FabricError(f"switch {self.name} has no OpenFlow tables: the bpf datapath forwards it")
        return self.cmd("ovs-ofctl", args[0], self.instance.management_socket(self.name), *args[1:])

    def start(self, controllers):
        pass

    def stop(self, deleteIntfs=False):
        pass

    def terminate(self):
        pass
