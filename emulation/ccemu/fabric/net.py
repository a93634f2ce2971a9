"""The live emulated fabric: a Mininet network whose switches are bridges of private OVS
instances (or, with `fabric.datapath: bpf`, sets of ports the kernel forwards between, driven by
the port programs: ports/bpf/switch.h), built quickly and torn down without leaks. Hosts are
network namespaces, or Docker containers (containers/host.py) when the config says
`hosts: {kind: docker}`.

Mininet's roles are kept: nodes execute (FabricSwitch runs its commands in its OVS
instance's namespace), interfaces configure themselves (FabricIntf is born configured),
links connect (FabricLink makes a veth pair with one netlink request, each end created
directly in its node's namespace). What Mininet does one process per item, FabricNet does
in batches: one OVSDB transaction per OVS instance for all bridges and ports, one OpenFlow
bundle per bridge installed in parallel, one `ip -batch`/`tc -batch` per namespace, run in
all namespaces at once. Mininet.init()'s global sysctl changes are skipped: the run changes
nothing outside its own namespaces.
"""

from __future__ import annotations

import json
import resource
import secrets
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Node

from ..containers import CONTAINERS_FILE
from ..containers import image as host_image
from ..containers.engine import DockerEngine, remove_containers
from ..containers.host import Container, DockerHost, create_containers
from ..logs import ended_saying
from ..model.config import ExperimentConfig
from ..model.partition import MachinePart
from . import firewall
from .inventory import DEFAULT_STATE_ROOT, Inventory
from .lifecycle import FabricError, LeftoversError, Timings, UpWhileInside
from .links import FabricLink
from .nodes import FabricHost, FabricNamespace, FabricSwitch, start_shells
from ..model.kernel import KernelFeatures
from .counters import PortKey, switch_port_counters
from .kernel import probe_kernel
from .latency import idle_rtts
from .forwarding import host_route_count, route_lines
from .openflow import switch_flows
from .tunnels import (WIRE_NAMESPACE, refused_across_machines, tunnel_line, wire_end, wire_ip_lines, wire_shell_lines,
                      wire_tc_lines)
from .placement import place, usable_cpus
from .protocol import OneMachine
from .allocators import allocator_library
from .ovs import OvsInstance, start_instances, wait_all
from ..model.routing import PATH_ID_PORTS, Routing
from ..ports.program import (PORT_IDS_FILE, PORT_INDEX_FILE, SHAPE_FILE, PortIds, PortProgram, ifindex_of,
                              number_ports, parse_attached)
from ..ports import pfc
from ..programs.probe import Probes, hosts_of
from ..ports.interface import configure, configure_wire_end
from ..ports.tc import PortShape
from ..model.topology import FABRIC_PREFIX, GATEWAY_IP, GATEWAY_MAC, HOST_PREFIX_LEN, Topology

OPEN_FILES_LIMIT = 65536  # every veth end and OVS socket is a descriptor
# ovs-vswitchd's receive socket per port: room for bursts while its one thread is busy
# (see OvsInstance.enlarge_packet_socket_buffers); memory is charged only while packets wait.
RECEIVE_BUFFER_BYTES = 8 << 20


def quiet_mininet() -> None:
    """Mininet's own progress lines off (its warnings stay): ccemu says what it brings up in its own."""
    setLogLevel("warning")


