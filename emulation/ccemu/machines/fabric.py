"""The controller's view of one fabric split over several machines: the whole topology and its
routing (the same on every machine: a cut link is a link), the plan (model/partition.py), and a
part on each machine (machines/part.py) driven over its session. fabric/checks.py runs on it as on
a FabricNet: it asks for probes and port counters, which each machine serves for its own hosts
and switches."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections import Counter
from pathlib import Path

from ..fabric.lifecycle import Timings, UpWhileInside
from ..fabric.tunnels import AcrossMachinesError, refused_across_machines, spread_us
from ..model.config import ConfigError, DoesNotFit, ExperimentConfig
from ..model.dilation import FaithfulRates
from ..model.partition import Partition, Plan
from ..model.tunnel import underlay_mtu_needed, vni_base
from ..model.routing import Routing
from ..ports.stats import PortStats
from ..ports.tc import PortShape
from ..results.fidelity import CpuTimes
from ..sweeps.machines import Machine
from . import build
from .mirror import apply
from .remote import RemoteHost
from .session import MachineLost, Session, ask, becomes_root

UP_TIMEOUT_S = 600.0  # a machine's part: bring-up of its share (k=8 over 4 here: ~1 min)
DOWN_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 60.0  # probes and counters: each a fraction of a second when all is well
CLOCK_EXCHANGES = 5
DRAIN_SLICE_S = 0.02  # probes: how long each machine listens per request while none has heard anything


def underlay_address(machine: Machine) -> str:
    """Where the other machines' tunnels reach `machine`: `ccemu_underlay_address` in the
    inventory, else its ansible_host (resolved here)."""
    given = machine.vars.get("ccemu_underlay_address")
    host = given or machine.vars.get("ansible_host") or (machine.name if machine.address != "local" else None)
    if host is None:
        raise AcrossMachinesError(f"machine {machine.name}: a local connection has no address the others reach: "
                                  "set ccemu_underlay_address")
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(host)
    except OSError as exc:
        raise AcrossMachinesError(f"machine {machine.name}: its address {host!r} does not resolve ({exc}): set "
                                  "ccemu_underlay_address") from None


def capacities(machines: list[Machine], here: FaithfulRates) -> dict[str, tuple[float, str]]:
    """Each machine's faithful rate per link as the plan is printed, before any machine is reached:
    `ccemu_capacity_mbps` in the inventory, else this machine's (SplitFabric.start judges the plan
    again with each machine's own once its part answers)."""
    out = {}
    for machine in machines:
        given = machine.vars.get("ccemu_capacity_mbps")
        if given is None:
            out[machine.name] = (here.link_mbps, f"as this machine: {here.source}")
        else:
            try:
                rate = float(given)
            except (TypeError, ValueError):
                rate = -1.0
            if not rate > 0:
                raise AcrossMachinesError(f"machine {machine.name}: ccemu_capacity_mbps must be a positive number "
                                          f"of Mbit/s (got {given!r})")
            out[machine.name] = (rate, "its ccemu_capacity_mbps")
    return out


def plan_of(config: ExperimentConfig, machines: list[Machine], here: FaithfulRates) -> Plan:
    partition = Partition.of(config.topology.build(), [m.name for m in machines])
    return Plan.of(partition, config.link.rate_mbps, config.link.fabric_rate_mbps, config.link.mtu,
                   capacities(machines, here))


