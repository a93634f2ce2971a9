"""The fabric's nodes that execute: hosts and the OVS instances' namespaces, each anchored by a
shell recorded in the run's inventory before it runs. (Switches are bridges of an OVS instance:
fabric/net.py's FabricSwitch; Docker hosts: containers/host.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

from mininet.node import Host, Node

from ..hosts.cchost import cchost_binary
from .inventory import SHELL_OF, Inventory


class RecordedShell:
    """A Mininet node whose shell, the process that creates and holds its namespace, is recorded
    in the run's inventory (params["inventory"]) before it runs (Inventory.spawn)."""

    def _popen(self, cmd, **params):
        inventory: Inventory | None = self.params.get("inventory")
        if self.shell is None and inventory is not None:  # startShell's call
            return inventory.spawn(SHELL_OF + self.name, cmd, **params)
        return super()._popen(cmd, **params)


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
