"""Where the forwarding CPU goes (`ccemu bench capacity --profile`): perf samples every CPU while a
capacity run's flows are up, and each sample is counted twice, by the process it ran in (the OVS
daemons, the hosts' programs, idle, the rest) and by what code ran (the kernel, the memory
allocator, the rest of libc, OVS's own code, the port programs). The kernel share of ovs-vswitchd
includes the softirq work that runs in its context (the receiving hosts' TCP among it), which is why
it is counted by process first. With the port counters of the same window this gives the CPU one
packet costs at one switch hop, the figure every change to the forwarding path is judged by.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE_HZ = 999  # not a multiple of the kernel's tick, so sampling does not lock step with timers
TOP_SYMBOLS = 12
KINDS = ("kernel", "allocator", "libc", "ovs", "port programs", "other")
MIN_SHARE = 0.005  # a process with less of all the samples is counted under REST
REST = "the rest"
OVS = "ovs-vswitchd (the fabric's)"  # another ovs-vswitchd on the machine is named by its comm alone
IDLE = "idle"

# glibc's allocator entry points and internals (malloc.c); other allocators are told by their library.
_GLIBC_ALLOCATOR = re.compile(r"^(__libc_)?(malloc|free|cfree|calloc|realloc|memalign|posix_memalign)(@.*)?$|"
                              r"^(_int_malloc|_int_free|_int_realloc|_int_memalign|unlink_chunk|malloc_consolidate|"
                              r"tcache_\w+|sysmalloc|systrim|alloc_perturb|arena_get2)")
_ALLOCATOR_LIBRARIES = ("libjemalloc", "libtcmalloc", "libmimalloc")
_OVS_LIBRARIES = ("ovs-vswitchd", "libopenvswitch", "libofproto", "libsflow")
# perf script -F pid,tid,comm,ip,sym,dso:  "  ovs-vswitchd 31163/31163  7f00b3faf9d7 malloc (/usr/lib/.../libc.so.6)"
_SAMPLE = re.compile(r"^\s*(?P<comm>.+?)\s+(?P<pid>\d+)/(?P<tid>\d+)\s+(?P<ip>[0-9a-f]+)\s+(?P<sym>.*?)\s+"
                     r"\((?P<dso>[^()]*)\)\s*$")


CPU_CLOCK_CAVEAT = (" No hardware PMU: time spent with interrupts off is counted where they are turned back on "
                    "(handle_softirqs, _raw_spin_unlock_irqrestore), so kernel symbols' own shares are not exact.")


class ProfileError(RuntimeError):
    pass


def kind_of(sym: str, dso: str) -> str:
    """What code a sample ran: one of KINDS."""
    if sym.startswith("bpf_prog_"):
        return "port programs"
    if dso == "[kernel.kallsyms]" or dso.startswith("[kernel") or dso.endswith(".ko"):
        return "kernel"
    library = dso.rsplit("/", 1)[-1]
    if library.startswith(_ALLOCATOR_LIBRARIES) or (library.startswith("libc.so") and _GLIBC_ALLOCATOR.match(sym)):
        return "allocator"
    if library.startswith("libc.so"):
        return "libc"
    if library.startswith(_OVS_LIBRARIES):
        return "ovs"
    return "other"


@dataclass
class Breakdown:
    """Samples of every CPU over one window, by process and by kind of code."""

    samples: int = 0
    event: str = ""  # what perf sampled on (sampling_event)
    by_process: dict[str, Counter] = field(default_factory=dict)  # process -> kind -> samples
    ovs_symbols: Counter = field(default_factory=Counter)  # "sym (library)" -> samples, ovs-vswitchd's

    @classmethod
    def of_script(cls, lines, ovs_pids: set[int], event: str = "") -> "Breakdown":
        """From `perf script -F pid,tid,comm,ip,sym,dso` output; `ovs_pids`: the ovs-vswitchd
        processes (their threads have other names: handler, revalidator, urcu)."""
        out = cls(event=event)
        for line in lines:
            sample = _SAMPLE.match(line)
            if sample is None:
                continue
            pid, sym, dso = int(sample["pid"]), sample["sym"], sample["dso"]
            process = OVS if pid in ovs_pids else IDLE if pid == 0 else sample["comm"]
            kind = kind_of(sym, dso)
            out.samples += 1
            out.by_process.setdefault(process, Counter())[kind] += 1
            if process == OVS:
                out.ovs_symbols[f"{sym or '[unknown]'} ({dso.rsplit('/', 1)[-1]})"] += 1
        return out

    def share(self, process: str) -> float:
        """Of every sample (all CPUs), the share that ran in `process`."""
        return sum(self.by_process.get(process, Counter()).values()) / self.samples if self.samples else 0.0

    def kinds(self, process: str) -> dict[str, float]:
        """Of `process`'s samples, the share of each kind of code."""
        counts = self.by_process.get(process, Counter())
        total = sum(counts.values())
        return {kind: counts[kind] / total if total else 0.0 for kind in KINDS}

    def busiest(self, least: float = MIN_SHARE) -> list[str]:
        """ovs-vswitchd first, then the processes with at least `least` of the samples, most first,
        then idle; the rest are counted together under REST."""
        others = sorted((p for p in self.by_process if p not in (OVS, IDLE) and self.share(p) >= least),
                        key=lambda p: -sum(self.by_process[p].values()))
        return [p for p in [OVS, *others, IDLE] if p in self.by_process]

    def to_json(self) -> dict:
        shown = self.busiest()
        rest = sum((self.by_process[p] for p in self.by_process if p not in shown), Counter())
        rows = {p: self.by_process[p] for p in shown} | ({REST: rest} if rest else {})
        return {"samples": self.samples, "event": self.event,
                "processes": {p: {"share": round(sum(c.values()) / self.samples, 4),
                                  "kinds": {k: round(c[k] / sum(c.values()), 4) for k in KINDS}}
                              for p, c in rows.items()},
                "ovs_top_symbols": [[s, round(n / max(1, sum(self.ovs_symbols.values())), 4)]
                                    for s, n in self.ovs_symbols.most_common(TOP_SYMBOLS)]}