class SplitFabric(UpWhileInside):
    """A fabric over `machines` (each running its part), used as `with SplitFabric(...) as net`."""

    # What the block lifecycle (experiments/base.py) reads of a FabricNet, here empty: no Docker
    # hosts, no pause agent (both refused across machines), no local run state (each part has its own).
    containers: dict = {}
    image = None
    pause_agent_figures = None
    inventory = None

    def __init__(self, config: ExperimentConfig, machines: list[Machine], plan: Plan, run_id: str | None = None,
                 workroot: Path | None = None):
        """`workroot`: the folder under which the runners keep the blocks' work folders (the
        bundle's work/), mirrored on every machine (machines/mirror.py)."""
        refused_across_machines(config)
        self.config = config
        self.run_id = run_id
        self.workroot = workroot.resolve() if workroot is not None else None
        self.port_shape = PortShape.of(config)
        self.plan = plan
        self.partition = plan.partition
        self.fabric_topo = self.partition.topo
        self.routing = Routing(self.fabric_topo)
        self.machines = machines
        for machine in machines:  # before anything starts: a machine ccemu would not run on as root
            becomes_root(machine)
        self.addresses = {m.name: underlay_address(m) for m in machines}
        self.hosts = [RemoteHost(self, spec.name, self.partition.machine_of[spec.name], spec.ip)
                      for spec in self.fabric_topo.hosts]
        self._host = {host.name: host for host in self.hosts}
        self.sessions: list[Session] = []
        # A second channel per machine for the collector's scrapes (machines/part.py Reader), with its
        # own lock: a scrape neither waits behind the runner's requests nor holds them up.
        self.readers: list[Session] = []
        self._reading = threading.Lock()
        self.parts: dict[str, dict] = {}  # machine -> what its part said when it came up
        self.clock_offsets_ns: dict[str, int] = {}  # machine -> its CLOCK_MONOTONIC minus ours
        self.clock_bounds_ns: dict[str, int] = {}  # machine -> how far its offset may be off (half an exchange)
        # Every process's exit status as the last collect saw it (None: running), and when: the
        # runners' poll of each process reads it (remote.py), one request per machine for all.
        self.returncodes: dict[int, int | None] = {}
        self.returncodes_at = float("-inf")
        self.round_trips = 0  # requests answered on the parts' channels: what control costs (the runner reports it)
        self._channel = threading.Lock()
        self.lost: MachineLost | None = None  # the first machine lost: the run ends there
        self.timings = Timings()
        self.stop_timings = Timings()
        # What forwards is each machine's own choice for `auto` (a machine without OVS's kernel module
        # runs the bpf datapath, one with it OVS's): both run the same port model.
        self.datapath = config.fabric.datapath

    @property
    def machine_of(self) -> dict[str, str]:
        return self.partition.machine_of

    def describe_datapath(self) -> str:
        if not self.parts:  # before the parts are up
            return (f"{self.datapath} datapath over {len(self.machines)} machines, {len(self.partition.cut)} cut links "
                    "carried by VXLAN")
        return "; ".join(f"{name}: {part['datapath']}" for name, part in self.parts.items())

    def _ask(self, requests: dict[str, dict], timeout: float = REQUEST_TIMEOUT_S) -> dict[str, dict]:
        # One request at a time on each channel: the runner and the collector's scrapes (another
        # thread) both ask.
        with self._channel:
            if self.lost is not None:  # the channels are out of step: no request can be answered in order
                raise self.lost
            try:
                replies = ask(self.sessions, requests, timeout)
            except MachineLost as lost:
                self.lost = lost
                raise
            self.round_trips += len(requests)
        errors = [reply["error"] for reply in replies.values() if "error" in reply]
        if errors:
            raise AcrossMachinesError("; ".join(errors))
        return replies

    def _everyone(self, request: dict) -> dict[str, dict]:
        return self._ask({m.name: dict(request) for m in self.machines})

    def tell(self, machine: str, request: dict) -> None:
        """A one-way request (machines/part.py ONE_WAY): sent, no reply waited for."""
        with self._channel:
            if self.lost is not None:
                raise self.lost
            session = next(s for s in self.sessions if s.machine.name == machine)
            try:
                session.send(request)
            except MachineLost as lost:
                self.lost = lost
                raise

    def start(self) -> None:
        self.timings = Timings()
        self.sessions = [Session(machine) for machine in self.machines]
        # The run's tunnels' identifiers start at random (model/tunnel.py's vni_base): every part the same.
        part = {"config": self.config.model_dump(mode="json"), "machines": list(self.partition.machines),
                "addresses": self.addresses, "vni_base": vni_base(len(self.partition.cut))}
        # Every machine judged first (its build, its share, its network), so that a refusal leaves
        # nothing made anywhere.
        checked = self._ask({m.name: {"op": "underlay", **part} for m in self.machines})
        ours = build.identity()
        if others := [line for name, reply in checked.items() if (line := build.mismatch(name, reply["build"], ours))]:
            raise AcrossMachinesError("; ".join(others))
        if refusals := [reply["refusal"] for reply in checked.values() if reply["refusal"]]:
            refused = DoesNotFit if all(r["does_not_fit"] for r in refusals) else ConfigError
            raise refused("; ".join(r["message"] for r in refusals))
        # Each machine's own capacity, where the inventory does not give one: its own `ccemu bench
        # capacity`, else its own datapath's default (the plan printed took this machine's).
        own = {m.name: (checked[m.name]["capacity"][0], f"its own: {checked[m.name]['capacity'][1]}")
               for m in self.machines if m.vars.get("ccemu_capacity_mbps") is None}
        self.plan = self.plan.with_capacities(own)
        if (overloaded := self.plan.refusal()) is not None:
            raise DoesNotFit(f"judged with each machine's own capacity: {overloaded}")
        problems = [problem for reply in checked.values() for problem in reply["problems"]]
        if problems:
            raise AcrossMachinesError("; ".join(problems))
        self.timings.mark("every machine's build, share and network checked")
        self.parts = self._ask({m.name: {"op": "up", **part} for m in self.machines}, UP_TIMEOUT_S)
        self.timings.mark("every machine's part (in parallel)")
        self.readers = [Session(m, "--reader", self.parts[m.name]["state_dir"]) for m in self.machines]
        for machine in self.machines:
            self.clock_offsets_ns[machine.name], self.clock_bounds_ns[machine.name] = self._clock_offset_ns(
                machine.name)

    def _clock_offset_ns(self, machine: str) -> tuple[int, int]:
        """The machine's CLOCK_MONOTONIC minus ours (cchost counts from an epoch on its machine's
        clock), and how far it may be off: the best of a few exchanges, each read at its middle
        (its error at most half the exchange, a fraction of a millisecond on a LAN: microseconds
        of datacenter time)."""
        best = None
        for _ in range(CLOCK_EXCHANGES):
            sent = time.monotonic_ns()
            there = self.ask_one(machine, {"op": "clock"})["now_ns"]
            back = time.monotonic_ns()
            if best is None or back - sent < best[0]:
                best = (back - sent, there - (sent + back) // 2)
        return best[1], best[0] // 2

    def clock_error_us(self) -> tuple[float, str] | None:
        """How far a time on one machine may be from the same instant on another by the end of a
        block, in wall microseconds, and on which machine: each machine's offset measured again,
        its bound now plus the bound at the block's start plus how far the offset moved since
        (the clocks' drift: the epoch was moved onto each machine's clock at the start). None
        before the parts are up."""
        if not self.clock_offsets_ns:
            return None
        errors = []
        for name, offset in self.clock_offsets_ns.items():
            now, bound = self._clock_offset_ns(name)
            errors.append(((self.clock_bounds_ns[name] + bound + abs(now - offset)) / 1e3, name))
        return max(errors)

    def __getitem__(self, host: str) -> RemoteHost:
        return self._host[host]

    def ask_one(self, machine: str, request: dict, timeout: float = REQUEST_TIMEOUT_S) -> dict:
        return self._ask({machine: request}, timeout)[machine]

    def collect(self) -> None:
        """What every machine's hosts wrote since the last call, into the work folders here, and
        whether each of their processes still runs."""
        for reply in self._everyone({"op": "collect"}).values():
            apply(reply["changes"], self.workroot)
            self.returncodes.update({int(id): code for id, code in reply["returncodes"].items()})
        self.returncodes_at = time.monotonic()

    def returncode(self, id: int, fresh_s: float) -> int | None:
        """Process `id`'s exit status (None: it runs) as a collect at most `fresh_s` old saw it,
        collecting again if the last is older: however many processes the runner polls, one
        request per machine."""
        if time.monotonic() - self.returncodes_at > fresh_s:
            self.collect()
        return self.returncodes.get(id)

    def tunnel_losses(self) -> dict[str, tuple[int, int, str]]:
        """Per cut link and direction, named by the switch port it leaves by ("a1-eth4"): (frames
        its tunnel sent to the machines' network, of which the far machine's never took, the far
        port). Read once the traffic stopped and the ports drained: a frame still in the network
        then is lost."""
        counters = {name: reply["counters"] for name, reply in self._everyone({"op": "tunnel_counters"}).items()}
        losses = {}
        for link in self.partition.cut:
            key = str(self.partition.tunnel_key(link))
            (port_a, port_b), (a, b) = link.interface_names(), (self.machine_of[link.a], self.machine_of[link.b])
            for near, far, here, there in ((port_a, port_b, a, b), (port_b, port_a, b, a)):
                sent, taken = counters[here][key][0], counters[there][key][1]
                losses[near] = (sent, max(0, sent - taken), far)
        return losses

    def idle_rtts(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], float]:
        """fabric/latency.py's, each pair measured from its source's machine (all at once)."""
        by_machine: dict[str, list] = {m.name: [] for m in self.machines}
        for src, dst in pairs:
            by_machine[self.partition.machine_of[src]].append([src, dst])
        replies = self._ask({name: {"op": "idle_rtts", "pairs": mine} for name, mine in by_machine.items() if mine},
                            UP_TIMEOUT_S)
        return {(src, dst): rtt for reply in replies.values() for src, dst, rtt in reply["rtts"]}

    def drained_ports(self) -> tuple[list[PortStats], float]:
        """Every machine's ports once drained (each waits on its own: a port's books are kept on
        its machine, fabric/tunnels.py), and a frame's time."""
        replies = self._everyone({"op": "ports_drained"})
        ports = [PortStats.from_json(port) for reply in replies.values() for port in reply["ports"]]
        return ports, next(iter(replies.values()))["frame_ns"]

    def tunnel_spread_us(self) -> tuple[float, str] | None:
        """The worst one-way delay spread of the tunnels (fabric/tunnels.py spread_us) on the idle
        fabric, measured from every machine to each it tunnels to, all at once, and which pair it
        was; None without a cut link or a round trip."""
        size = underlay_mtu_needed(self.config.link.mtu)
        return _worst_spread(self._everyone({"op": "tunnel_rtts", "addresses": self.addresses, "size": size}), "")

    def watch_tunnels(self) -> None:
        """Every machine measures its tunnels' round trips until tunnel_spread_under_traffic_us."""
        self._everyone({"op": "tunnel_watch", "addresses": self.addresses,
                        "size": underlay_mtu_needed(self.config.link.mtu)})

    def tunnel_spread_under_traffic_us(self) -> tuple[float, str] | None:
        """As tunnel_spread_us, over the round trips measured since watch_tunnels."""
        return _worst_spread(self._everyone({"op": "tunnel_watched"}), ", under traffic")

    def live_ports(self) -> "LivePorts":
        return LivePorts(self)

    def read_everyone(self, request: dict) -> dict[str, dict] | None:
        """`request` of every machine's reader (the scrapes' channel); None once a machine is lost:
        the run ends on it, said by the runner, not by a scrape."""
        with self._reading:
            if self.lost is not None or not self.readers:
                return None
            try:
                replies = ask(self.readers, {s.machine.name: dict(request) for s in self.readers}, REQUEST_TIMEOUT_S)
            except MachineLost as lost:
                self.lost = self.lost or lost
                return None
        errors = [reply["error"] for reply in replies.values() if "error" in reply]
        if errors:
            raise AcrossMachinesError("; ".join(errors))
        return replies

    def cpu_shares_now(self) -> tuple[float, float] | None:
        """The collector's CPU figures: the worst machine's since its part came up."""
        now = self.read_everyone({"op": "cpu"})
        if now is None:
            return None
        shares = [CpuTimes(**now[name]["cpu"]).since(CpuTimes(**part["cpu"])) for name, part in self.parts.items()]
        return max(s for s, _ in shares), max(b for _, b in shares)

    def cpu_over_block(self) -> tuple[float, float]:
        """(steal share, busy share) of the worst machine since its part came up (the verdict
        judges the machine that fell behind, fidelity.Observation)."""
        now = self._everyone({"op": "cpu"})
        shares = [CpuTimes(**now[name]["cpu"]).since(CpuTimes(**part["cpu"])) for name, part in self.parts.items()]
        return max(s for s, _ in shares), max(b for _, b in shares)

    def fault(self) -> None:
        """None while every machine's part runs; MachineLost (one line naming the machine) once one
        ended: the fabric cannot go on without its switches, and the run ends there (a block
        lifecycle would only fail to bring the next block up)."""
        for session in self.sessions:
            if session.proc.poll() is not None:
                raise session.lost("while the fabric was up")
        return None

    def probes(self, names) -> "SplitProbes":
        return SplitProbes(self, list(names))

    def port_counters(self) -> dict[tuple[str, int], tuple[int, int]]:
        counters = {}
        for reply in self._everyone({"op": "port_counters"}).values():
            counters.update({(switch, port): (rx, tx) for switch, port, rx, tx in reply["counters"]})
        return counters

    def stop(self) -> None:
        """Each part told to tear down (all at once); a machine already lost has torn down by
        itself when its channel ended, or leaves its part to `ccemu clean` there (said)."""
        self.stop_timings = Timings()
        with self._reading:  # a reader ends with its input, closing its maps (machines/part.py serve)
            for reader in self.readers:
                reader.close(DOWN_TIMEOUT_S)
            self.readers = []
        problems = []
        alive = [s for s in self.sessions if s.proc.poll() is None]
        if self.lost is None:
            try:
                replies = ask(alive, {s.machine.name: {"op": "down"} for s in alive}, DOWN_TIMEOUT_S)
                problems += [reply["error"] for reply in replies.values() if "error" in reply]
            except MachineLost as exc:
                problems.append(str(exc))
        # After a lost machine no reply can be trusted to be the one asked for: the others' parts
        # tear down as their channels close (machines/part.py), which close() waits for.
        for session in self.sessions:
            session.close(DOWN_TIMEOUT_S)
        self.stop_timings.mark("every machine's part")
        self.sessions = []
        if problems:
            raise AcrossMachinesError("tearing down: " + "; ".join(problems) + " (run `ccemu clean` on that machine)")

    def bring_up(self) -> None:
        self.start()


