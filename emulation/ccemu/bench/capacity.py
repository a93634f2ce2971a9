"""Forwarding capacity of this machine's emulated fabric (`ccemu bench capacity`, `make bench`).

8 cross-pod kernel-TCP pairs (iperf3, h1..h8 -> h9..h16) on a k=4 fat-tree, each on a path of
its own (programs/tcpload.py), at several link rates, datapaths (fabric.datapath), and for OVS
instance counts and placements (pinned to CPUs or not: fabric/placement.py). Per run: goodput /
ideal per pair (ideal = link rate x 1448/1538, TCP payload per wire frame), ovs-vswitchd CPU
(fraction of one core, summed over instances), hypervisor steal, every CPU's busy time per
packet-hop (the figure that compares datapaths), the idle RTT h1 -> h16 (5 switches), and switch
residence: how
long packets waited inside the switches between ports (p50 and p99 in frame times, and the
p99 of the worst switch, which the fidelity verdict judges) and how many they lost in there.

Then one table, the machine's capacity: the worst pair's ratio per rate and variant, and per
variant the highest rate at which every pair got >= 0.95. Written to RESULTS/capacity/TIME/
(capacity.md, capacity.json); experiments quote the latest one in their summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import profile
from ..model.config.fabric import ALLOCATORS
from ..model.kernel import KernelFeatures
from ..fabric.kernel import probe_kernel
from ..fabric.placement import PIN_FROM_CPUS, usable_cpus
from ..model.config import FabricConfig, default_faithful, parse_config
from ..model.dilation import FaithfulRates
from ..results.fidelity import GOOD
from ..results.markdown import table

if TYPE_CHECKING:  # the fabric's modules load when a benchmark runs, not when the CLI parses its arguments
    from ..fabric.net import FabricNet


DEFAULT_RATES = (5, 10, 15, 25, 50, 75, 100)
DEFAULT_INSTANCES = ("1", "2", "auto")
CAPACITY_DIR = "capacity"
LATEST = "latest"  # RESULTS/capacity/latest: a link to the newest measurement


DEFAULT_ALLOCATOR = FabricConfig.model_fields["ovs_allocator"].default


@dataclass(frozen=True)
class Variant:
    instances: int | str  # a count or "auto"
    pinned: bool
    allocator: str = DEFAULT_ALLOCATOR  # ovs-vswitchd's malloc (fabric.ovs_allocator)
    datapath: str = "ovs"  # fabric.datapath

    @classmethod
    def bpf(cls) -> "Variant":
        """The bpf datapath has no daemon to count, pin or give an allocator: one variant."""
        return cls("auto", False, DEFAULT_ALLOCATOR, "bpf")

    def __str__(self) -> str:
        if self.datapath == "bpf":
            return "bpf"
        named = "" if self.allocator == DEFAULT_ALLOCATOR else f" {self.allocator}"
        return f"{self.instances}{' pinned' if self.pinned else ''}{named}"


def cpu_ticks(pid: int) -> int:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def idle_rtt_ms(net: FabricNet, src: str, dst: str, count: int = 20) -> float:
    host = net[src]
    host.cmd(f"ping -c 2 -i 0.2 {net[dst].IP()}")  # first packets take OVS's slow path
    out = host.cmd(f"ping -c {count} -i 0.05 {net[dst].IP()}")
    rtts = [float(part.split("=")[1]) for part in out.split() if part.startswith("time=")]
    return statistics.median(rtts) if rtts else float("nan")


def detach_port_programs(net: FabricNet) -> None:
    """Take the port programs off every port (HTB then classifies everything as data)."""
    for node_name, ports in net.port_index.items():
        node = next(n for n in net.hosts + net.switch_namespaces if n.name == node_name)
        for port in ports:  # one port a command: a shell line of them all overflows Mininet's
            node.cmd(f"tc filter del dev {port} egress; tc filter del dev {port} ingress")
        left = [port for port in ports for hook in ("egress", "ingress")
                if node.cmd(f"tc filter show dev {port} {hook}").strip()]
        if left:
            raise RuntimeError(f"port programs still attached in {node_name}: {left}")


def run_once(rate_mbps: float, variant: Variant, seconds: float, ovs_options: list[str] = (),
             port_programs: bool = True, profile_to: Path | None = None) -> dict:
    """One capacity run; with `profile_to` (a perf.data path), also where the CPU went while the
    flows ran (bench/profile.py) and the CPU ovs-vswitchd spent per packet per switch hop."""
    from ..fabric.net import FabricNet
    from ..programs.tcpload import PAIRS, TCP_PAYLOAD_PER_WIRE_FRAME, run_pairs
    from ..ports.maps import PortMaps
    from ..ports.stats import switch_packets
    from ..results.fidelity import CpuTimes, SwitchFigures

    config = parse_config({"name": "capacity", "topology": {"kind": "fattree", "k": 4},
                           "link": {"rate_mbps": rate_mbps},
                           "fabric": {"datapath": variant.datapath, "ovs_instances": variant.instances,
                                      "pin_ovs": variant.pinned, "ovs_allocator": variant.allocator}})
    with FabricNet(config) as net:
        for instance in net.instances:
            for option in ovs_options:
                instance.vsctl("set", "Open_vSwitch", ".", f"other_config:{option}")
        if not port_programs:
            detach_port_programs(net)
        rtt = idle_rtt_ms(net, "h1", "h16")
        daemons = [d.pid for inst in net.instances for d in inst.daemons.values()]
        vswitchds = {inst.vswitchd_pid for inst in net.instances}
        recording = profile.Recording(profile_to, seconds) if profile_to else None
        before = {}
        with PortMaps(net.inventory.state_dir) as maps:

            def start_measuring():
                before.update(ovs=sum(cpu_ticks(pid) for pid in daemons), system=CpuTimes.now(),
                              started=time.monotonic(), hops=switch_packets(maps.read())[0])
                if recording:
                    recording.start(net.inventory.spawn)

            results = run_pairs(net, seconds, on_start=start_measuring)
            wall = time.monotonic() - before["started"]
            ovs_seconds = (sum(cpu_ticks(pid) for pid in daemons) - before["ovs"]) / os.sysconf("SC_CLK_TCK")
            hops = switch_packets(maps.read())[0] - before["hops"]
            steal, busy = CpuTimes.now().since(before["system"])
            breakdown = recording.breakdown(vswitchds) if recording else None
            time.sleep(0.5)  # what is still inside a switch arrives
            switches = SwitchFigures.of(maps.read(), maps.frame_ns)
        placement = "kernel (bpf)" if net.forwards_in_bpf else str(net.placement)
    ideal = rate_mbps * TCP_PAYLOAD_PER_WIRE_FRAME
    # Both OVS daemons' CPU over the packets that arrived at a switch port (data and acks), counted by
    # the port programs: none when they are detached. ovsdb-server's share of it is noise.
    per_hop = round(ovs_seconds / hops * 1e6, 2) if hops and daemons else None
    # Every CPU's busy time (hosts' TCP and iperf3 too) over the same packet-hops: the figure that
    # compares datapaths, since the bpf datapath's forwarding runs in whichever context sent.
    machine_per_hop = round(busy * wall * len(usable_cpus()) / hops * 1e6, 2) if hops else None
    return {
        "rate_mbps": rate_mbps, "variant": str(variant), "placement": placement,
        "ratios": [round(results[p] / ideal, 4) for p in PAIRS], "aggregate_mbps": round(sum(results.values()), 1),
        "ovs_cpu": round(ovs_seconds / wall, 3),
        "steal": round(steal, 4),
        "idle_rtt_ms": round(rtt, 3), "residence_p50_frames": round(switches.residence_frames(0.5), 3),
        "residence_p99_frames": round(switches.residence_frames(0.99), 3),
        "worst_switch_p99_frames": round(switches.worst_switch()[1], 3), "switch_lost_packets": switches.lost_packets,
        "cpu_us_per_packet_hop": per_hop, "machine_cpu_us_per_packet_hop": machine_per_hop, "packet_hops": hops,
        **({"profile": breakdown.to_json()} if breakdown else {}),
    }


DETAIL_HEADER = (f"{'variant':>10} {'programs':>8} {'rate Mb/s':>9} {'min':>6} {'median':>6} {'max':>6} "
                 f"{'aggr Mb/s':>9} {'ovs CPU':>7} {'steal':>6} {'idle RTT ms':>11} {'res p50':>7} {'res p99':>7} "
                 f"{'worst sw':>8} {'sw lost':>7} {'us/hop':>6} {'all us/hop':>10}  placement; per-pair ratios")


def detail_line(r: dict, programs: bool = True) -> str:
    ratios = r["ratios"]
    return (f"{r['variant']:>10} {'on' if programs else 'off':>8} {r['rate_mbps']:>9g} {min(ratios):>6.3f} "
            f"{statistics.median(ratios):>6.3f} {max(ratios):>6.3f} {r['aggregate_mbps']:>9.1f} {r['ovs_cpu']:>7.0%} "
            f"{r['steal']:>6.1%} {r['idle_rtt_ms']:>11.2f} {r['residence_p50_frames']:>7.2f} "
            f"{r['residence_p99_frames']:>7.2f} {r['worst_switch_p99_frames']:>8.2f} {r['switch_lost_packets']:>7} "
            f"{_optional(r.get('cpu_us_per_packet_hop')):>6} {_optional(r.get('machine_cpu_us_per_packet_hop')):>10}  "
            f"{r['placement']}; "
            + " ".join(f"{x:.2f}" for x in ratios))


def _optional(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def capacity_of(runs: list[dict], variant: str) -> tuple[float | None, float | None]:
    """(highest rate at which every pair of `variant` got >= GOOD, the aggregate there); rates
    above a failing one do not count (a lucky run past the knee is not capacity)."""
    best = None
    for r in sorted((r for r in runs if r["variant"] == variant), key=lambda r: r["rate_mbps"]):
        if min(r["ratios"]) < GOOD:
            break
        best = r
    return (best["rate_mbps"], best["aggregate_mbps"]) if best else (None, None)


def capacity_table(runs: list[dict], variants: list[str]) -> str:
    """Markdown: the worst pair's ratio per rate (rows) and variant (columns), then each
    variant's capacity."""
    rates = sorted({r["rate_mbps"] for r in runs})
    by = {(r["variant"], r["rate_mbps"]): r for r in runs}
    placements = {r["variant"]: r["placement"] for r in runs}
    cells = [[f"{rate:g}", *(f"{min(by[(v, rate)]['ratios']):.3f}" if (v, rate) in by else "-" for v in variants)]
             for rate in rates]
    capacities = [capacity_of(runs, v) for v in variants]
    cells += [[f"**every pair >= {GOOD} up to**",
               *(f"**{c:g}**" if c else f"below {min(rates):g}" for c, _ in capacities)],
              ["aggregate Mbit/s there", *(f"{a:g}" if a else "-" for _, a in capacities)]]
    return "\n".join(table(["Mbit/s per link", *(f"{v} ({placements.get(v, '?')})" for v in variants)], cells))


