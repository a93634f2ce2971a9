"""Running cchost, the transport (transport/, built by `make setup` into build/cchost), on
the hosts of a fabric: its command line, flow schedules in and flow records out.

Times: every cchost of a run shares one epoch (CLOCK_MONOTONIC nanoseconds, the same in
every namespace of the machine); schedule starts and record times are seconds after it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..model.names import host_number
from ..model.routing import PATH_IDS

if TYPE_CHECKING:
    from ..model.config import ExperimentConfig
    from ..model.config.schemes import SchemeConfig

REPO_ROOT = Path(__file__).resolve().parents[3]
CCHOST = Path(os.environ.get("CCEMU_CCHOST", REPO_ROOT / "build" / "cchost"))


class CchostMissing(RuntimeError):
    pass


def cchost_binary() -> Path:
    if not CCHOST.exists():
        raise CchostMissing(f"cchost is not built ({CCHOST} missing): run `make setup`")
    return CCHOST


@dataclass(frozen=True)
class ScheduledFlow:
    id: int
    dst: int  # host number: h7 is 7
    size: int  # bytes
    start: float  # seconds after the epoch
    scheme: str | None = None
    # Equal-cost paths between the flow's hosts (routing.Routing.n_paths): SprayPass receivers
    # spray credits over path-ids 0..paths-1. Unset: cchost sprays over all PATH_IDS values.
    paths: int | None = None
    # The path-id every packet of the flow takes (unset: cchost hashes the flow id).
    path_id: int | None = None

    def __post_init__(self) -> None:
        if self.paths is not None and not 1 <= self.paths <= PATH_IDS:
            raise ValueError(f"flow {self.id}: paths must be 1..{PATH_IDS} (got {self.paths})")

    def line(self) -> str:
        fields = {"id": self.id, "dst": self.dst, "size": self.size, "start": self.start}
        if self.scheme:
            fields["scheme"] = self.scheme
        if self.paths is not None:
            fields["paths"] = self.paths
        if self.path_id is not None:
            fields["path_id"] = self.path_id
        return json.dumps(fields)


def write_schedule(path: Path, flows: list[ScheduledFlow]) -> Path:
    path.write_text("".join(flow.line() + "\n" for flow in flows))
    return path


def param_args(params: Mapping[str, object]) -> list[str]:
    """`--param <scheme>.<key>=<value>` for each "<scheme>.<key>" of `params`, in its order (cchost
    refuses an unknown scheme or key, or a bad value, in one line; programs.schemes lists them). Times
    are datacenter microseconds: cchost multiplies them by --dilation."""
    argv = []
    for name, value in params.items():
        scheme, dot, key = name.partition(".")
        if not (scheme and dot and key) or "=" in name:
            raise ValueError(f"cchost parameter {name!r}: expected <scheme>.<key>, e.g. dcqcn.timer_us")
        argv += ["--param", f"{name}={value}"]
    return argv


def command(host: str, link_mbps: float, scheme: str, epoch_ns: int, workdir: Path, *,
            schedule: Path | None = None, exit_when_done: bool = False, duration_s: float | None = None,
            extra: tuple[str, ...] = (), binary: Path | None = None,
            params: Mapping[str, object] | None = None) -> list[str]:
    """cchost's argv for `host`, with its records and counters in `workdir`/<host>.* (`binary`: the
    cchost the host runs, node.transport_binary; build/cchost by default; `params`: scheme
    parameters, "<scheme>.<key>" -> value, passed as --param, see `param_args`)"""
    argv = [str(binary or cchost_binary()), "--host", str(host_number(host)), "--link-mbps", str(link_mbps),
            "--scheme", scheme, "--epoch-ns", str(epoch_ns),
            "--records", str(workdir / f"{host}.records"), "--counters", str(workdir / f"{host}.counters")]
    if schedule is not None:
        argv += ["--schedule", str(schedule)]
    if exit_when_done:
        argv.append("--exit-when-done")
    if duration_s is not None:
        argv += ["--duration", str(duration_s)]
    if params:
        argv += param_args(params)
    return argv + list(extra)


def _scheme_config(config: "ExperimentConfig", scheme: str | None) -> "SchemeConfig | None":
    """The config's entry for `scheme` (a scheme runs once per experiment); None: not one of its."""
    return next((s for s in config.schemes if s.scheme == scheme), None)