def _worst_spread(replies: dict[str, dict], when: str) -> tuple[float, str] | None:
    spreads = [(spread, f"{name} -> {far}{when}") for name, reply in replies.items()
               for far, rtts in reply["rtts_us"].items() if (spread := spread_us(rtts)) is not None]
    return max(spreads) if spreads else None


class LivePorts:
    """The collector's port figures over several machines (ports/maps.py PortMaps's read, frame_ns
    and close): each scrape asks every machine for its ports as they are."""

    def __init__(self, fabric: SplitFabric):
        self.fabric = fabric
        self.frame_ns = fabric.port_shape.frame_ns

    def read(self) -> list[PortStats]:
        replies = self.fabric.read_everyone({"op": "ports"})
        if replies is None:
            return []  # a machine is lost: the run ends on it (the runner's next check says so)
        return [PortStats.from_json(port) for reply in replies.values() for port in reply["ports"]]

    def close(self) -> None:
        """Nothing held here: each machine's part keeps its maps."""


class SplitProbes:
    """fabric/checks.py's probes over several machines: sends are batched per machine and go out
    at the next drain, which waits on every machine at once."""

    def __init__(self, fabric: SplitFabric, names: list[str]):
        self.fabric = fabric
        self.owner = {name: fabric.partition.machine_of[name] for name in names}
        self.pending: dict[str, list[list]] = {m.name: [] for m in fabric.machines}
        fabric._ask({m.name: {"op": "probes_open", "hosts": [n for n in names if self.owner[n] == m.name]}
                     for m in fabric.machines})

    def send(self, src: str, dst_ip: str, path_id: int) -> bool:
        self.pending[self.owner[src]].append([src, dst_ip, path_id])
        return True

    def drain(self, heard: Counter, timeout: float = 0.0) -> int:
        sending = {name: sends for name, sends in self.pending.items() if sends}
        if sending:
            replies = self.fabric._ask({name: {"op": "probes_send", "sends": sends} for name, sends in sending.items()})
            # What a NIC's queue refused goes out at the next drain.
            self.pending = {name: [sends[i] for i in replies[name]["refused"]] for name, sends in sending.items()}
            self.pending.update({m.name: [] for m in self.fabric.machines if m.name not in sending})
        # Up to `timeout` for the first arrival anywhere, in slices: each machine waits for its own
        # hosts only, and one that hears nothing would hold every reply for the whole timeout.
        count, deadline = 0, time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            drained = self.fabric._ask({m.name: {"op": "probes_drain", "timeout": max(0.0, min(left, DRAIN_SLICE_S))}
                                        for m in self.fabric.machines})
            for reply in drained.values():
                for host, src, pid, n in reply["heard"]:
                    heard[(host, src, pid)] += n
                    count += n
            if count or left <= DRAIN_SLICE_S:
                return count

    def close(self) -> None:
        self.fabric._everyone({"op": "probes_close"})

    def __enter__(self) -> "SplitProbes":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