def latest(results_root: Path) -> dict | None:
    """The newest capacity measurement under `results_root`, if any (capacity.json's content)."""
    path = results_root / CAPACITY_DIR / LATEST / "capacity.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def variant_of(fabric: FabricConfig, cpus: int, kernel: KernelFeatures | None = None) -> str:
    """The benchmark's name for the placement `fabric` asks for on a machine of `cpus` CPUs (and
    `kernel`'s features: this machine's unless given)."""
    if fabric.forwarder(kernel or probe_kernel()) == "bpf":
        return str(Variant.bpf())
    pinned = fabric.pin_ovs is True or (fabric.pin_ovs == "auto" and cpus >= PIN_FROM_CPUS)
    return str(Variant(fabric.ovs_instances, pinned, fabric.ovs_allocator))


def measurements(results_root: Path) -> list[dict]:
    """Every capacity measurement under `results_root`, newest first (capacity.json's content)."""
    found = []
    for folder in sorted((results_root / CAPACITY_DIR).glob("[0-9]*-[0-9]*"), reverse=True):  # RESULTS/capacity/TIME
        try:
            found.append(json.loads((folder / "capacity.json").read_text()))
        except (OSError, ValueError):
            continue
    return found


def knee_found(measured: dict, variant: str, rate: float) -> bool:
    """Whether `measured` tried `variant` above its capacity `rate`: one whose every rate passed
    (`--rates 25 --profile`, say) only bounds the capacity from below."""
    return any(r["variant"] == variant and r["rate_mbps"] > rate for r in measured.get("runs", []))


