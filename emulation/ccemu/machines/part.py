"""One machine's part of a fabric split over several (`ccemu part`, started by the controller
over ssh: machines/session.py): it builds this machine's switches, hosts and tunnels (FabricNet
with a MachinePart), answers the controller's requests, and tears down exactly what it built when
told to, when the controller goes away (its stdin ends: a killed controller, a cut ssh session), or
on SIGTERM/SIGINT. A part killed outright (SIGKILL) is removed by `ccemu clean` on its machine: its
inventory names it as the run's orchestrator.

The channel: one JSON object per line each way, a reply for every request but a one-way one
(ONE_WAY), in order (REQUESTS; each is the method of Part of that name, its keys its arguments):
  underlay, up        judge this machine (its build, its share of the fabric, its network for its
                      tunnels); build its part (FabricNet)
  probes_*, port_counters   the fabric's probes and counters (fabric/protocol.py), for this
                      machine's hosts and switches
  clock, tunnel_rtts, tunnel_watch, tunnel_watched, tunnel_counters   its CLOCK_MONOTONIC; round
                      trips to the machines it tunnels to, idle and all through the traffic; the
                      frames each of its tunnels sent and received
  spawn, write, close_stdin, signal   a block's cchosts (machines/remote.py is the other side);
                      write is one-way (a round's flows to 127 senders would be 127 round trips)
  collect             what they wrote since the last call (machines/mirror.py), and whether each ended
  idle_rtts, ports_drained, cpu   its fabric's idle RTTs, the ports' figures once drained, /proc/stat
  down                tear down; then it exits
The collector's scrapes go to a second process on the machine, `ccemu part --reader STATE_DIR` (Reader:
ports, ports_drained, cpu, down; the part reads its own ports through one), over a channel of their own.
A failure is {"error": "one line"}; the part stays as it was (the controller decides). A one-way
request that fails says so on stderr (the session's log, quoted if the machine is lost).
Replies go to the channel's own descriptor: anything else writing to stdout (Mininet's messages)
goes to stderr instead, so it cannot break the channel.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import TextIO

from ..programs.cchost import stop_all
from ..results.fidelity import CpuTimes
from .mirror import Outbox, mapped

BUILD_ROOT = Path(__file__).resolve().parents[3]  # this machine's ccemu tree (its ccemu_build_root)
MIRROR = "mirror"  # in the run's state folder: the block's work folder as this machine's hosts see it
REQUESTS = ("underlay", "up", "probes_open", "probes_send", "probes_drain", "probes_close", "port_counters",
            "clock", "tunnel_rtts", "tunnel_watch", "tunnel_watched", "tunnel_counters", "spawn", "write",
            "close_stdin", "signal", "collect", "idle_rtts", "ports_drained", "cpu", "down")
ONE_WAY = ("write",)


class Part:
    """The requests' handlers; `net` is the live FabricNet once "up" succeeded."""

    REQUESTS = REQUESTS

    def __init__(self, machine: str):
        self.machine = machine
        self.net = None
        self.probes = None
        self.procs: dict[int, subprocess.Popen] = {}  # the controller's process ids -> what runs here
        self.outbox: Outbox | None = None
        self.reader: Reader | None = None  # its run folder's ports' maps and CPU, as the scrapes' channel reads them
        self.watch = None  # the tunnels' round trips under traffic (tunnel_watch), ended at "down"

    def _part(self, config: dict, machines: list[str], addresses: dict[str, str], vni_base: int):
        from ..model.config import parse_config
        from ..model.partition import MachinePart, Partition

        parsed = parse_config(config, source=f"the controller's config for {self.machine}")
        partition = Partition.of(parsed.topology.build(), machines)
        return parsed, MachinePart(partition, self.machine, addresses, vni_base)

    def underlay(self, config: dict, machines: list[str], addresses: dict[str, str], vni_base: int) -> dict:
        """This machine judged before anything is made anywhere: its build (the controller compares
        it with its own), whether its share of the fabric fits it (fabric/admission.py, as a
        machine running a whole fabric judges itself), and what is wrong with its network for its
        tunnels."""
        from ..fabric.admission import admit_share
        from ..fabric.tunnels import underlay_problems
        from ..model.config import ConfigError, DoesNotFit
        from .build import identity

        parsed, part = self._part(config, machines, addresses, vni_base)
        try:
            admit_share(parsed, part.partition.counts_on(self.machine), f"machine {self.machine}")
            refusal = None
        except ConfigError as exc:  # the controller refuses with the status a machine alone would
            refusal = {"message": str(exc), "does_not_fit": isinstance(exc, DoesNotFit)}
        return {"build": identity(), "refusal": refusal, "capacity": _own_capacity(parsed),
                "problems": underlay_problems(part, parsed.link.mtu)}

    def up(self, config: dict, machines: list[str], addresses: dict[str, str], vni_base: int) -> dict:
        from ..fabric.net import FabricNet

        parsed, part = self._part(config, machines, addresses, vni_base)
        net = FabricNet(parsed, topo=part.partition.topo, part=part)
        try:
            net.build()
            net.start()
        except BaseException:
            net.stop()
            raise
        self.net = net
        self.outbox = Outbox(net.inventory.state_dir / MIRROR)
        self.reader = Reader(self.machine, str(net.inventory.state_dir))
        return {"cpu": asdict(CpuTimes.now()), "run_id": net.run_id, "state_dir": str(net.inventory.state_dir),
                "datapath": net.describe_datapath(),
                "bring_up_s": round(net.timings.total, 3), "switches": len(net.switches), "hosts": len(net.hosts)}

    def probes_open(self, hosts: list[str]) -> dict:
        self.probes_close()
        self.probes = self.net.probes([h for h in hosts if h in self.net.nameToNode])
        return {}

    def probes_send(self, sends: list[list]) -> dict:
        """Sends in order; returns the indexes of those the NIC's queue refused (to send again)."""
        refused = [i for i, (src, dst_ip, path_id) in enumerate(sends) if not self.probes.send(src, dst_ip, path_id)]
        return {"refused": refused}

    def probes_drain(self, timeout: float) -> dict:
        heard: Counter = Counter()
        self.probes.drain(heard, timeout)
        return {"heard": [[host, src, pid, count] for (host, src, pid), count in heard.items()]}

    def probes_close(self) -> dict:
        if self.probes is not None:
            self.probes.close()
            self.probes = None
        return {}

    def port_counters(self) -> dict:
        return {"counters": [[switch, port, rx, tx] for (switch, port), (rx, tx) in self.net.port_counters().items()]}

    # A block's hosts (machines/remote.py is the controller's side) -------------------------------

    def spawn(self, id: int, host: str, argv: list[str], stdin: bool, log: str, root: str,
              files: dict[str, str]) -> dict:
        """Starts host `host`'s transport (this machine's cchost: argv[0] is the controller's) with
        the controller's paths under `root` mapped to this machine's mirror, the files it reads
        written there first, its output in `log` (mapped)."""
        from ..programs.cchost import cchost_binary

        controller_root, mirror = Path(root), self.outbox.mirror
        for path, content in files.items():
            target = Path(mapped(path, controller_root, mirror))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(base64.b64decode(content))
        args = [mapped(arg, controller_root, mirror) for arg in argv[1:]]
        for arg in args + [mapped(log, controller_root, mirror)]:
            if arg.startswith(str(mirror)):
                Path(arg).parent.mkdir(parents=True, exist_ok=True)
        with open(mapped(log, controller_root, mirror), "wb") as out:
            self.procs[id] = self.net[host].popen_transport(
                [str(cchost_binary()), *args], stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT)
        return {"pid": self.procs[id].pid}

    def write(self, id: int, data: str) -> dict:
        """One-way (ONE_WAY): a cchost that no longer reads its input has ended, which the
        controller's next collect says."""
        try:
            self.procs[id].stdin.write(base64.b64decode(data))
            self.procs[id].stdin.flush()
        except (BrokenPipeError, ValueError):
            pass
        return {}

    def close_stdin(self, id: int) -> dict:
        if self.procs[id].stdin:
            try:
                self.procs[id].stdin.close()
            except OSError:
                pass
        return {}

    def signal(self, id: int, signum: int) -> dict:
        if self.procs[id].poll() is None:
            self.procs[id].send_signal(signum)
        return {}

    def collect(self) -> dict:
        """What the hosts wrote since the last call, and every process's exit status (None: it
        runs): the controller's poll of all of them at once (machines/remote.py)."""
        return {"changes": self.outbox.changes(),
                "returncodes": {str(i): proc.poll() for i, proc in self.procs.items()}}

    def idle_rtts(self, pairs: list[list[str]]) -> dict:
        measured = self.net.idle_rtts([tuple(pair) for pair in pairs])
        return {"rtts": [[src, dst, rtt] for (src, dst), rtt in measured.items()]}

    def ports_drained(self) -> dict:
        return self.reader.ports_drained()

    def tunnel_rtts(self, addresses: dict[str, str], size: int) -> dict:
        """Round trips (us) to each machine of `addresses` this one tunnels to (fabric/tunnels.py)."""
        from ..fabric.tunnels import tunnel_rtts_us

        return {"rtts_us": {far: tunnel_rtts_us(addresses[far], size) for far in self.net.part.far_machines()}}

    def tunnel_watch(self, addresses: dict[str, str], size: int) -> dict:
        """Starts measuring round trips to each machine this one tunnels to until tunnel_watched."""
        from ..fabric.tunnels import TunnelWatch

        self._stop_watch()
        self.watch = TunnelWatch({far: addresses[far] for far in self.net.part.far_machines()}, size)
        return {}

    def tunnel_watched(self) -> dict:
        """The round trips (us) measured since tunnel_watch, per far machine."""
        return {"rtts_us": self._stop_watch()}

    def _stop_watch(self) -> dict[str, list[float]]:
        watch, self.watch = self.watch, None
        return watch.stop() if watch is not None else {}

    def tunnel_counters(self) -> dict:
        """The frames each of this machine's tunnels sent to the network and took from it, by key
        (fabric/tunnels.py tunnel_counters)."""
        from ..fabric.tunnels import tunnel_counters

        if self.net.wire_namespace is None:
            return {"counters": {}}
        return {"counters": tunnel_counters(self.net.wire_namespace)}

    def clock(self) -> dict:
        """This machine's CLOCK_MONOTONIC (cchost's clock: --epoch-ns counts on it)."""
        return {"now_ns": time.monotonic_ns()}

    def cpu(self) -> dict:
        return {"cpu": asdict(CpuTimes.now())}

    def _stop_procs(self) -> None:
        stop_all(self.procs.values())
        self.procs.clear()

    def down(self) -> dict:
        self._stop_watch()
        if self.reader is not None:
            self.reader.down()
            self.reader = None
        self._stop_procs()
        self.probes_close()
        if self.net is None:
            return {"stopped": {}}
        net, self.net = self.net, None
        net.stop()
        return {"stopped": {"teardown_s": round(net.stop_timings.total, 3)}}


