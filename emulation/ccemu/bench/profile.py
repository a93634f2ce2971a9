"""Where the CPU goes: the forwarding's (`ccemu bench capacity --profile`) and cchost's (`ccemu bench
transport --profile`, `TransportBreakdown` below). For the forwarding: perf samples every CPU while a
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
import signal
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..results import markdown

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
             *markdown.table(["process", "share of all CPUs", *KINDS],
                             [[process, f"{seen['share']:.1%}", *(f"{seen['kinds'][k]:.0%}" for k in KINDS)]
                              for process, seen in profile["processes"].items()])]
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
    """`perf record -a` for `seconds` (None: until `stop`), started by `start` (with the run's inventory,
    so a killed benchmark's perf is stopped by `ccemu clean`) and read by `breakdown` (by process and
    kind of code) or `transport_breakdown` (with `call_graph`: what cchost's CPU went to)."""

    def __init__(self, out: Path, seconds: float | None, call_graph: bool = False):
        self.out, self.seconds, self.call_graph, self.proc, self.event = out, seconds, call_graph, None, ""

    def start(self, spawn) -> None:
        """`spawn(what, argv, **popen_kwargs)`: Inventory.spawn."""
        self.event = sampling_event()
        argv = [perf_binary(), "record", "-a", *(["-g"] if self.call_graph else []), "-e", self.event,
                "-F", str(SAMPLE_HZ), "-o", str(self.out)]
        if self.seconds is not None:
            argv += ["--", "sleep", f"{self.seconds:g}"]
        self.proc = spawn("perf record", argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self) -> None:
        """Ends a recording without `seconds` (perf writes its file on SIGINT)."""
        self.proc.send_signal(signal.SIGINT)

    def _script(self, fields: str) -> list[str]:
        _, err = self.proc.communicate(timeout=(self.seconds or 0) + 60)
        if self.proc.returncode not in (0, -signal.SIGINT) or not self.out.exists():
            raise ProfileError(f"perf record failed ({' '.join(err.decode(errors='replace').split())[-300:]})")
        script = subprocess.run([perf_binary(), "script", "-i", str(self.out), "-F", fields],
                                capture_output=True, text=True, errors="replace", timeout=600)
        if script.returncode != 0:
            raise ProfileError(f"perf script failed ({' '.join(script.stderr.split())[-300:]})")
        self.out.unlink(missing_ok=True)
        return script.stdout.splitlines()

    def breakdown(self, ovs_pids: set[int]) -> Breakdown:
        return Breakdown.of_script(self._script("pid,tid,comm,ip,sym,dso"), ovs_pids, self.event)

    def transport_breakdown(self, comm: str = "cchost") -> "TransportBreakdown":
        return TransportBreakdown.of_script(self._script("comm,pid,ip,sym,dso"), comm, self.event)


# What a cchost sample was doing, told by its call stack (the first activity whose kernel function
# is on it, in this order: a wake-up happens inside a send, a timer inside a wait).
ACTIVITIES = (
    ("waking the receiving process", ("try_to_wake_up", "sock_def_readable", "__wake_up_common")),
    ("timed sleep (timer armed, halt, wake)", ("schedule_hrtimeout_range_clock", "hrtimer_start_range_ns",
                                               "hrtimer_cancel", "do_nanosleep")),
    ("sending (sendmmsg: UDP, IP, veth)", ("__sys_sendmmsg", "__sys_sendmsg", "__sys_sendto")),
    ("receiving (recvmmsg: UDP)", ("do_recvmmsg", "__sys_recvmmsg", "__sys_recvmsg", "__sys_recvfrom")),
    ("epoll (no timer)", ("do_epoll_wait", "do_epoll_pwait", "ep_poll")),
    ("context switch", ("schedule", "finish_task_switch", "__schedule")),
    ("files (records, counters)", ("vfs_write", "vfs_read", "do_renameat2", "do_sys_openat2", "__x64_sys_close")),
)
OWN_CODE = "cchost's own code (endpoint, shell)"
LIBC = "libc (outside system calls)"
OTHER_KERNEL = "other kernel"
TRANSPORT_ACTIVITIES = (OWN_CODE, LIBC, *(name for name, _ in ACTIVITIES), OTHER_KERNEL)
_FRAME = re.compile(r"^\s+[0-9a-f]+\s+(?P<sym>\S+?)(\+0x[0-9a-f]+)?\s+\((?P<dso>[^()]*)\)\s*$")


def activity_of(frames: list[tuple[str, str]]) -> str:
    """One of TRANSPORT_ACTIVITIES for a sample's call stack, leaf first: [(symbol, library)]."""
    leaf_sym, leaf_dso = frames[0]
    if not (leaf_dso == "[kernel.kallsyms]" or leaf_dso.startswith("[kernel")):
        return LIBC if leaf_dso.rsplit("/", 1)[-1].startswith("libc.so") else OWN_CODE
    symbols = {sym for sym, _ in frames}
    for name, markers in ACTIVITIES:
        if symbols.intersection(markers):
            return name
    return OTHER_KERNEL


@dataclass
class TransportBreakdown:
    """One process's samples (every process of that name) over a window, by activity."""

    samples: int = 0  # every sample of the window, all CPUs
    event: str = ""
    activities: Counter = field(default_factory=Counter)

    @classmethod
    def of_script(cls, lines, comm: str, event: str = "") -> "TransportBreakdown":
        """From `perf script -F comm,pid,ip,sym,dso` of a `perf record -g`: a header line per sample
        ("cchost 1234"), then its frames, leaf first, then a blank line."""
        out = cls(event=event)
        header, frames = None, []

        def flush():
            if header is not None:
                out.samples += 1
                if header == comm and frames:
                    out.activities[activity_of(frames)] += 1

        for line in lines:
            if not line.strip():
                continue
            if not line[0].isspace():
                flush()
                header, frames = line.rsplit(None, 1)[0].strip(), []
            elif (frame := _FRAME.match(line)) is not None:
                frames.append((frame["sym"], frame["dso"]))
        flush()
        return out

    def to_json(self) -> dict:
        own = sum(self.activities.values())
        return {"samples": self.samples, "event": self.event, "process_samples": own,
                "process_share": round(own / self.samples, 4) if self.samples else 0.0,
                "activities": {a: round(self.activities[a] / own, 4) if own else 0.0 for a in TRANSPORT_ACTIVITIES}}


def transport_table(breakdown: dict, title: str) -> str:
    """Markdown of a TransportBreakdown's json, with its system calls and sleeps per packet where given."""
    per_packet = [f"{breakdown[key]:.2f} {what} per packet (both ends: each packet sent once and received once)"
                  for key, what in (("syscalls_per_packet", "system calls"), ("sleeps_per_packet", "sleeps"))
                  if breakdown.get(key) is not None]
    lines = [f"### {title}: what its CPU went to", "",
             f"{breakdown['process_samples']} of {breakdown['samples']} samples ({breakdown['event']}, {SAMPLE_HZ} Hz, "
             f"every CPU) ran in cchost" + (f"; {', '.join(per_packet)}" if per_packet else "") + "."
             + (CPU_CLOCK_CAVEAT if breakdown["event"] == "cpu-clock" else ""), "",
             *markdown.table(["activity", "share of cchost's samples"],
                             [[a, f"{share:.1%}"] for a, share in breakdown["activities"].items() if share])]
    return "\n".join(lines + [""])