def faithful_here(fabric: FabricConfig | None, results_root: Path,
                  kernel: KernelFeatures | None = None) -> FaithfulRates:
    """The faithful rates of `fabric` on this machine: what `ccemu bench capacity` measured under
    `results_root` (faithful_rates), else its datapath's defaults on this kernel (`kernel`: probed
    where not given)."""
    kernel = kernel or probe_kernel()
    return ((faithful_rates(fabric, results_root, kernel=kernel) if fabric is not None else None)
            or default_faithful(fabric, kernel))


def faithful_rates(fabric: FabricConfig, results_root: Path, cpus: int | None = None,
                   kernel: KernelFeatures | None = None) -> FaithfulRates | None:
    """What `dilation: auto` follows on this machine (of `cpus` usable CPUs; unset: this process's):
    the newest capacity measured under `results_root` for the placement `fabric` asks for (its
    instance count, pinned or not, its allocator) with this CPU count, by a run that went past it: a
    later run of the benchmark that measured other placements, or this one at lower rates only, does
    not hide it. None where none was."""
    cpus = len(usable_cpus()) if cpus is None else cpus
    kernel = kernel or probe_kernel()
    variant = variant_of(fabric, cpus, kernel)
    for measured in measurements(results_root):
        rate = (measured.get("capacities", {}).get(variant) or {}).get("rate_mbps")
        if len(measured.get("cpus", [])) == cpus and rate is not None and knee_found(measured, variant, rate):
            return FaithfulRates.of_capacity(rate, f"`ccemu bench capacity` of {measured['when']}, {variant}: every "
                                                   f"pair >= {GOOD} up to {rate:g} Mbit/s per link",
                                             fabric.forwarder(kernel))
    return None