def transport_args(config: "ExperimentConfig", host: str, alpha: float | None = None,
                   scheme: str | None = None) -> tuple[str, ...]:
    """cchost's transport parameters for `host` running `scheme` (its own RTO floor where it sets
    one); the optional ones only when the config sets them. Times are the config's (datacenter
    time): cchost multiplies them by --dilation."""
    transport = config.transport
    own = _scheme_config(config, scheme)
    rto_min_ms = own.rto_min(transport) if own is not None else transport.rto_min_ms
    args = ("--alpha", str(alpha if alpha is not None else transport.alpha), "--rto-min-ms",
            str(rto_min_ms), "--control-timeout-ms", str(transport.control_timeout_ms), "--linger", "0.05",
            "--seed", str(config.seed * 1000 + host_number(host)))
    if config.dilation.factor != 1:
        args += ("--dilation", str(config.dilation.factor))
    if transport.w_init is not None:
        args += ("--w-init", str(transport.w_init))
    elif alpha is not None:
        args += ("--w-init", str(alpha))
    if transport.slow_time_unit_us is not None:
        args += ("--slow-time-unit-us", str(transport.slow_time_unit_us))
    if not transport.persistent_connections:
        args += ("--fresh-connections",)
    if transport.realtime:
        args += ("--realtime-priority", str(REALTIME_PRIORITY))
    return args


# transport.realtime's SCHED_FIFO priority: the lowest, above every ordinary process and below
# the kernel's own real-time threads (migration, watchdogs), which must keep their precedence.
REALTIME_PRIORITY = 1


def experiment_command(config: "ExperimentConfig", host: str, scheme: str, epoch_ns: int, workdir: Path,
                       alpha: float | None = None, delays: Path | None = None, *, extra: tuple[str, ...] = (),
                       **kwargs) -> list[str]:
    """cchost's argv for `host` in an experiment's block: its link's rate, the block's scheme and
    the parameters its config sets (--param), the transport parameters (transport_args), its
    delay table when it has one, its trace when the config asks for one (`workdir`/<host>.trace,
    programs/trace.py), then `extra`."""
    args = transport_args(config, host, alpha, scheme)
    if delays is not None:
        args += ("--delays", str(delays))
    if config.transport.trace:
        args += ("--trace", str(workdir / f"{host}.trace"))
    own = _scheme_config(config, scheme)
    params = own.cchost_params() if own is not None else {}
    return command(host, config.link.host_rate_mbps(host), scheme, epoch_ns, workdir, extra=args + tuple(extra),
                   params=params, **kwargs)


def stop_all(procs) -> None:
    """Ends every cchost of `procs` (SIGTERM: it writes its last records and counters; SIGKILL after
    10 s), each waited for, whatever the others do."""
    for proc in procs:
        if proc.stdin:
            try:
                proc.stdin.close()
            except OSError:
                pass  # it died with data in the pipe
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def check_args(config: "ExperimentConfig", alphas: list[float | None], source: str = "config",
               binary: Path | None = None) -> None:
    """Asks the built cchost (`--check-args`) whether it would start with what `config` gives its
    hosts, for every scheme, every block's alpha and every distinct link rate of the hosts: so
    ccemu's checks and cchost's own can never disagree. ConfigError naming the scheme otherwise.
    Opens nothing: the records and counters paths are never created."""
    from ..model.config import ConfigError

    # One host per link rate, the first: the hosts link.host_shares names, and the first of the
    # others (hosts differ only in rate and seed; their number is the topology's, not a loop's).
    shared = sorted(config.link.host_shares, key=host_number)
    others = next(f"h{i}" for i in range(1, len(shared) + 2) if f"h{i}" not in config.link.host_shares)
    hosts = [*shared, *([others] if host_number(others) <= config.topology.counts().hosts else [])]
    by_rate = {config.link.host_rate_mbps(h): h for h in reversed(sorted(hosts, key=host_number))}
    for scheme in config.schemes:
        for alpha in alphas:
            for host in sorted(by_rate.values(), key=host_number):
                argv = experiment_command(config, host, scheme.scheme, 0, Path("/nonexistent"), alpha,
                                          binary=binary) + ["--check-args"]
                done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
                if done.returncode != 0:
                    why = " ".join(done.stderr.split())[:300] or f"exit status {done.returncode}"
                    raise ConfigError(f"{source}: cchost refuses what scheme {scheme.scheme} gives {host}: {why}")
