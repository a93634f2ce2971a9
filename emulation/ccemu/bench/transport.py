"""What cchost costs and how well it paces (`ccemu bench transport`), beside kernel TCP in the same run.

1. Goodput of one 20 MB flow h1 -> h2 across a 2-host star (shaped ports, port programs), as a share
   of ideal (the link's data share x 1450/1538), for ExpressPass and DCTCP, next to kernel TCP (iperf3)
   on the same fabric: what the fabric itself carries. And the credit pacing error: how late the
   ExpressPass receiver's timers fired (p50, p99, mean, max), the p99 as a share of the credit gap
   (~130 us at 100 Mbit/s).
2. CPU seconds per GB, both ends together (the processes' rusage), 500 MB over one unshaped veth
   pair, cchost next to iperf3, with each end's sleeps (voluntary context switches) per packet.
3. Idle hosts: `--idle-hosts N` cchosts (default 256) with no flows in one namespace, each on an address
   of its own: the share of the machine's CPUs they take together over 10 s (what a large fabric's
   hosts cost before any traffic).
4. With `--profile`: the same transfers again under perf (every CPU sampled, call stacks): what
   cchost's CPU went to (bench/profile.py's transport breakdown), and its system calls per packet.

`--spin-us A B ...` runs every case once per cchost --spin-us value, in turn: an A/B in one sitting.
Written to RESULTS/transport/TIME/ (transport.md, transport.json).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from . import profile
from ..results.markdown import cell, table

FLOW_BYTES = 20_000_000
CPU_BYTES = 500_000_000
CPU_LINK_MBPS = 1000  # what cchost paces for on the unshaped pair (ExpressPass's credits)
PAYLOAD_EFFICIENCY = 1450 / 1538  # cchost's payload per wire frame
TCP_EFFICIENCY = 1448 / 1538
CREDIT_FRAME_BYTES = 84
CREDIT_SHARE = CREDIT_FRAME_BYTES / (CREDIT_FRAME_BYTES + 1538)
SCHEMES = {
    "expresspass": {"profile": "expresspass"},
    "dctcp": {"profile": "dctcp", "ecn_threshold_bytes": 30_000, "buffer_bytes": 150_000},
}
DEFAULT_RATES = (100, 50)
TRANSPORT_DIR = "transport"


def credit_gap_us(link_mbps: float) -> float:
    """A credit frame every this many us when credits leave at the credit share of the link."""
    return CREDIT_FRAME_BYTES * 8 / (link_mbps * CREDIT_SHARE)


def _wait(proc) -> os.struct_rusage:
    """Waits for a child (the command itself: Mininet's mnexec execs it in place); its rusage."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{proc.args} exited {proc.returncode}")
    return usage


def _cpu(usage: os.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def cchost_transfer(net, workdir: Path, scheme: str, link_mbps: float, size: int, spin_us: float,
                    counted: Path | None = None) -> dict:
    """One flow h1 -> h2: its record, the receiver's counters, CPU seconds and sleeps of both ends, and
    the packets of the transfer (the receiver's sent and received: each packet once); with `counted`
    (a directory), each end's system calls too, counted by `perf stat`."""
    from ..programs.cchost import ScheduledFlow, command, write_schedule
    from ..results.records import read_counters, read_records

    workdir.mkdir(parents=True, exist_ok=True)
    schedule = write_schedule(workdir / "h1.flows", [ScheduledFlow(id=1, dst=2, size=size, start=0.2)])
    epoch = time.monotonic_ns()
    spin = ("--spin-us", str(spin_us))

    receiver = net["h2"].popen(command("h2", link_mbps, scheme, epoch, workdir, duration_s=120, extra=spin))
    sender = net["h1"].popen(command("h1", link_mbps, scheme, epoch, workdir, schedule=schedule,
                                     exit_when_done=True, extra=("--linger", "0.2", *spin)))
    # Counted from this namespace, attached by pid: a host's mount namespace has no tracefs. The few
    # system calls before perf attaches (the flow starts 0.2 s later) are not counted.
    counting = [_count_syscalls(proc.pid, counted / f"{host}.stat")
                for host, proc in (("h1", sender), ("h2", receiver))] if counted is not None else []
    sent = _wait(sender)
    receiver.terminate()
    received = _wait(receiver)
    for perf in counting:
        perf.wait(timeout=30)  # perf stat -p ends with the process it counts
    (record,) = read_records(workdir / "h1.records")
    counters = read_counters(workdir / "h2.counters")
    packets = sum(counters["sent_packets"].values()) + sum(counters["received_packets"].values())
    out = {"record": record, "counters": counters, "cpu_s": _cpu(sent) + _cpu(received),
           "sleeps": sent.ru_nvcsw + received.ru_nvcsw, "packets": packets}
    if counted is not None:
        out["syscalls"] = sum(_syscalls(counted / f"{host}.stat") for host in ("h1", "h2"))
    return out


def _count_syscalls(pid: int, out: Path) -> subprocess.Popen:
    return subprocess.Popen([profile.perf_binary(), "stat", "-x", ",", "-e", "raw_syscalls:sys_enter", "-p", str(pid),
                             "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _syscalls(stat: Path) -> int:
    """raw_syscalls:sys_enter's count from a `perf stat -x ,` file."""
    for line in stat.read_text().splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("raw_syscalls:sys_enter"):
            return int(fields[0])
    raise profile.ProfileError(f"perf stat counted no system calls ({stat.name})")


def iperf3_transfer(net, size: int | None = None, seconds: int = 5) -> tuple[float, float]:
    """Kernel TCP h1 -> h2; returns (bits/s received, CPU seconds of both ends)."""
    server = net["h2"].popen(["iperf3", "-s", "-1", "-B", net["h2"].IP()])
    time.sleep(0.5)
    amount = ["-n", str(size)] if size else ["-t", str(seconds)]
    client = net["h1"].popen(["iperf3", "-c", net["h2"].IP(), "-J", *amount])
    out = client.stdout.read()
    cpu = _cpu(_wait(client)) + _cpu(_wait(server))
    return json.loads(out)["end"]["sum_received"]["bits_per_second"], cpu


def goodput_on_the_fabric(rates, repeat: int, spins) -> list[dict]:
    from ..fabric.net import FabricNet
    from ..model.config import parse_config

    rows = []
    print(f"1. one {FLOW_BYTES // 10**6} MB flow across a 2-host star; ratio = goodput / ideal", flush=True)
    print(f"{'Mbit/s':>7} {'run':>3} {'spin us':>7} {'expresspass':>11} {'dctcp':>6} {'iperf3 TCP':>10}   credit "
          f"timer late: p50 / p99 / mean / max us (p99 / credit gap)", flush=True)
    for rate, run, spin_us in itertools.product(rates, range(1, repeat + 1), spins):
        row = {"rate_mbps": rate, "run": run, "spin_us": spin_us}
        for scheme, port in SCHEMES.items():
            config = parse_config({"name": f"bench-{scheme}", "topology": {"kind": "star", "hosts": 2},
                                   "link": {"rate_mbps": rate}, "port": port})
            with tempfile.TemporaryDirectory(prefix="ccemu-bench-") as tmp, \
                    FabricNet(config, state_root=Path(tmp)) as net:
                moved = cchost_transfer(net, Path(tmp) / "work", scheme, rate, FLOW_BYTES, spin_us)
                share = 1 - CREDIT_SHARE if scheme == "expresspass" else 1
                row[scheme] = FLOW_BYTES / moved["record"]["fct"] / (rate * 1e6 / 8 * PAYLOAD_EFFICIENCY * share)
                if scheme == "expresspass":
                    row["lateness"] = moved["counters"]["timer_lateness"]
                else:
                    bps, _ = iperf3_transfer(net)
                    row["iperf3"] = bps / (rate * 1e6 * TCP_EFFICIENCY)
        row["p99_of_gap"] = row["lateness"]["p99_us"] / credit_gap_us(rate)
        rows.append(row)
        print(goodput_line(row), flush=True)
    return rows


def _lateness(late: dict) -> str:
    """p50 / p99 / mean / max, in us."""
    return " / ".join(f"{late[key]:.0f}" for key in ("p50_us", "p99_us", "mean_us", "max_us"))


def goodput_line(row: dict) -> str:
    return (f"{row['rate_mbps']:7g} {row['run']:3d} {row['spin_us']:7g} {row['expresspass']:11.3f} "
            f"{row['dctcp']:6.3f} {row['iperf3']:10.3f}   {_lateness(row['lateness'])} us ({row['p99_of_gap']:.0%})")


def cpu_per_gigabyte(spins, profile_dir: Path | None) -> tuple[list[dict], dict]:
    """Rows of CPU per GB (cchost per scheme and spin, then iperf3); with `profile_dir`, each cchost
    case again under perf: {"scheme spin": breakdown} (bench/profile.py TransportBreakdown's json)."""
    from mininet.net import Mininet

    from ..fabric.net import quiet_mininet

    quiet_mininet()
    rows, profiles = [], {}
    print(f"2. CPU seconds per GB, both ends, {CPU_BYTES // 10**6} MB over one unshaped veth pair", flush=True)
    net = Mininet(controller=None, autoStaticArp=True)
    try:
        h1, h2 = net.addHost("h1"), net.addHost("h2")
        net.addLink(h1, h2)
        net.start()
        with tempfile.TemporaryDirectory(prefix="ccemu-bench-") as tmp:
            for scheme, spin_us in itertools.product(SCHEMES, spins):
                moved = cchost_transfer(net, Path(tmp) / f"{scheme}-{spin_us:g}", scheme, CPU_LINK_MBPS, CPU_BYTES,
                                        spin_us)
                row = {"program": f"cchost {scheme}", "spin_us": spin_us, **_per_gigabyte(moved)}
                rows.append(row)
                print(cpu_line(row), flush=True)
                if profile_dir is not None:
                    profiles[f"{scheme} spin {spin_us:g}"] = _profiled(net, Path(tmp), scheme, spin_us, profile_dir)
        bps, cpu = iperf3_transfer(net, size=CPU_BYTES)
        rows.append({"program": "iperf3 TCP", "spin_us": None, "cpu_s_per_gb": cpu / (CPU_BYTES / 1e9),
                     "mbps": bps / 1e6})
        print(cpu_line(rows[-1]), flush=True)
    finally:
        net.stop()
    return rows, profiles


def _per_gigabyte(moved: dict) -> dict:
    size, fct = moved["record"]["size"], moved["record"]["fct"]
    packets = moved["packets"]
    # Per packet too: ExpressPass and DCTCP move the same packets (a credit or an ACK per data
    # packet), so what one costs more per packet is its pacing, not the kernel's UDP path.
    return {"cpu_s_per_gb": moved["cpu_s"] / (size / 1e9), "mbps": size * 8 / fct / 1e6,
            "cpu_us_per_packet": moved["cpu_s"] / packets * 1e6 if packets else None,
            "sleeps_per_packet": moved["sleeps"] / packets if packets else None}


def cpu_line(row: dict) -> str:
    spin = f"spin {row['spin_us']:4g} us" if row["spin_us"] is not None else " " * 12
    per_packet = row.get("cpu_us_per_packet")
    sleeps = (f", {per_packet:.1f} CPU us and {row['sleeps_per_packet']:.2f} sleeps per packet"
              if per_packet is not None else "")
    paced = f" (credits paced for {CPU_LINK_MBPS:g} Mbit/s)" if row["program"] == "cchost expresspass" else ""
    return (f"  {row['program']:20} {spin} {row['cpu_s_per_gb']:6.2f} CPU s/GB at {row['mbps']:.0f} Mbit/s"
            f"{sleeps}{paced}")


def _profiled(net, tmp: Path, scheme: str, spin_us: float, profile_dir: Path) -> dict:
    """The CPU case again, under `perf record -a -g` and with each end's system calls counted."""
    counted = tmp / f"stat-{scheme}-{spin_us:g}"
    counted.mkdir()
    recording = profile.Recording(profile_dir / f"{scheme}-{spin_us:g}.data", seconds=None, call_graph=True)
    recording.start(lambda what, argv, **kwargs: subprocess.Popen(argv, **kwargs))
    try:
        moved = cchost_transfer(net, tmp / f"profiled-{scheme}-{spin_us:g}", scheme, CPU_LINK_MBPS, CPU_BYTES,
                                spin_us, counted=counted)
    except BaseException:
        recording.stop()
        recording.proc.communicate(timeout=60)  # perf ends on SIGINT: nothing is left running
        raise
    recording.stop()
    breakdown = recording.transport_breakdown()
    out = breakdown.to_json() | {"syscalls_per_packet": moved["syscalls"] / moved["packets"],
                                 "sleeps_per_packet": moved["sleeps"] / moved["packets"]}
    print(profile.transport_table(out, f"cchost {scheme}, spin {spin_us:g} us"), flush=True)
    return out


IDLE_SECONDS = 10.0


def idle_hosts(count: int, spin_us: float) -> dict:
    """`count` cchosts with no flows in one namespace (addresses of their own on its loopback), after
    2 s to settle: the share of every CPU they took together over IDLE_SECONDS."""
    from mininet.net import Mininet

    from ..fabric.net import quiet_mininet
    from ..model.topology import host_addresses
    from ..programs.cchost import command

    quiet_mininet()
    net = Mininet(controller=None)
    procs = []
    # Stopped before their directory is removed (they rewrite their counters until they exit).
    with tempfile.TemporaryDirectory(prefix="ccemu-bench-") as tmp:
        try:
            node = net.addHost("h1")
            net.start()
            addresses = "".join(f"address add {host_addresses(i)[0]}/32 dev lo\n" for i in range(1, count + 1))
            adding = node.popen(["ip", "-batch", "-"], stdin=subprocess.PIPE)
            adding.communicate(addresses.encode())
            if adding.returncode:
                raise RuntimeError(f"adding {count} addresses in {node.name} failed")
            epoch = time.monotonic_ns()
            for i in range(1, count + 1):
                procs.append(node.popen(command(f"h{i}", 100, "expresspass", epoch, Path(tmp),
                                                extra=("--spin-us", str(spin_us)))))
            time.sleep(2)
            before = sum(_on_cpu_s(p.pid) for p in procs)
            time.sleep(IDLE_SECONDS)
            cpu = sum(_on_cpu_s(p.pid) for p in procs) - before
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait()
            net.stop()
    share = cpu / IDLE_SECONDS / (os.cpu_count() or 1)
    print(f"3. {count} idle cchosts, spin {spin_us:g} us: {share:.1%} of the machine's {os.cpu_count()} CPUs "
          f"together ({cpu / IDLE_SECONDS / count * 1e6:.0f} us of CPU per host per second)", flush=True)
    return {"hosts": count, "spin_us": spin_us, "seconds": IDLE_SECONDS, "cpu_share_of_machine": share,
            "cpus": os.cpu_count()}


def _on_cpu_s(pid: int) -> float:
    """Seconds `pid` has run (/proc/PID/schedstat, in ns: rusage and /proc/PID/stat count in 10 ms
    ticks, which an idle process's few hundred us a second stay under)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rates", type=float, nargs="+", default=list(DEFAULT_RATES), metavar="MBPS",
                        help="link rates of the goodput and pacing runs")
    parser.add_argument("--repeat", type=int, default=2, help="goodput and pacing runs per rate")
    parser.add_argument("--spin-us", type=float, nargs="+", default=None, metavar="US",
                        help="cchost --spin-us values, every case run once per value in turn (an A/B in one "
                             "sitting; default: cchost's own default)")
    parser.add_argument("--profile", action="store_true",
                        help="run the CPU cases again under perf: what cchost's CPU went to, system calls and sleeps "
                             "per packet")
    parser.add_argument("--idle-hosts", type=int, default=256, metavar="N",
                        help="idle cchosts whose CPU is measured together (0: not measured)")
    parser.add_argument("--results", type=Path, default=Path("results"), help="written to RESULTS/transport/TIME")


def run(args) -> Path:
    if args.repeat < 1 or any(r <= 0 for r in args.rates):
        raise SystemExit("ccemu bench transport: --repeat must be >= 1 and every --rates value > 0")
    if not 0 <= args.idle_hosts <= 65535:
        raise SystemExit(f"ccemu bench transport: --idle-hosts {args.idle_hosts}: must be from 0 to 65535")
    if args.profile:
        try:
            profile.perf_binary()
        except profile.ProfileError as exc:
            raise SystemExit(f"ccemu bench transport --profile: {exc}") from None
    spins = args.spin_us if args.spin_us is not None else [default_spin_us()]
    if any(not 0 <= s <= 1e6 for s in spins):
        raise SystemExit("ccemu bench transport: every --spin-us value must be from 0 to 1e6")
    out = args.results / TRANSPORT_DIR / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="ccemu-perf-") as scratch:
        goodput = goodput_on_the_fabric(args.rates, args.repeat, spins)
        cpu, profiles = cpu_per_gigabyte(spins, Path(scratch) if args.profile else None)
        idle = [idle_hosts(args.idle_hosts, spin_us) for spin_us in spins] if args.idle_hosts else []
    result = {"goodput": goodput, "cpu": cpu, "idle": idle, "profiles": profiles}
    (out / "transport.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "transport.md").write_text(markdown(result))
    print(f"\nwritten to {out}/transport.md")
    return out


def default_spin_us() -> float:
    """cchost's own --spin-us default, from its help (so the benchmark's label says what ran)."""
    from ..programs.cchost import cchost_binary

    help_text = subprocess.run([str(cchost_binary()), "--help"], capture_output=True, text=True, check=True).stdout
    marker = help_text[help_text.index("--spin-us"):]
    return float(marker[marker.index("[default: ") + 10:].split("]", 1)[0])


def markdown(result: dict) -> str:
    lines = ["# cchost: goodput, pacing and CPU (`ccemu bench transport`)", "",
             "## 1. One 20 MB flow across a 2-host star", "",
             *table(["Mbit/s", "run", "spin us", "expresspass", "dctcp", "iperf3 TCP",
                     "timer late p50 / p99 / mean / max us", "p99 / credit gap"],
                    [[f"{row['rate_mbps']:g}", str(row["run"]), f"{row['spin_us']:g}", f"{row['expresspass']:.3f}",
                      f"{row['dctcp']:.3f}", f"{row['iperf3']:.3f}", _lateness(row["lateness"]),
                      f"{row['p99_of_gap']:.0%}"] for row in result["goodput"]]),
             "", f"## 2. CPU per GB, both ends, {CPU_BYTES // 10**6} MB over one unshaped veth pair", "",
             *table(["program", "spin us", "CPU s/GB", "Mbit/s", "CPU us per packet", "sleeps per packet"],
                    [[row["program"], cell(row["spin_us"], "{:g}", missing=""), f"{row['cpu_s_per_gb']:.2f}",
                      f"{row['mbps']:.0f}", cell(row.get("cpu_us_per_packet"), "{:.1f}", missing=""),
                      cell(row.get("sleeps_per_packet"), "{:.2f}", missing="")] for row in result["cpu"]])]
    if result["idle"]:
        lines += ["", "## 3. Idle hosts: cchosts with no flows, their CPU together", "",
                  *table(["hosts", "spin us", "share of the machine's CPUs", "CPU us per host per second"],
                         [[str(idle["hosts"]), f"{idle['spin_us']:g}",
                           f"{idle['cpu_share_of_machine']:.1%} of {idle['cpus']}",
                           f"{idle['cpu_share_of_machine'] * idle['cpus'] / idle['hosts'] * 1e6:.0f}"]
                          for idle in result["idle"]])]
    for title, breakdown in result["profiles"].items():
        lines += ["", profile.transport_table(breakdown, f"cchost {title}")]
    return "\n".join(lines) + "\n"