def _own_capacity(config) -> list:
    """[faithful rate per link in Mbit/s, where it comes from] of this machine for `config`'s
    fabric: what `ccemu bench capacity` measured here (results/ of its build root, where the
    benchmark writes when run there), else its datapath's default (auto resolves on each machine)."""
    from ..bench.capacity import faithful_here

    rates = faithful_here(config.fabric, BUILD_ROOT / "results")
    return [rates.link_mbps, rates.source]


class Reader:
    """A machine's second channel (`ccemu part --reader STATE_DIR`), for the controller's scrapes:
    the ports' figures and the CPU's, read from the part's run folder (the maps its port programs
    pin there), so that a scrape never waits behind the runner's requests on the part's channel,
    nor they behind it. It changes nothing."""

    REQUESTS = ("ports", "ports_drained", "cpu", "down")

    def __init__(self, machine: str, state_dir: str):
        from ..fabric.inventory import DEFAULT_STATE_ROOT

        self.machine = machine
        self.state_dir = Path(state_dir)
        # The controller names a run folder of this machine's state root: nothing else is read.
        if self.state_dir.parent != DEFAULT_STATE_ROOT or self.state_dir.is_symlink() or not self.state_dir.is_dir():
            raise ValueError(f"{state_dir!r} is no run folder of {DEFAULT_STATE_ROOT}")
        self.maps = None

    def _maps(self):
        """The ports' maps, opened at the first reading and kept until down."""
        if self.maps is None:
            from ..ports.maps import PortMaps

            self.maps = PortMaps(self.state_dir)
        return self.maps

    def ports(self) -> dict:
        return {"ports": [asdict(port) for port in self._maps().read()]}

    def ports_drained(self) -> dict:
        """The ports once the traffic stopped and their queues drained (PortMaps.read_drained)."""
        maps = self._maps()
        return {"ports": [asdict(port) for port in maps.read_drained()], "frame_ns": maps.frame_ns}

    def cpu(self) -> dict:
        return {"cpu": asdict(CpuTimes.now())}

    def down(self) -> dict:
        if self.maps is not None:
            self.maps.close()
            self.maps = None
        return {}