class FabricNet(UpWhileInside, OneMachine, Mininet):
    """Mininet network built from a ccemu Topology on private OVS instances."""

    inited = True  # skip Mininet.init(): it raises system-wide sysctls we would not restore

    def __init__(self, config: ExperimentConfig, topo: Topology | None = None, run_id: str | None = None,
                 state_root: Path = DEFAULT_STATE_ROOT, kernel: KernelFeatures | None = None,
                 shared_dirs: tuple[Path, ...] = (), part: MachinePart | None = None):
        """`shared_dirs`: directories Docker hosts see at the same path (the run's work directory:
        schedules in, records out); namespace hosts see the machine's files anyway. `part`: this
        machine's share of a fabric split over several (machines/): only its switches and hosts
        are made, and each of its cut links is a tunnel (fabric/tunnels.py)."""
        self.config = config
        self.part = part
        self.shared_dirs = shared_dirs
        self.engine: DockerEngine | None = None  # Docker hosts: the session with Docker's engine
        self.containers: dict[str, Container] = {}  # Docker hosts: host -> its container
        self.image: str | None = None  # Docker hosts: the image they run
        self.fabric_topo = topo or config.topology.build()
        self.routing = Routing(self.fabric_topo)
        if part is not None:
            refused_across_machines(config)
        # What this machine makes: everything, or its part's.
        self.local_hosts = [h for h in self.fabric_topo.hosts if part is None or part.holds(h.name)]
        self.local_switches = [s for s in self.fabric_topo.switches if part is None or part.holds(s.name)]
        self.kernel = kernel or probe_kernel()
        self.run_id = run_id or f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        self.state_root = state_root
        self.inventory: Inventory | None = None
        self.switch_namespaces: list[FabricNamespace] = []  # one per placement slot; the switch ports live there
        # A part of a fabric over several machines: the namespace its cut links' wires run through
        # (fabric/tunnels.py), and their keys.
        self.wire_namespace: FabricNamespace | None = None
        self.wires: list[int] = []
        self.instances: list[OvsInstance] = []  # OVS datapath: one per switch namespace; bpf: none
        self.port_shape = PortShape.of(config)  # every port's; raises on bad values before anything starts
        self.port_program = PortProgram.built()
        self.placement = place(config.fabric, len(self.local_switches), usable_cpus())
        self.port_index: dict[str, dict[str, int]] = {}  # node -> port name -> ifindex
        self.port_ids: dict[str, PortIds] = {}  # port name -> its id and its peer's (ports/program.py)
        self.pause_agent: subprocess.Popen | None = None  # lossless ports: ports/pfc.py
        self.port_shapes: dict[str, PortShape] = {}  # every port's, as configured
        # The PFC pause agent's last figures (ports/pfc.py's stats file), as it wrote them when stop()
        # stopped it (while it runs they are up to pfc.STATS_EVERY_S old: a pause of the last second
        # would show without its resume); None: no agent ran. "died" says why where it had stopped
        # before: its ports' gates then stayed as they were, so pauses went on, or never came.
        self.pause_agent_figures: dict | None = None
        self.timings = Timings()
        self.stop_timings = Timings()
        _raise_open_files_limit()
        quiet_mininet()
        super().__init__(topo=None, switch=FabricSwitch, host=FabricHost, link=FabricLink, controller=None,
                         build=False, autoSetMacs=False, inNamespace=False, listenPort=None,
                         waitConnected=False)

    @property
    def bpffs(self) -> Path:
        return self.inventory.state_dir.resolve() / "bpffs"

    @property
    def forwards_in_bpf(self) -> bool:
        return self.config.fabric.forwarder(self.kernel) == "bpf"

    @property
    def ovs_datapath(self) -> str:
        return "system" if self.kernel.openvswitch else "netdev"

    def describe_datapath(self) -> str:
        if self.forwards_in_bpf:
            return f"bpf datapath (the kernel forwards, no OVS; {self.placement.instances} switch namespaces)"
        return f"{self.placement}, OVS {self.ovs_datapath} datapath"

    # Bring-up --------------------------------------------------------------------------

    def build(self):
        """Namespaces, OVS instances, hosts, links and their configuration."""
        self.timings = Timings()
        self.inventory = Inventory.create(self.run_id, self.state_root)
        (self.inventory.state_dir / "config").mkdir()
        # Before any namespace exists: nodes get a copy of our mounts when they are made.
        self.inventory.add_mount("bpf", self.bpffs)
        if self.config.hosts.kind == "docker":
            self.engine = DockerEngine.acquire()
            self.image = host_image.require(self.engine.client, self.config.hosts.image)
            self.timings.mark("docker engine and image")
        self._start_switch_namespaces()
        self.timings.mark("switch namespaces and ovs daemons")
        self._add_hosts()
        self.timings.mark("host shells")
        self._filter_tunnels()
        self._add_switches_and_links()
        self.timings.mark("links")
        self._configure_namespaces()
        self.timings.mark("addresses, arp, port qdiscs, programs attached")
        if self.port_shape.lossless:
            self._start_pause_agent()
            self.timings.mark("pfc pause agent")
        self.built = True

    def _start_switch_namespaces(self):
        """The namespaces the switch ports live in, one per placement slot, each with its OVS
        instance unless the bpf datapath forwards."""
        # The allocator is looked for before any namespace exists.
        preload = None if self.forwards_in_bpf else allocator_library(self.config.fabric.ovs_allocator)
        prefix = "sw" if self.forwards_in_bpf else "ovs"
        with self.inventory.batch():
            namespaces = [FabricNamespace(f"{prefix}{index}", inNamespace=True, inventory=self.inventory,
                                          defer_prompt=True)
                          for index in range(self.placement.instances)]
            if self.part is not None and self.part.partition.cut_on(self.part.machine):
                self.wire_namespace = FabricNamespace(WIRE_NAMESPACE, inNamespace=True, inventory=self.inventory,
                                                      defer_prompt=True)
        self._adopt_namespaces(namespaces + ([self.wire_namespace] if self.wire_namespace else []))
        self.switch_namespaces = namespaces
        if not self.forwards_in_bpf:
            self.instances = [OvsInstance(index, self.inventory.state_dir, self.ovs_datapath, namespace, preload)
                              for index, namespace in enumerate(namespaces)]
            start_instances(self.instances, self.inventory)

    def _adopt_namespaces(self, nodes: list[Node]) -> None:
        """Finish starting the shells of new nodes (made with defer_prompt inside an inventory
        batch), record their namespaces and silence them: with IPv6 off before any interface
        exists, no neighbour discovery or MLD packet ever reaches a switch. Ephemeral ports stay
        out of ccemu's path-id ports, so that no other program's UDP (iperf3 -u) is routed by a
        path-id it did not choose."""
        start_shells(nodes, then="echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; "
                                 "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; "
                                 f"echo {PATH_ID_PORTS[0]}-{PATH_ID_PORTS[1]} "
                                 "> /proc/sys/net/ipv4/ip_local_reserved_ports")
        with self.inventory.batch():
            for node in nodes:
                self.inventory.add_namespace_of(node.pid, node.name)

    def _add_hosts(self):
        if self.engine is not None:
            self.containers = create_containers(self.engine, self.inventory, self.image,
                                                [spec.name for spec in self.local_hosts], self.config.hosts,
                                                self.shared_dirs)
            (self.inventory.state_dir / CONTAINERS_FILE).write_text(
                json.dumps({host: c.as_json() for host, c in self.containers.items()}, indent=1))
            self.timings.mark("containers")
        # Every shell starts while the next host is made; then all are waited for at once.
        with self.inventory.batch():
            hosts = []
            for spec in self.local_hosts:
                container = self.containers.get(spec.name)
                kind = {"cls": DockerHost, "container": container} if container else {}
                hosts.append(self.addHost(spec.name, ip=f"{spec.ip}/{HOST_PREFIX_LEN}", mac=spec.mac,
                                          inventory=self.inventory, defer_prompt=True, **kind))
        self._adopt_namespaces(hosts)

    def slot_of(self, switch: str) -> int:
        """Switches are dealt to namespaces (and OVS instances) in topology order, so each gets
        whole tiers' worth of neighbours rather than every other switch."""
        names = [spec.name for spec in self.local_switches]
        return names.index(switch) * len(self.switch_namespaces) // len(names)

    def switches_in(self, namespace: Node) -> list[FabricSwitch]:
        return [switch for switch in self.switches if switch.namespace is namespace]

    def _add_switches_and_links(self):
        for spec in self.local_switches:
            slot = self.slot_of(spec.name)
            self.addSwitch(spec.name, namespace=self.switch_namespaces[slot],
                           instance=self.instances[slot] if self.instances else None, dpid=f"{spec.dpid:016x}")
        self.port_ids = number_ports(self._interface_pairs())
        FabricLink.ifindexes = {port: ifindex_of(ids.port_id) for port, ids in self.port_ids.items()}
        FabricLink.batch = []
        try:
            for link in self.fabric_topo.links:
                share = self._share(link)
                if share == "cut":
                    self._add_cut_link(link)
                if share != "whole":
                    continue
                addrs = {}
                for end, key in ((link.a, "addr1"), (link.b, "addr2")):
                    if self.fabric_topo.is_host(end):
                        addrs[key] = self.fabric_topo.host(end).mac
                self.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port, mtu=self.config.link.mtu,
                             **addrs)
            batch = self.inventory.state_dir / "config" / "links.ip"
            batch.write_text("\n".join(FabricLink.batch) + "\n")
            made = subprocess.run(["ip", "-batch", str(batch)], capture_output=True, text=True)
            if made.returncode:
                raise FabricError(f"creating the links failed: {made.stderr.strip()}")
        finally:
            FabricLink.batch = None

    def _share(self, link) -> str:
        """What this machine makes of `link`: "whole" (both ends are here), "cut" (one end: its
        half of a tunnel, fabric/tunnels.py) or "none"."""
        if self.part is None:
            return "whole"
        return ("none", "cut", "whole")[self.part.holds(link.a) + self.part.holds(link.b)]

    def _local_end(self, link) -> tuple[str, int]:
        """(switch, port) of a cut link's end on this machine."""
        return (link.a, link.a_port) if self.part.holds(link.a) else (link.b, link.b_port)

    def _interface_pairs(self) -> list[tuple[str, str]]:
        """The veth pairs this machine makes, as (interface, peer): every link's, or a part's own
        links' and, for each of its cut links, its switch's port paired with the link's wire end."""
        pairs = []
        for link in self.fabric_topo.links:
            share = self._share(link)
            if share == "whole":
                pairs.append(link.interface_names())
            elif share == "cut":
                local, port = self._local_end(link)
                pairs.append((f"{local}-eth{port}", wire_end(self.part.partition.tunnel_key(link))))
        return pairs

    def _filter_tunnels(self) -> None:
        """Before the first tunnel: its packets taken only from the far machines (fabric/firewall.py)."""
        if self.wire_namespace is None:
            return
        first, last = self.part.vni_range()
        self.inventory.add_filter(firewall.chain_name(first),
                                  lambda chain: firewall.install(chain, self.part.far_addresses(), first, last))

    def _add_cut_link(self, link) -> None:
        """A cut link's local half (fabric/tunnels.py): its switch's port, a veth like any other,
        whose peer is the link's wire end; the wire's VXLAN device, made here (this machine's
        network) in the wire namespace, where _configure_namespaces joins the two."""
        local, port = self._local_end(link)
        key = self.part.partition.tunnel_key(link)
        FabricLink(self[local], self.wire_namespace, port1=port, intfName1=f"{local}-eth{port}",
                   intfName2=wire_end(key), mtu=self.config.link.mtu)
        FabricLink.batch.append(tunnel_line(key, self.config.link.mtu, self.wire_namespace.pid, self.part, link))
        self.wires.append(key)

    def _configure_namespaces(self):
        """Hosts: addresses, static ARP, IPv6 off, offloads off, port qdiscs and program.
        Switch namespaces: the same for every switch port (and, with the bpf datapath, the
        routes first). One batch per namespace, all namespaces at once."""
        shape = self.port_shape
        config_dir = self.inventory.state_dir / "config"
        port_ids = self.port_ids
        (self.inventory.state_dir / PORT_IDS_FILE).write_text(
            json.dumps({port: ids.port_id for port, ids in port_ids.items()}))
        switch_port_count = sum(len(switch.intfs) for switch in self.switches)
        routes = host_route_count(self.routing) if self.forwards_in_bpf else 0
        _run_loader(self.port_program.load_command(self.bpffs, port_ids, switch_port_count, routes),
                    "loading the port programs")
        if self.forwards_in_bpf:  # before any port forwards
            routes_file = config_dir / "routes"
            _write(routes_file, route_lines(self.routing, port_ids, [s.name for s in self.local_switches]))
            _run_loader(self.port_program.routes_command(self.bpffs, routes_file), "writing the switches' routes")
        self.timings.mark("port programs loaded")

        def script(node: str, ports: dict[str, PortShape], switch_ports: bool, ip_after: tuple[str, ...] = (),
                   how=configure, tc_after: tuple[str, ...] = (), shell_after: tuple[str, ...] = ()) -> str:
            """The namespace's one batch of each tool: what its ports say (`how`: ports/interface.py), in order."""
            self.port_shapes.update(ports)
            commands = [how(port, port_ids[port], port_shape, switch_ports) for port, port_shape in ports.items()]
            program_config = config_dir / f"{node}.ports"
            _write(program_config, [c.program for c in commands])
            ip_batch = [line for c in commands for line in c.ip] + list(ip_after)
            tc_batch = [line for c in commands for line in c.tc] + list(tc_after)
            return " && ".join([
                f"ip -batch {_write(config_dir / f'{node}.ip', ip_batch)}",
                *(line for c in commands for line in c.shell),
                # From a file, as the batches: a shell reads one line of at most 4095 bytes from its
                # terminal, and a k=8 machine's 64 tunnels make 128 commands.
                *([f"sh -e {_write(config_dir / f'{node}.sh', list(shell_after))}"] if shell_after else []),
                f"tc -batch {_write(config_dir / f'{node}.tc', tc_batch)}",
                self.port_program.attach_command(self.bpffs, program_config,
                                                 forward=switch_ports and self.forwards_in_bpf),
            ])

        # A switch port facing a host runs at the host link's rate, one facing a switch at
        # link.fabric_share of it (oversubscription at the ToR).
        facing_hosts = {f"{switch}-eth{port}" for switch, port in map(self.fabric_topo.attachment,
                                                                        self.fabric_topo.host_names)}
        fabric_shape = PortShape.of_fabric(self.config)

        scripts: dict[Node, str] = {}
        for spec in self.local_hosts:
            host = self[spec.name]
            intf = host.defaultIntf()
            intf.ip, intf.prefixLen = spec.ip, HOST_PREFIX_LEN
            addressing = ("link set lo up", f"addr add {spec.ip}/{HOST_PREFIX_LEN} dev {intf.name}",
                          f"neigh replace {GATEWAY_IP} lladdr {GATEWAY_MAC} dev {intf.name} nud permanent",
                          f"route add {FABRIC_PREFIX} via {GATEWAY_IP} dev {intf.name} onlink")
            scripts[host] = script(spec.name, {intf.name: shape.of_nic(self.config, spec.name)}, switch_ports=False,
                                   ip_after=addressing)
        for namespace in self.switch_namespaces:
            ports = [intf.name for switch in self.switches_in(namespace) for intf in switch.intfList()]
            if ports:
                scripts[namespace] = script(namespace.name,
                                            {port: shape if port in facing_hosts else fabric_shape for port in ports},
                                            switch_ports=True)
        if self.wire_namespace is not None:  # ports that count departures only, bridged to their tunnels
            scripts[self.wire_namespace] = script(
                WIRE_NAMESPACE, {wire_end(key): fabric_shape.of_wire_end() for key in self.wires}, switch_ports=False,
                ip_after=wire_ip_lines(self.wires), how=configure_wire_end, tc_after=wire_tc_lines(self.wires),
                shell_after=wire_shell_lines(self.wires))
        outputs = _run_everywhere(scripts)
        # The wire ends are no ports of the fabric: the index (what readers list) leaves them out.
        self.port_index = {node.name: parse_attached(output) for node, output in outputs.items()
                           if node is not self.wire_namespace}
        # The index last: readers (ccemu ports, the collector) take it to mean the ports are ready.
        # Their frame time is the host link's: with link.fabric_share below 1, a port between
        # switches sends a frame in more than that, so residence in frame times reads high there
        # (the verdict errs strict).
        (self.inventory.state_dir / SHAPE_FILE).write_text(json.dumps(shape.as_json()))
        (self.inventory.state_dir / PORT_INDEX_FILE).write_text(json.dumps(self.port_index, indent=1))

    def _start_pause_agent(self):
        """Lossless ports: the agent that pauses them (ports/pfc.py), told where every port is."""
        state = self.inventory.state_dir
        where = {}
        for node, ports in self.port_index.items():
            pid = (self[node] if node in self.nameToNode else self._namespace_named(node)).pid
            # Each port with its own shape: a host's NIC has its own rate (link.host_shares) and
            # buffer (port.host_buffer_bytes), a port between switches its own rate.
            where.update({self.port_ids[port].port_id: [node, pid, port, self.port_shapes[port].as_json()]
                          for port in ports})
        (state / pfc.PORTS_FILE).write_text(json.dumps(where))
        with open(state / pfc.LOG_FILE, "w") as log:  # a file: a pipe nobody reads could fill and stop it
            self.pause_agent = self.inventory.spawn(
                "pfc pause agent", [sys.executable, "-m", "ccemu.ports.pfc", str(state)], stdout=subprocess.PIPE,
                stderr=log, text=True, cwd=Path(pfc.__file__).resolve().parents[2])
        line = self.pause_agent.stdout.readline().strip()  # it prints nothing after this line
        if line != pfc.READY_LINE:
            self.pause_agent.wait()
            raise FabricError(f"the PFC pause agent did not start: {self.pause_agent_log()}")

    def pause_agent_log(self) -> str:
        """The last of what the pause agent wrote to stderr (why it failed, when it did)."""
        path = self.inventory.state_dir / pfc.LOG_FILE
        return " ".join(path.read_text().split()[-60:]) if path.exists() else ""

    def _read_pause_agent_figures(self, died: bool) -> dict | None:
        stats = self.inventory.state_dir / pfc.STATS_FILE
        if not stats.exists():
            return None
        figures = json.loads(stats.read_text())
        if died:
            figures["died"] = self._pause_agent_ended()
        return figures

    def _pause_agent_ended(self) -> str:
        return ended_saying(self.pause_agent.returncode, self.pause_agent_log()[-200:])

    def fault(self) -> str | None:
        """What of the fabric's own machinery (an OVS daemon, the PFC pause agent) is no longer
        running, in one line; None while all of it runs. (A host's cchost is the experiment's,
        not the fabric's: the runner watches those itself.)"""
        for instance in self.instances:
            if (died := instance.died()) is not None:
                switches = [s.name for s in self.switches_in(instance.namespace)]
                shown = ", ".join(switches[:4]) + (f" and {len(switches) - 4} more" if len(switches) > 4 else "")
                return f"{died} (the switches {shown} stopped forwarding)"
        if self.pause_agent is not None and self.pause_agent.poll() is not None:
            return f"the PFC pause agent {self._pause_agent_ended()} (its lossless ports stopped pausing and resuming)"
        return None

    @property
    def machine_of(self) -> dict[str, str] | None:
        """Node -> machine, where the fabric is split over several (a part's); None on one machine."""
        return self.part.partition.machine_of if self.part is not None else None

    def live_ports(self):
        """The ports' figures as they are now, for the collector (read(), frame_ns, close())."""
        from ..ports.maps import PortMaps

        return PortMaps(self.inventory.state_dir)

    def drained_ports(self) -> tuple[list, float]:
        """Every port's figures once the traffic drained (ports/maps.py read_drained), and a frame's time."""
        from ..ports.maps import PortMaps

        with PortMaps(self.inventory.state_dir) as maps:
            return maps.read_drained(), maps.frame_ns

    def _namespace_named(self, name: str) -> Node:
        for namespace in self.switch_namespaces:
            if namespace.name == name:
                return namespace
        raise KeyError(name)

    def start(self):
        """Bridges and ports (one OVSDB transaction per instance), then the flow tables. The bpf
        datapath has nothing to start: its routes were written before its ports were attached."""
        if self.forwards_in_bpf:
            return
        transactions = []
        for instance in self.instances:
            # QoS "linux-noop": OVS leaves the ports' qdiscs alone. Without it, OVS deletes
            # the root qdisc of every port it adds, and again at every reconfiguration.
            args: list[str] = ["--", "--id=@noop", "create", "QoS", "type=linux-noop"]
            for switch in self.switches_in(instance.namespace):
                args += ["--", "add-br", switch.name, "--", "set", "bridge", switch.name,
                         f"datapath_type={instance.datapath}", "fail_mode=secure",
                         f"other-config:datapath-id={switch.dpid}", "other-config:disable-in-band=true"]
                for port, intf in sorted(switch.intfs.items()):
                    args += ["--", "add-port", switch.name, intf.name, "qos=@noop",
                             "--", "set", "Interface", intf.name, f"ofport_request={port}"]
            transactions.append(instance.start_vsctl(*args))
        wait_all(transactions, "creating bridges and ports")
        self.timings.mark("ovs bridges and ports")
        wait_all([
            (switch.name, switch.instance.add_flows(
                switch.name, switch_flows(self.fabric_topo, self.routing.tables[switch.name])))
            for switch in self.switches
        ], "installing flows")
        self.timings.mark("flow tables")
        for instance in self.instances:
            switches = self.switches_in(instance.namespace)
            ports = sum(len(s.intfs) for s in switches)
            instance.enlarge_packet_socket_buffers(switches[0].name, ports * self.port_shape.queued_memory_bytes,
                                                   RECEIVE_BUFFER_BYTES)
        self.timings.mark("ovs socket buffers")
        for instance, cpu in zip(self.instances, self.placement.cpus):
            if cpu is not None:  # last: the daemons have started every thread they start at bring-up
                instance.pin(cpu)
        self.timings.mark("ovs placement")

    # Teardown --------------------------------------------------------------------------

    def stop(self):
        """Stop OVS, end every shell, then make sure nothing of the run remains."""
        self.stop_timings = Timings()
        if self.pause_agent is not None:  # first, so that it writes its last figures (the inventory would kill it too)
            died = self.pause_agent.poll() is not None
            self.pause_agent.terminate()
            try:
                self.pause_agent.wait(5)
            except subprocess.TimeoutExpired:
                pass
            self.pause_agent_figures = self._read_pause_agent_figures(died)
            self.pause_agent = None
        for instance in self.instances:
            instance.kill()
        for instance in self.instances:
            instance.wait()
        self.stop_timings.mark("ovs daemons")
        for node in self.hosts + self.switch_namespaces + ([self.wire_namespace] if self.wire_namespace else []):
            node.terminate()
        self.stop_timings.mark("shells")
        try:
            problems = self.inventory.remove(remove_containers=remove_containers) if self.inventory else []
        finally:
            if self.engine is not None:
                self.engine.release()
                self.engine = None
        self.stop_timings.mark("leftovers")
        if problems:
            raise LeftoversError(f"run {self.run_id} left: {'; '.join(problems)}; run `ccemu clean`")

    def bring_up(self) -> None:
        self.build()
        self.start()

    # The Fabric protocol's measurements (fabric/protocol.py), here on this machine's nodes.
    def probes(self, names: Iterable[str]) -> Probes:
        return Probes(hosts_of(self, names))

    def port_counters(self) -> dict[PortKey, tuple[int, int]]:
        return switch_port_counters(self)

    def idle_rtts(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], float]:
        return idle_rtts(self, pairs)


