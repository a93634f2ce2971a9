"""Links connect (Mininet's role): a FabricLink is a veth pair made in one netlink request with
its ends already in their nodes' namespaces, and a FabricIntf is born configured."""

from __future__ import annotations

from mininet.link import Intf, Link


class FabricIntf(Intf):
    """An interface FabricLink created already configured: config() only records."""

    def config(self, mac=None, ip=None, **_params):
        self.mac = mac
        return {}


class FabricLink(Link):
    """A veth pair: both ends named, addressed and sized (MTU), each created directly in its
    node's network namespace. FabricNet creates all pairs with one `ip -batch` (written here,
    line by line, while the links are added) and brings them up in its per-namespace batches."""

    batch: list[str] | None = None  # set by FabricNet for the duration of build(): `ip -batch` lines
    ifindexes: dict[str, int] = {}  # set by FabricNet: interface name -> the ifindex it is made with

    def __init__(self, node1, node2, mtu: int = 1500, **params):
        self.mtu = mtu
        params.update(intf=FabricIntf, fast=True)
        super().__init__(node1, node2, **params)

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None, node2=None,
                     deleteIntfs=False):
        ends = []
        for name, addr, node in ((intfname1, addr1, node1), (intfname2, addr2, node2)):
            ends.append(f"name {name} index {self.ifindexes[name]} mtu {self.mtu}{f' address {addr}' if addr else ''} "
                        f"netns {node.pid}")
        self.batch.append(f"link add {ends[0]} type veth peer {ends[1]}")

    def stop(self):
        """Nothing to do: the veths go with the namespaces of the run."""