def serve(part: "Part | Reader", requests: TextIO, replies: TextIO) -> None:
    machine = part.machine
    allowed = part.REQUESTS
    try:
        for line in requests:
            request = json.loads(line)
            op = request.pop("op")
            try:
                if op not in allowed:
                    raise ValueError(f"unknown request {op!r}")
                reply = getattr(part, op)(**request)
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # one line to the controller; the part stays as it was
                reply = {"error": f"{machine}: {' '.join(str(exc).split()) or type(exc).__name__}"}
            if op in ONE_WAY:
                if "error" in reply:
                    print(f"ccemu part: {op}: {reply['error']}", file=sys.stderr, flush=True)
                continue
            replies.write(json.dumps(reply) + "\n")
            replies.flush()
            if op == "down" and "error" not in reply:
                return
    finally:
        part.down()  # the controller went away (stdin ended), or a signal: tear down what was built


def main(machine: str, reader: str | None = None) -> int:
    """`ccemu part --machine NAME [--reader STATE_DIR]`: serve on stdin/stdout until told to stop."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to stderr, not into the channel
    # The CLI unwinds on SIGINT and SIGTERM (interrupts.py); a hang-up from a lost session too.
    signal.signal(signal.SIGHUP, signal.getsignal(signal.SIGTERM))
    serve(Part(machine) if reader is None else Reader(machine, reader), sys.stdin, replies)
    return 0