# A terminal's line discipline takes at most this many bytes per line (N_TTY_BUF_SIZE - 1): a
# node's shell reads its commands from one, and a longer line is cut with nothing said.
TERMINAL_LINE_BYTES = 4095


def _run_everywhere(scripts: dict[Node, str]) -> dict[Node, str]:
    """Run one shell command line in each node concurrently and return each one's output;
    raise naming every failure."""
    lines = {node: f"{script}; echo ccemu-status=$?" for node, script in scripts.items()}
    if long := [f"{node.name} ({len(line.encode())} B)" for node, line in lines.items()
                if len(line.encode()) >= TERMINAL_LINE_BYTES]:
        raise FabricError(f"configuring namespaces: the command lines of {', '.join(long)} are longer than a "
                          f"terminal line ({TERMINAL_LINE_BYTES - 1} B): their commands belong in a file")
    for node, line in lines.items():
        node.sendCmd(line)
    outputs, failures = {}, []
    for node in scripts:
        outputs[node] = node.waitOutput()
        if "ccemu-status=0" not in outputs[node]:
            failures.append(f"{node.name}: {outputs[node].strip()}")
    if failures:
        raise FabricError("configuring namespaces failed: " + " | ".join(failures))
    return outputs


def _run_loader(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise FabricError(f"{what} failed: {done.stderr.strip()}")


def _write(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n")
    return shlex.quote(str(path))


def _raise_open_files_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = OPEN_FILES_LIMIT if hard == resource.RLIM_INFINITY else min(OPEN_FILES_LIMIT, hard)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