def write(results_root: Path, runs: list[dict], variants: list[str], seconds: float) -> Path:
    from ..programs.tcpload import TCP_PAYLOAD_PER_WIRE_FRAME

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = results_root / CAPACITY_DIR / stamp
    out.mkdir(parents=True)
    capacities = {v: capacity_of(runs, v) for v in variants}
    default = next((v for v in variants if v == variant_of(FabricConfig(), len(usable_cpus()))), variants[-1])
    doc = {"when": time.strftime("%Y-%m-%d", time.gmtime()), "cpus": usable_cpus(), "seconds": seconds,
           "variant": default, "capacity_mbps": capacities[default][0],
           "capacities": {v: {"rate_mbps": c, "aggregate_mbps": a} for v, (c, a) in capacities.items()},
           "runs": runs}
    (out / "capacity.json").write_text(json.dumps(doc, indent=1))
    (out / "capacity.md").write_text(
        f"# Capacity of this machine ({len(usable_cpus())} CPUs), {doc['when']}\n\n"
        f"k=4 fat-tree, 8 cross-pod iperf3 TCP pairs on disjoint paths, {seconds:g} s each. Cells: the worst "
        f"pair's goodput / (rate x {TCP_PAYLOAD_PER_WIRE_FRAME:.4f}). Columns: OVS instances (placement), or the "
        "bpf datapath.\n\n"
        + capacity_table(runs, variants) + "\n\n## Every run\n\n```\n" + DETAIL_HEADER + "\n"
        + "\n".join(detail_line(r) for r in runs) + "\n```\n" + _profiles(runs))
    link = results_root / CAPACITY_DIR / LATEST
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(stamp)
    return out