def table(run: dict, title: str) -> str:
    """Markdown of one capacity run's profile (its "profile", "cpu_us_per_packet_hop", "packet_hops")."""
    profile, per_hop = run["profile"], run["cpu_us_per_packet_hop"]
    machine = run.get("machine_cpu_us_per_packet_hop")
    hops = f"({run['packet_hops']} packet-hops)"
    if per_hop is not None:
        cost = f"OVS daemons: **{per_hop:.1f} us of CPU per packet per switch hop** {hops}"
    elif machine is not None:  # the bpf datapath forwards in whichever context a packet arrives
        cost = f"no OVS daemon (the bpf datapath); every CPU: **{machine:.1f} us per packet per switch hop** {hops}"
    else:
        cost = "OVS daemons: no packet-hops counted (port programs detached)"
    lines = [f"### {title}", "",
             f"{profile['samples']} samples ({profile['event']}) at {SAMPLE_HZ} Hz on every CPU; {cost}."
             + (CPU_CLOCK_CAVEAT if profile["event"] == "cpu-clock" else ""), "",
             "| process | share of all CPUs | " + " | ".join(KINDS) + " |", "|---" * (len(KINDS) + 2) + "|"]
    for process, seen in profile["processes"].items():
        lines.append(f"| {process} | {seen['share']:.1%} | "
                     + " | ".join(f"{seen['kinds'][k]:.0%}" for k in KINDS) + " |")
    if profile["ovs_top_symbols"]:
        lines += ["", "ovs-vswitchd's top symbols: " + ", ".join(f"{s} {share:.1%}" for s, share in
                                                                   profile["ovs_top_symbols"])]
    return "\n".join(lines + [""])


def perf_binary() -> str:
    """The perf binary, or a ProfileError saying how to get one."""
    perf = shutil.which("perf")
    if perf is None:
        raise ProfileError("perf is not installed (Debian: apt-get install linux-perf): no profile can be taken")
    return perf


def sampling_event(devices: Path = Path("/sys/bus/event_source/devices")) -> str:
    """"cycles" where the CPU has a performance-monitoring unit perf can use; "cpu-clock" on virtual
    machines without one (as here): a timer interrupt samples, so time spent with interrupts off is
    counted where they are turned back on (handle_softirqs, _raw_spin_unlock_irqrestore). Per process
    and per kind of code the counts still hold; a kernel symbol's own share does not."""
    return "cycles" if any((devices / pmu).exists() for pmu in ("cpu", "cpu_core", "armv8_pmuv3")) else "cpu-clock"


class Recording:
    """`perf record -a` for `seconds`, started by `start` (with the run's inventory, so a killed
    benchmark's perf is stopped by `ccemu clean`) and read by `breakdown`."""

    def __init__(self, out: Path, seconds: float):
        self.out, self.seconds, self.proc, self.event = out, seconds, None, ""

    def start(self, spawn) -> None:
        """`spawn(what, argv, **popen_kwargs)`: Inventory.spawn."""
        self.event = sampling_event()
        argv = [perf_binary(), "record", "-a", "-e", self.event, "-F", str(SAMPLE_HZ), "-o", str(self.out), "--",
                "sleep", f"{self.seconds:g}"]
        self.proc = spawn("perf record", argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def breakdown(self, ovs_pids: set[int]) -> Breakdown:
        _, err = self.proc.communicate(timeout=self.seconds + 60)
        if self.proc.returncode != 0:
            raise ProfileError(f"perf record failed ({' '.join(err.decode(errors='replace').split())[-300:]})")
        script = subprocess.run([perf_binary(), "script", "-i", str(self.out), "-F", "pid,tid,comm,ip,sym,dso"],
                                capture_output=True, text=True, errors="replace", timeout=600)
        if script.returncode != 0:
            raise ProfileError(f"perf script failed ({' '.join(script.stderr.split())[-300:]})")
        self.out.unlink(missing_ok=True)
        return Breakdown.of_script(script.stdout.splitlines(), ovs_pids, self.event)