def _profiles(runs: list[dict]) -> str:
    profiled = [r for r in runs if "profile" in r]
    if not profiled:
        return ""
    tables = [profile.table(r, f"{r['variant']}, {r['rate_mbps']:g} Mbit/s per link") for r in profiled]
    return ("\n## Where the CPU went (perf, `--profile`)\n\nEach run's ratios above were measured with perf "
            "sampling every CPU.\n\n" + "\n".join(tables))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rates", type=float, nargs="+", default=list(DEFAULT_RATES), metavar="MBPS")
    parser.add_argument("--instances", nargs="+", default=list(DEFAULT_INSTANCES), metavar="N|auto")
    parser.add_argument("--pinned", choices=["both", "yes", "no"], default="both",
                        help="OVS instances pinned to CPUs, not, or each variant both ways (default)")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--results", type=Path, default=Path("results"), help="written to RESULTS/capacity/TIME")
    parser.add_argument("--compare-port-programs", action="store_true",
                        help="run every case twice: with the port programs and with them detached")
    parser.add_argument("--ovs-allocator", nargs="+", choices=list(ALLOCATORS), default=[DEFAULT_ALLOCATOR],
                        metavar="NAME", help=f"ovs-vswitchd's memory allocator(s): each a variant of its own "
                                             f"({', '.join(ALLOCATORS)}; default {DEFAULT_ALLOCATOR})")
    parser.add_argument("--profile", action="store_true",
                        help="sample every CPU with perf while the flows run: where the CPU went (by process and "
                             "kernel / allocator / libc / OVS / port programs) and the CPU per packet per switch hop")
    parser.add_argument("--datapath", nargs="+", choices=["ovs", "bpf"], default=["ovs", "bpf"],
                        help="fabric.datapath(s) to measure; bpf is one variant (no daemon to count, pin or give an "
                             "allocator), ovs one per instance count, pinning and allocator")
    parser.add_argument("--ovs-option", action="append", default=[], metavar="KEY=VALUE",
                        help="set Open_vSwitch other_config:KEY=VALUE on every instance (to try tunings)")


def variants_of(args) -> list[Variant]:
    pinned = {"both": (False, True), "yes": (True,), "no": (False,)}[args.pinned]
    found = []
    for text in args.instances:
        if text != "auto" and not (text.isdigit() and 1 <= int(text) <= 64):
            raise SystemExit(f"ccemu bench capacity: --instances {text}: must be 'auto' or a whole number from 1 to 64")
        if "ovs" in args.datapath:
            found += [Variant(text if text == "auto" else int(text), pin, allocator)
                      for pin in pinned for allocator in args.ovs_allocator]
    return found + ([Variant.bpf()] if "bpf" in args.datapath else [])


def run(args) -> Path:
    from ..programs.tcpload import TCP_PAYLOAD_PER_WIRE_FRAME

    variants = variants_of(args)
    if args.profile:
        try:
            profile.perf_binary()
        except profile.ProfileError as exc:
            raise SystemExit(f"ccemu bench capacity --profile: {exc}") from None
    print(f"k=4 fat-tree, 8 cross-pod iperf3 TCP pairs on disjoint paths, {args.seconds:g} s each, "
          f"{len(variants) * len(args.rates)} runs; ratio = goodput / (rate x {TCP_PAYLOAD_PER_WIRE_FRAME:.4f}); "
          f"OVS options: {args.ovs_option or 'none'}", flush=True)
    print(DETAIL_HEADER, flush=True)
    runs = []
    for variant in variants:
        for rate in args.rates:
            for programs in (True, False) if args.compare_port_programs else (True,):
                with tempfile.TemporaryDirectory(prefix="ccemu-perf-") as scratch:
                    r = run_once(rate, variant, args.seconds, args.ovs_option, programs,
                                 profile_to=Path(scratch) / "perf.data" if args.profile else None)
                print(detail_line(r, programs), flush=True)
                if "profile" in r:
                    print(profile.table(r, f"{variant}, {rate:g} Mbit/s per link"), flush=True)
                if programs:
                    runs.append(r)
    names = [str(v) for v in variants]
    out = write(args.results, runs, names, args.seconds)
    print(f"\nCapacity of this machine ({len(usable_cpus())} CPUs): the worst pair's ratio\n")
    print(capacity_table(runs, names))
    print(f"\nwritten to {out}/capacity.md")
    return out
