"""`ccemu`: check, bring up and clean emulated fabrics; run experiments and report on them.

Every failure is one line on stderr saying what failed and what to do (the traceback only
with --debug), nothing of the run is left behind, and the exit status names the kind:

    0  all good
    1  a check failed, or an unexpected error
    2  bad config or arguments: nothing was started
    3  (no longer used: what was 'not implemented' is a config error, 2)
    4  the experiment ran and wrote its bundle, but some flows never finished
    5  a part of ccemu is not built or a tool is missing: `make setup`
    6  the fabric could not be brought up (OVS, namespaces, port programs), or failed under a
       block (an OVS daemon or the PFC pause agent died): that block ended, the others ran
    7  Prometheus or the collector could not start, or Prometheus died during the run (the
       bundle is whole; its live metrics end there)
    8  the config needs more than this machine has: nothing was started
    9  the results folder's disk is full: before the run (nothing was started), or during it
       (the run stopped; the bundle keeps what finished)
  130  interrupted by Ctrl-C (SIGINT), 143 stopped by SIGTERM: what was up is torn down, and an
       experiment's bundle keeps what finished
"""

from __future__ import annotations

import argparse
import copy
import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from mininet.log import setLogLevel

from . import interrupts
from .bench import capacity as bench_capacity
from .bench import transport as bench_transport
from .catalog import SECTIONS, listing, topology_kinds
from .model.config import (DATAPATHS, EXPERIMENTS_DIR, ConfigError, ExperimentConfig, HostsConfig,
                           default_faithful, dilation_is_auto, fabric_section, parse_config, read_yaml, with_datapath)
from .model.config.overrides import changed, setting, with_schemes
from .model.dilation import FaithfulRates
from .model.excerpt import cut, shown
from .fabric.admission import admit
from .fabric.inventory import DEFAULT_STATE_ROOT, Inventory
from .fabric.kernel import KernelFeatures
from .experiments.kinds import KINDS as EXPERIMENT_KINDS

if TYPE_CHECKING:
    from .sweeps.plan import Sweep

# The statuses of the module docstring, which `ccemu --help` shows.
EXIT_FAILED, EXIT_BAD_CONFIG, EXIT_UNFINISHED = 1, 2, 4
EXIT_NOT_BUILT, EXIT_FABRIC, EXIT_MONITORING, EXIT_DOES_NOT_FIT, EXIT_DISK_FULL = 5, 6, 7, 8, 9


def _failures() -> list[tuple[type | tuple[type, ...], int, str]]:
    """(exception class, exit status, what to do) for the failures ccemu knows, most specific
    first. Imported here: the modules behind them pull in Mininet, pyroute2 and friends."""
    from .containers.engine import EngineError
    from .containers.image import ImageError
    from .programs.cchost import CchostMissing
    from .model.config import DoesNotFit
    from .fabric.allocators import AllocatorMissing
    from .fabric.net import FabricError, LeftoversError
    from .fabric.inventory import InventoryError
    from .metrics.monitoring import MonitoringError
    from .fabric.ovs import OvsError, OvsMissing
    from .ports.program import PortProgramMissing
    from .results.space import ResultsDiskFull
    from .sweeps.fanout import FanoutError
    from .fabric.tunnels import AcrossMachinesError
    from .machines.session import MachineLost

    nothing_left = "nothing of the run is left"
    return [
        (DoesNotFit, EXIT_DOES_NOT_FIT, ""),
        (ConfigError, EXIT_BAD_CONFIG, ""),
        (PortProgramMissing, EXIT_NOT_BUILT, ""),
        (CchostMissing, EXIT_NOT_BUILT, ""),
        (OvsMissing, EXIT_NOT_BUILT, ""),
        (AllocatorMissing, EXIT_NOT_BUILT, nothing_left),
        (ImageError, EXIT_NOT_BUILT, nothing_left),
        (EngineError, EXIT_FABRIC, nothing_left),
        (MachineLost, EXIT_FABRIC, "the other machines tore their parts down"),
        (AcrossMachinesError, EXIT_FABRIC, ""),
        (LeftoversError, EXIT_FAILED, ""),  # says itself to run `ccemu clean`
        ((OvsError, FabricError), EXIT_FABRIC, f"{nothing_left}; `ccemu check` tries a fabric on its own"),
        (InventoryError, EXIT_FABRIC, ""),
        (MonitoringError, EXIT_MONITORING, f"{nothing_left}; --no-monitoring runs without"),
        (FanoutError, EXIT_FAILED, ""),
        (ResultsDiskFull, EXIT_DISK_FULL, ""),
    ]


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default where it has one to say. argparse's own
    ArgumentDefaultsHelpFormatter would also print a default of None, a flag's False or an empty
    list, which mean "not given": their help says in words what holds then (the file's value,
    say), where `(default: None)` would mislead. Options without help still show theirs."""

    @staticmethod
    def _shows_default(action: argparse.Action) -> bool:
        default = action.default
        return bool(action.option_strings) and default is not None and default is not False \
            and default != argparse.SUPPRESS and default != []

    @staticmethod
    def _default(action: argparse.Action) -> str:
        default = action.default
        text = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default)
        return f"(default: {text.replace('%', '%%')})"  # a help is a %-format

    def _get_help_string(self, action: argparse.Action) -> str:
        said = action.help or ""
        if self._shows_default(action) and not re.search(r"\bdefault\b", said):  # unless it says its own
            said += " " + self._default(action)
        return said

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        # argparse measures a subcommand's name at its parent's indent but prints it 2 deeper: the
        # longest (experiment) would go on a line of its own, its summary below it.
        for command in getattr(action, "_get_subactions", list)():
            self._action_max_length = max(self._action_max_length, self._current_indent + 2 + len(command.dest))

    def _format_action(self, action: argparse.Action) -> str:
        if not action.help and self._shows_default(action):
            action = copy.copy(action)
            action.help = self._default(action)
        return super()._format_action(action)


class _MainHelpFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """`ccemu --help`: its description and epilog (the exit statuses) as written."""


def version() -> str:
    """ccemu's version as installed (emulation/pyproject.toml's), and the commit of this tree
    (results/bundle.py's, as a bundle's manifest records it) where there is one."""
    from importlib import metadata

    from .results.bundle import git_commit

    try:
        installed = metadata.version("ccemu")
    except metadata.PackageNotFoundError:  # run from a tree that was never `pip install`ed
        installed = "(not installed: `make setup`)"
    commit = git_commit()
    return f"ccemu {installed}" + (f" (git {commit})" if commit != "unknown" else "")


class _Version(argparse.Action):
    """--version: asks git only when given (argparse's own version action takes its text when the
    parser is built, which would run git on every command)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version())
        parser.exit()


def _variant_arguments(parser: argparse.ArgumentParser) -> None:
    """--schemes and --set: the experiment file as the command line changes it (as_asked)."""
    parser.add_argument("--schemes", metavar="A,B",
                        help="only these of the file's schemes, comma-separated (e.g. expresspass,dctcp), each with "
                             "the port and parameters the file gives it; others: --set 'schemes=[{scheme: dcqcn}]' "
                             "(default: all of the file's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="set the file's value at a dotted key to a YAML value, as a sweep file's set: does, e.g. "
                             "workload.rounds=2 or 'workload.flows=[8, 32]'; repeatable, applied in order, before "
                             "--schemes")


# Options and arguments several commands take, each command with its own words for them.
def _inventory(parser, said: str) -> None:
    parser.add_argument("--inventory", type=Path, metavar="INV", help=said)


def _hosts_kind(parser, said: str) -> None:
    parser.add_argument("--hosts", choices=HOST_KINDS, help=said)


def _config_file(parser, said: str) -> None:
    parser.add_argument("config", type=Path, metavar="CONFIG", help=said)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ccemu", formatter_class=_MainHelpFormatter,
        description="Emulation testbed for datacenter congestion control.\n`ccemu list` says what there is to run, "
                    "`ccemu COMMAND --help` what a command takes.",
        epilog="exit status:" + __doc__.split("exit status names the kind:", 1)[1])
    parser.add_argument("--version", action=_Version, help="print ccemu's version and the git commit of its tree")
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    commands = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")

    def command(name: str, summary: str, description: str | None = None) -> argparse.ArgumentParser:
        """`summary`: its line in `ccemu --help`; `description`: what `ccemu NAME --help` says (default: the same)."""
        return commands.add_parser(name, help=summary, description=description or summary,
                                   formatter_class=HelpFormatter)

    # The commands a researcher starts with come first: `ccemu --help` lists them in this order.
    experiment = command("experiment", "run an experiment file and write its results bundle (results/NAME/TIME)")
    _config_file(experiment, "an experiment file, e.g. workloads/experiments/incast.yaml (`ccemu list "
                             "experiments`)")
    experiment.add_argument("--results", type=Path, default=RESULTS, help="bundles go to RESULTS/NAME/TIME")
    experiment.add_argument("--skip-check", action="store_true", help="skip the reachability check of the fabric")
    _inventory(experiment, "split every block's fabric over the machines of this Ansible inventory "
                           "(emulation/ccemu/machines/README.md) (default: all on this machine)")
    experiment.add_argument("--no-monitoring", action="store_true", help="no collector, no Prometheus")
    experiment.add_argument("--keep-monitoring", action="store_true",
                            help="keep Prometheus up after the run, until Ctrl-C")
    _hosts_kind(experiment, "run the hosts as this kind (default: the file's hosts.kind)")
    experiment.add_argument("--datapath", choices=DATAPATHS,
                            help="forward with this fabric.datapath; `dilation: auto` then follows that datapath's "
                                 "faithful rates (default: the file's fabric.datapath)")
    _variant_arguments(experiment)

    reproduce = command("reproduce", "run the papers' experiments; one report beside their numbers",
                        "run the seeds' experiments and write one report beside the papers' numbers "
                        "(results/reproduce/TIME/REPORT.md)")
    reproduce.add_argument("names", nargs="*", metavar="NAME",
                           help=f"experiments of workloads/experiments/ (default: {' '.join(REPRODUCED)})")
    reproduce.add_argument("--profile", choices=sorted(PROFILES),
                           help=f"a named set of experiments (default: default, {' '.join(PROFILES['default'])}; "
                                f"quick: one per kind, {' '.join(PROFILES['quick'])}; paper: at the papers' scale, "
                                f"{' '.join(PROFILES['paper'])})")
    reproduce.add_argument("--results", type=Path, default=RESULTS, help="bundles go to RESULTS/NAME/TIME")
    reproduce.add_argument("--skip-check", action="store_true", help="skip the reachability check of the fabric")
    reproduce.add_argument("--no-monitoring", action="store_true", help="no collector, no Prometheus")
    _hosts_kind(reproduce, "run every experiment's hosts as this kind (default: each file's hosts.kind)")
    reproduce.add_argument("--repeats", type=_positive_int, default=1, metavar="N",
                           help="run each experiment N times (seeds seed .. seed + N - 1) and judge each claim on the "
                                "median of its runs, with their spread")

    report_cmd = command("report", "regenerate a bundle's or a sweep's summary and plots, or put bundles side by side",
                         "regenerate summary.md and plots/ of a results bundle or a sweep; with several bundles, "
                         "put them side by side in --out")
    report_cmd.add_argument("bundles", type=Path, nargs="+", metavar="BUNDLE",
                            help="a results bundle (results/NAME/TIME) or a sweep's folder (results/sweeps/NAME/TIME)")
    report_cmd.add_argument("--out", type=Path, help="several bundles: the merged summary's folder "
                                                     "(default: results/merged/TIME)")

    monitor = command("monitor", "serve a finished run's Prometheus data again (until Ctrl-C)",
                      "serve a copy of a finished run's Prometheus data on 127.0.0.1 until Ctrl-C, and print the "
                      "line that starts Grafana on it and the dashboards' links on the run's time range")
    monitor.add_argument("bundle", type=Path, metavar="BUNDLE",
                         help="a results bundle (results/NAME/TIME) of a run with monitoring")
    monitor.add_argument("--port", type=int, help="on 127.0.0.1 (default: 9090 when free, else any free port)")

    listed = command("list", "what there is to run: experiments, sweeps, schemes, profiles, topologies",
                     "list what there is to run: the experiment and sweep files of workloads/, the schemes cchost "
                     "runs, the profiles of `ccemu reproduce`, the topologies an experiment file takes")
    listed.add_argument("section", nargs="?", choices=SECTIONS, metavar="SECTION",
                        help=f"only this one: {', '.join(SECTIONS)} (default: all)")

    validate = command("validate", "judge experiment and sweep files without root, starting nothing",
                       "judge experiment and sweep files as `ccemu experiment` and `ccemu sweep` would, without "
                       "root, starting nothing")
    validate.add_argument("files", nargs="+", type=Path, metavar="FILE",
                          help="experiment or sweep files, e.g. workloads/experiments/incast.yaml")
    _inventory(validate, "sweep files: the machines they would run across (default: here, each point "
                         "admitted on this machine)")
    _hosts_kind(validate, "experiment files: as `ccemu experiment --hosts` would run them (default: the file's "
                          "hosts.kind)")
    _variant_arguments(validate)

    sweep = command("sweep", "run an experiment at every point of a sweep file's grid, here or across machines",
                    "run an experiment at every point of a parameter grid (a sweep file), here one after another or "
                    "across an Ansible inventory's machines, then one summary with the points side by side")
    sweep.add_argument("sweep", type=Path, metavar="SWEEP.yaml", help="a sweep file, e.g. workloads/sweeps/incast.yaml")
    _inventory(sweep, "run the points on these machines (provisioned by playbooks/site.yml), one fabric per "
                      "machine at a time (default: here, one after another)")
    sweep.add_argument("--results", type=Path, default=RESULTS, help="the sweep goes to RESULTS/sweeps/NAME/TIME")
    sweep.add_argument("--plan-only", action="store_true",
                       help="validate and write the points' experiment files; print the sweep's folder")

    check = command("check", "bring up a fabric, verify reachability and path symmetry, tear it down")
    check.add_argument("--config", type=Path, metavar="CONFIG",
                       help="take topology, link and fabric settings from this experiment file (then --topo, its "
                            "sizes and --rate-mbps are not used)")
    check.add_argument("--topo", choices=list(topology_kinds()), default="fattree",
                       help="the fabric's shape, without --config")
    check.add_argument("--k", type=int, default=4, help="fat-tree radix (--topo fattree)")
    check.add_argument("--hosts-per-edge", type=int, help="hosts per edge switch (--topo fattree; default k/2)")
    check.add_argument("--uplinks", type=int, help="each edge switch's uplinks (--topo fattree; default k/2)")
    check.add_argument("--leaves", type=int, default=4, help="leaves (--topo leafspine)")
    check.add_argument("--spines", type=int, default=2, help="spines (--topo leafspine)")
    check.add_argument("--hosts-per-leaf", type=int, default=4, help="hosts per leaf (--topo leafspine)")
    check.add_argument("--hosts-per-side", type=int, default=2, help="hosts per side (--topo dumbbell)")
    check.add_argument("--hosts", type=int, default=4, help="hosts (--topo star)")
    check.add_argument("--rate-mbps", type=float, default=5.0, help="every link's rate in Mbit/s, without --config")
    check.add_argument("--ovs-instances", type=int, metavar="N",
                       help="fabric.ovs_instances: the OVS daemons the switches are spread over (default: the "
                            "--config file's fabric.ovs_instances, else auto)")
    check.add_argument("--datapath", choices=DATAPATHS,
                       help="forward with this fabric.datapath (default: the --config file's fabric.datapath, else "
                            "auto: OVS where its kernel datapath exists, else bpf)")
    _inventory(check, "one fabric over the machines of this Ansible inventory (emulation/ccemu/machines/README.md): "
                      "its plan printed, each machine's part brought up over ssh (default: the whole fabric on this "
                      "machine)")

    up = command("up", "bring up an experiment file's fabric and keep it until Ctrl-C")
    _config_file(up, "an experiment file: its topology, links and fabric (e.g. workloads/experiments/incast.yaml)")
    up.add_argument("--no-cli", action="store_true", help="no Mininet prompt: wait for SIGINT/SIGTERM")
    _inventory(up, "one fabric over the machines of this Ansible inventory, until Ctrl-C or a machine is lost "
                   "(no prompt) (default: on this machine)")

    # The tools around those.
    plan = command("plan", "how a fabric would split over machines, against each one's capacity",
                   "how a fabric would split over machines: which switch where, the cut links, each machine's "
                   "forwarding load against its capacity")
    _config_file(plan, "an experiment file: the fabric to split")
    where = plan.add_mutually_exclusive_group(required=True)
    _inventory(where, "the machines of this Ansible inventory")
    where.add_argument("--machines", type=int, metavar="N", help="N machines like this one (named m1..mN)")
    plan.add_argument("--k", type=int, help="a fat-tree of this radix instead of the file's topology, at the file's "
                                            "link rate (the dilation it resolves to) (default: the file's topology)")

    clean = command("clean", "remove what killed runs left behind",
                    "remove what killed runs left behind (by their recorded inventory)")
    _inventory(clean, "on every machine of this Ansible inventory (after a fabric over them was killed) "
                      "(default: on this machine)")

    image_cmd = command("image", "build the Docker host image (cchost and busybox, FROM scratch)",
                        "build the Docker host image (static cchost and busybox, FROM scratch) unless the one of "
                        "this cchost build exists")
    image_cmd.add_argument("--extend", type=Path, metavar="DIR",
                           help="then build DIR/Dockerfile (FROM ${CCEMU_HOST}) into --tag: your tools beside cchost")
    image_cmd.add_argument("--tag", metavar="NAME", help="the extended image's name, e.g. lab/host:1")

    ports = command("ports", "per-port counters and queues of a live fabric's port programs")
    ports.add_argument("--run", help="run id (default: the one live fabric; needed only when several are up)")

    run_in = command("exec", "run a command in a host (or OVS namespace) of a live fabric")
    run_in.add_argument("--run", help="run id (default: the one live fabric; needed only when several are up)")
    run_in.add_argument("--in-container", action="store_true",
                        help="Docker hosts: run it inside the host's container (its image's files, CPU and memory "
                             "limits), as cchost runs, not only in its network namespace with this machine's tools")
    run_in.add_argument("node", metavar="NODE", help="e.g. h1, or ovs0 / sw0 for a namespace of switch ports (OVS's "
                                                     "/ the bpf datapath's)")
    run_in.add_argument("argv", nargs=argparse.REMAINDER, metavar="COMMAND ...", help="what to run there")

    bench = command("bench", "measure what this machine can emulate")
    benches = bench.add_subparsers(dest="bench", required=True, title="benchmarks", metavar="BENCHMARK",
                                   help="what to measure")
    measured = ("the highest link rate a k=4 fat-tree keeps 8 TCP flows at >= 0.95, per OVS instance count, pinned "
                "and not (RESULTS/capacity/TIME)")
    capacity = benches.add_parser("capacity", help=measured, description=measured, formatter_class=HelpFormatter)
    bench_capacity.add_arguments(capacity)
    measured = ("cchost's goodput and credit pacing beside kernel TCP on a 2-host fabric, its CPU per GB, and with "
                "--profile what that CPU went to (RESULTS/transport/TIME)")
    transport = benches.add_parser("transport", help=measured, description=measured, formatter_class=HelpFormatter)
    bench_transport.add_arguments(transport)

    # Run by the controller over ssh (machines/session.py), never by hand: a parser without help=
    # is left out of `ccemu --help` (help=argparse.SUPPRESS would print as "==SUPPRESS==" there).
    part = commands.add_parser("part", formatter_class=HelpFormatter,
                               description="serve this machine's part of a fabric over several machines on "
                                           "stdin/stdout (run by the controller over ssh)")
    part.add_argument("--machine", required=True, help="this machine's name in the controller's plan")
    part.add_argument("--reader", metavar="STATE_DIR", help="serve the scrapes of the part whose run folder this is")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setLogLevel("warning")
    interrupts.unwind_on_signals()  # SIGINT and SIGTERM unwind through the teardown in `finally`
    try:
        handlers = {"check": cmd_check, "plan": cmd_plan, "part": cmd_part, "up": cmd_up, "clean": cmd_clean,
                    "exec": cmd_exec, "ports": cmd_ports,
                    "experiment": cmd_experiment, "validate": cmd_validate, "report": cmd_report,
                    "monitor": cmd_monitor, "reproduce": cmd_reproduce, "image": cmd_image, "sweep": cmd_sweep,
                    "bench": cmd_bench, "list": cmd_list}
        return handlers[args.command](args)
    except KeyboardInterrupt as stop:
        print(f"ccemu: {interrupts.said(stop)} (what was up is torn down)", file=sys.stderr)
        return interrupts.exit_status(stop)
    except Exception as exc:
        if args.debug:
            raise
        return _one_line(exc)


def _one_line(exc: Exception) -> int:
    """Print `exc` as the one line a user sees; return its exit status."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):  # wherever it was writing
        print(f"ccemu: no space left to write {exc.filename or 'a file'} ({exc.strerror}): free some space; what "
              "was up is torn down", file=sys.stderr)
        return EXIT_DISK_FULL
    for kind, status, advice in _failures():
        if isinstance(exc, kind):
            message = " ".join(str(exc).split())
            print(f"ccemu: {message}{'; ' + advice if advice else ''}", file=sys.stderr)
            return status
    print(f"ccemu: unexpected {type(exc).__name__}: {' '.join(str(exc).split())} "
          "(run `ccemu --debug ...` for the traceback)", file=sys.stderr)
    return EXIT_FAILED


# --hosts: the kinds an experiment file's hosts.kind takes.
HOST_KINDS = get_args(HostsConfig.model_fields["kind"].annotation)
RESULTS = Path("results")  # where bundles go, and where `dilation: auto` finds this machine's capacity
MAX_REPEATS = 100  # each repeat is a whole experiment's wall time: more is a sweep's job, not a report's


def _positive_int(text: str) -> int:
    """--repeats N: 1 .. MAX_REPEATS."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_REPEATS:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and {MAX_REPEATS}")
    return value


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise SystemExit(f"ccemu {what}: needs root (it creates network namespaces and OVS bridges)")


def _check_config(args) -> ExperimentConfig:
    """The fabric `ccemu check` brings up, admitted here unless it is split over an inventory's
    machines (each admits its own share as its part starts)."""
    judged = (lambda config, source: config) if args.inventory is not None else admit
    if args.config:
        # At the rate `ccemu experiment --datapath` would run it: the datapath set before `dilation: auto` is resolved.
        config = load_experiment(args.config, RESULTS, with_datapath(read_yaml(args.config), args.datapath))[0]
        if args.ovs_instances is None and args.datapath is None:
            return judged(config, str(args.config))
        data = config.model_dump()
    else:
        topology = {
            "fattree": {"k": args.k, "hosts_per_edge": args.hosts_per_edge, "uplinks": args.uplinks},
            "leafspine": {"leaves": args.leaves, "spines": args.spines, "hosts_per_leaf": args.hosts_per_leaf},
            "dumbbell": {"hosts_per_side": args.hosts_per_side},
            "star": {"hosts": args.hosts},
        }[args.topo]
        data = {"name": "check", "topology": {"kind": args.topo, **topology}, "link": {"rate_mbps": args.rate_mbps}}
    if args.ovs_instances is not None:
        data.setdefault("fabric", {})["ovs_instances"] = args.ovs_instances
    if args.datapath is not None:
        data.setdefault("fabric", {})["datapath"] = args.datapath
    return judged(parse_config(data, source="command line", kernel=KernelFeatures.probe()), "command line")


def load_experiment(path: Path, results: Path, data: object = None, source: str | None = None
                    ) -> tuple[ExperimentConfig, FaithfulRates | None]:
    """An experiment file, its `dilation: auto` resolved from this machine's measured capacity for
    its placement where `ccemu bench capacity --results RESULTS` measured one (model/dilation.py's defaults
    otherwise); and what auto was resolved from (None: the file gives its dilation), for the summary.
    Not yet admitted: the caller admits the config it will run (fabric/admission.py). `data`: the
    file's, where the caller read it already; `source`: what messages call it (default: the path)."""
    data = read_yaml(Path(path)) if data is None else data
    faithful, kernel = None, KernelFeatures.probe()
    if dilation_is_auto(data):
        fabric = fabric_section(data)
        faithful = ((bench_capacity.faithful_rates(fabric, results) if fabric else None)
                    or default_faithful(fabric, kernel))
    return parse_config(data, source=source or str(path), kernel=kernel, faithful=faithful), faithful


def with_hosts(config: ExperimentConfig, kind: str | None) -> ExperimentConfig:
    """`config` with its hosts of `kind` (--hosts): Docker hosts keep the file's image and limits;
    namespace hosts have none."""
    if kind is None or kind == config.hosts.kind:
        return config
    hosts = {**config.hosts.model_dump(), "kind": kind} if kind == "docker" else {"kind": kind}
    return parse_config({**config.model_dump(), "hosts": hosts}, source=f"--hosts {kind}")


def validated_experiment(path: Path, results: Path, hosts: str | None = None, data: object = None,
                         source: str | None = None, admit_here: bool = True
                         ) -> tuple[ExperimentConfig, FaithfulRates | None]:
    """Everything that can be judged of an experiment file without root and without starting
    anything, in the order `ccemu experiment` meets it: the schema and its cross-checks, the
    workload against the topology, a kind and schemes to run, this machine's admission, and the
    built cchost's own argument rules for what every scheme gives its hosts (--check-args).
    ConfigError / DoesNotFit (one line, naming `source`: default, the path) at the first that fails.
    `admit_here` False: a fabric split over machines, each of which admits its own share as its part
    starts (machines/part.py underlay), not this controller."""
    from .experiments import runnable_kind
    from .programs.cchost import check_args

    source = source or str(path)
    config, dilation_from = load_experiment(path, results, data, source)
    config = with_hosts(config, hosts)
    if admit_here:
        config = admit(config, source)
    alphas = list(dict.fromkeys(spec.alpha for spec in runnable_kind(config, source).blocks(config)))
    check_args(config, alphas, source)
    return config, dilation_from


def as_asked(path: Path, data: object, schemes: str | None, settings: list[str]) -> tuple[object, str]:
    """The experiment file's `data` as the command line changes it: each --set KEY=VALUE in order,
    then --schemes A,B (model/config/overrides.py: a sweep's rules); and what messages call the
    result: the path, with the changes (a refused value is then named as the change it came from,
    not as something the file says). The config run is this one, so the bundle's manifest records
    the changed values."""
    if (schemes is None and not settings) or not isinstance(data, dict):  # no mapping: parse_config says so
        return data, str(path)
    said = []
    for text in settings:
        key, value = setting(text, f"{path}: --set")
        data = changed(data, key, value, f"{path}: --set {key}")
        said.append(f"--set {cut(text.strip(), 80)}")
    if schemes is not None:
        names = [name.strip() for name in schemes.split(",")]
        if not all(names):
            raise ConfigError(f"{path}: --schemes {shown(schemes, 60)}: expected scheme names separated by commas, "
                              "e.g. expresspass,dctcp")
        data = with_schemes(data, names, f"{path}: --schemes")
        said.append(f"--schemes {','.join(names)}")
    return data, f"{path} with {' '.join(said)}"


def judged_sweep(sweep: "Sweep", inventory: Path | None) -> str:
    """A sweep's points (load_sweep validated each) judged where they will run: across
    `inventory` (its machines read and checked, sweeps/machines.py; each admits the points it is
    given when it runs them), or here (each point admitted on this machine, probed once). Where
    they run, said for a line; ConfigError / DoesNotFit (one line) otherwise."""
    from .fabric.footprint import MachineLimits
    from .sweeps.machines import machines_of

    path = sweep.source
    if inventory is not None:
        machines = machines_of(inventory)
        return f"{len(sweep.points)} points of {sweep.base.name} across {len(machines)} machines of {inventory}"
    kernel, machine = KernelFeatures.probe(), MachineLimits.probe()
    for point in sweep.points:
        admit(parse_config(point.config, source=f"{path}: point {point.id}", kernel=kernel),
              f"{path}: point {point.id} ({point.describe()})", machine)
    return f"{len(sweep.points)} points of {sweep.base.name}, here"


def cmd_validate(args) -> int:
    """Judges each file as `ccemu experiment` or `ccemu sweep` would before starting anything."""
    from .sweeps.plan import load_sweep

    for path in args.files:
        data = read_yaml(path)
        if isinstance(data, dict) and "grid" in data:  # a sweep file
            if args.schemes is not None or args.set:
                raise ConfigError(f"{path}: --schemes and --set change experiment files; a sweep file changes its "
                                  "points with its own set: and grid:")
            print(f"{path}: valid: a sweep of {judged_sweep(load_sweep(path, data), args.inventory)}")
        else:  # read once: the strict reader is pure Python (~7 s for a file near its 1 MiB cap)
            data, source = as_asked(path, data, args.schemes, args.set)
            config, _ = validated_experiment(path, RESULTS, args.hosts, data, source)
            print(f"{source}: valid: {config.workload.kind} on {config.topology.describe()}, "
                  f"{len(config.schemes)} scheme{'s' if len(config.schemes) != 1 else ''}, dilation "
                  f"{config.dilation.factor:g}, admitted here, cchost accepts every scheme's arguments")
    return 0


def cmd_list(args) -> int:
    print(listing(PROFILES, args.section))
    return 0


def cmd_bench(args) -> int:
    _require_root(f"bench {args.bench}")
    {"capacity": bench_capacity, "transport": bench_transport}[args.bench].run(args)
    return 0


def cmd_check(args) -> int:
    config = _check_config(args)
    if args.inventory is None:
        _require_root("check")
        from .fabric.checks import check_fabric

        return 0 if check_fabric(config) else EXIT_FAILED
    return _check_across(config, args.inventory)


def _machines_plan(config: ExperimentConfig, inventory: Path | None, count: int | None):
    """(machines, plan) of `config` over an inventory's machines or `count` like this one."""
    from .machines.fabric import plan_of
    from .sweeps.machines import Machine, machines_of

    if inventory is not None:
        machines = machines_of(inventory)
    elif count is not None and count >= 1:
        machines = [Machine(f"m{i + 1}", f"m{i + 1}:22") for i in range(count)]
    else:
        raise ConfigError(f"--machines must be at least 1 (got {count})")
    here = bench_capacity.faithful_rates(config.fabric, RESULTS) or default_faithful(config.fabric,
                                                                                      KernelFeatures.probe())
    return machines, plan_of(config, machines, here)


def _planned(config: ExperimentConfig, inventory: Path):
    """(machines, plan) of `config` over `inventory`, the plan printed before anything starts and
    refused in one line (DoesNotFit) when a machine cannot carry its share."""
    from .model.config import DoesNotFit

    machines, plan = _machines_plan(config, inventory, None)
    print("\n".join(plan.lines()), flush=True)
    if (refusal := plan.refusal()) is not None:
        raise DoesNotFit(refusal)
    return machines, plan


def _check_across(config: ExperimentConfig, inventory: Path) -> int:
    """`ccemu check --inventory`: the plan; every machine's part up, the checks over the whole
    fabric, every part down."""
    from .fabric.checks import check_fabric
    from .machines.fabric import SplitFabric

    return 0 if check_fabric(config, SplitFabric(config, *_planned(config, inventory))) else EXIT_FAILED


def _up_across(config: ExperimentConfig, inventory: Path) -> int:
    """`ccemu up --inventory`: the fabric over the machines until Ctrl-C / SIGTERM, or until a
    machine is lost (one line naming it, exit 6)."""
    from .machines.fabric import SplitFabric

    machines, plan = _planned(config, inventory)
    try:
        with SplitFabric(config, machines, plan) as net:
            print(f"fabric of {config.name} is up over {len(machines)} machines ({net.describe_datapath()}); "
                  "waiting for Ctrl-C / SIGTERM", flush=True)
            while net.fault() is None:  # MachineLost once a machine is lost
                time.sleep(0.2)
    except KeyboardInterrupt:
        print("\ntorn down")
    return 0


def cmd_plan(args) -> int:
    """Prints how the file's fabric (or a fat-tree of --k) splits; exit 8 when a machine cannot
    carry its share."""
    from .model.config import DoesNotFit

    # Not admitted here: the fabric runs on the machines, each of which admits its own share.
    config = load_experiment(args.config, RESULTS)[0]
    if args.k is not None:
        data = config.model_dump()
        data["topology"] = {"kind": "fattree", "k": args.k}
        # The file's link rate as it resolved (dilation auto would resolve again for the larger fabric).
        data["datacenter"] = {**data["datacenter"], "dilation": config.dilation.factor}
        config = parse_config(data, source=f"{args.config} with --k {args.k}", kernel=KernelFeatures.probe())
    machines, plan = _machines_plan(config, args.inventory, args.machines)
    print(f"{config.name}: {config.topology.describe()}, links {config.link.rate_mbps:g} Mbit/s "
          f"(datacenter {config.datacenter.link_gbps:g} Gbit/s / dilation {config.dilation.factor:g})")
    print("\n".join(plan.lines()))
    if (refusal := plan.refusal()) is not None:
        raise DoesNotFit(refusal)
    print("every machine can carry its share")
    return 0


def cmd_part(args) -> int:
    _require_root("part")
    from .machines.part import main as serve_part

    return serve_part(args.machine, args.reader)


def cmd_up(args) -> int:
    from mininet.cli import CLI

    from .fabric.net import FabricNet

    config = load_experiment(args.config, RESULTS)[0]
    if args.inventory is not None:  # each machine admits its own share
        return _up_across(config, args.inventory)
    config = admit(config, str(args.config))
    _require_root("up")
    net = FabricNet(config)
    try:
        with net:
            print(f"fabric {net.run_id} is up: {len(net.hosts)} hosts, {len(net.switches)} switches "
                  f"(state in {net.inventory.state_dir})")
            if args.no_cli or not sys.stdin.isatty():
                print("waiting for Ctrl-C / SIGTERM", flush=True)
                while True:
                    signal.pause()
            print("run commands in hosts as `h1 ping -c1 h2`; `exit` or Ctrl-D tears it down")
            CLI(net)
    except KeyboardInterrupt:
        print("\ntorn down")
    return 0


def cmd_clean(args) -> int:
    if args.inventory is not None:
        return _clean_across(args.inventory)
    from .metrics.monitoring import MONITORING_STATE  # here: it loads the collector and prometheus_client
    from .containers.engine import EngineError, engine_session, remove_containers, stop_if_unused

    _require_root("clean")
    status = 0
    skipped: list[str] = []  # records ccemu could not have written: said, left, and the others cleaned
    runs = (Inventory.all_runs(DEFAULT_STATE_ROOT, skipped) +
            Inventory.all_runs(DEFAULT_STATE_ROOT / MONITORING_STATE, skipped))
    for line in skipped:
        print(f"skipped: {line}")
        status = EXIT_FAILED
    dead = []
    for inventory in runs:
        if inventory.orchestrator.alive():
            print(f"{inventory.run_id}: still running (pid {inventory.orchestrator.pid}); stop it first")
        else:
            dead.append(inventory)
    try:
        # Killed runs with Docker hosts: one engine session for all of their containers.
        with engine_session(any(inventory.containers for inventory in dead)):
            for inventory in dead:
                problems = inventory.remove(remove_containers=remove_containers)
                if problems:
                    status = EXIT_FAILED
                    print(f"{inventory.run_id}: could not remove: {'; '.join(problems)}")
                else:
                    print(f"{inventory.run_id}: removed {len(inventory.processes)} processes, "
                          f"{len(inventory.containers)} containers and {len(inventory.namespaces)} namespaces' "
                          "contents")
        if stop_if_unused():
            print("stopped the dockerd ccemu had started (no run uses it)")
        elif not runs and not skipped:
            print(f"nothing to clean ({DEFAULT_STATE_ROOT} holds no runs)")
    except EngineError as exc:
        print(f"ccemu clean: {exc}", file=sys.stderr)
        status = EXIT_FAILED
    return status


def _clean_across(inventory: Path) -> int:
    """`ccemu clean` on each machine of `inventory` (over ssh, one after another), each one's lines
    prefixed with its name."""
    from .machines.session import ccemu_on
    from .sweeps.machines import machines_of

    status = 0
    for machine in machines_of(inventory):
        try:
            done = subprocess.run(ccemu_on(machine, "clean"), capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            print(f"{machine.name}: ccemu clean did not finish in 300 s")
            status = EXIT_FAILED
            continue
        for line in (done.stdout + done.stderr).splitlines():
            print(f"{machine.name}: {line}")
        if done.returncode:
            status = EXIT_FAILED
            if not (done.stdout + done.stderr).strip():
                print(f"{machine.name}: ccemu clean could not run there (status {done.returncode})")
    return status


def cmd_image(args) -> int:
    """The host image of this cchost build (and, with --extend, an image of the user's FROM it). Its
    tag alone goes to stdout, for scripts; the rest to stderr."""
    from .containers import image
    from .containers.engine import DockerEngine

    _require_root("image")
    if (args.extend is None) != (args.tag is None):
        raise SystemExit("ccemu image: --extend DIR and --tag NAME go together")
    started = time.monotonic()
    with DockerEngine.acquire() as engine:
        tag = image.require(engine.client, None, announce=lambda line: print(line, file=sys.stderr))
        if args.extend is not None:
            tag = image.extend(engine.client, tag, args.extend, args.tag)
    print(f"{tag}: ready in {time.monotonic() - started:.1f} s (docker/host/README.md says what it holds)",
          file=sys.stderr)
    print(tag)
    return 0


def _live_run(command: str, run_id: str | None) -> Inventory:
    live = [i for i in Inventory.all_runs(DEFAULT_STATE_ROOT) if i.orchestrator.alive()]
    if run_id:
        live = [i for i in live if i.run_id == run_id]
    if len(live) != 1:
        names = ", ".join(i.run_id for i in live) or "none"
        raise SystemExit(f"ccemu {command}: need exactly one live fabric{' named ' + run_id if run_id else ''}; "
                         f"live: {names} (pick one with --run)")
    return live[0]


def cmd_ports(args) -> int:
    from rich.console import Console

    from .ports.maps import PortMaps
    from .ports.tables import lossless_table, port_table, residence_line

    _require_root("ports")
    run = _live_run("ports", args.run)
    with PortMaps(run.state_dir) as maps:
        ports, frame_ns = maps.read(), maps.frame_ns
    # Not a terminal (a pipe, a log): do not squeeze the table into 80 columns.
    console = Console(width=None if sys.stdout.isatty() else 240)
    console.print(port_table(ports, frame_ns, run.run_id))
    console.print(residence_line(ports, frame_ns))
    lossless = [p for p in ports if p.config.lossless]
    if lossless:
        console.print(lossless_table(lossless))
    return 0


def cmd_exec(args) -> int:
    _require_root("exec")
    run = _live_run("exec", args.run)
    shell = run.shell_of(args.node)
    if shell is None:
        raise SystemExit(f"ccemu exec: {run.run_id} has no node {args.node!r}")
    if not args.argv:
        raise SystemExit("ccemu exec: give a command to run")
    if args.in_container:
        from .containers import CONTAINERS_FILE
        from .containers.engine import EngineError
        from .containers.host import Container, inside
        from .results.files import read_text

        path = run.state_dir / CONTAINERS_FILE
        try:  # the run's folder is judged ours (Inventory.load); the file is read without following a link
            record = json.loads(read_text(path)).get(args.node)
        except FileNotFoundError:
            record = None
        except (OSError, ValueError, AttributeError) as exc:
            raise SystemExit(f"ccemu exec: {path}: {getattr(exc, 'strerror', None) or exc}") from None
        if record is None:
            raise SystemExit(f"ccemu exec: {args.node} of {run.run_id} is not a Docker host (hosts.kind: docker)")
        try:
            container = Container.running(record)
        except EngineError as exc:
            raise SystemExit(f"ccemu exec: {args.node} of {run.run_id} in {path}: {exc}") from None
        argv = inside(container.pid, container.cgroups, args.argv)
        os.execvp(argv[0], argv)
    # mnexec -a: join the node's namespace (Mininet's own helper, as node.popen uses).
    os.execvp("mnexec", ["mnexec", "-a", str(shell.pid), *args.argv])


def cmd_experiment(args) -> int:
    from rich.console import Console

    from .fabric.checks import check_fabric

    from .programs.cchost import cchost_binary
    from .ports.program import PortProgram
    from .containers.engine import engine_session
    from .experiments import WorkloadNotRunnable, runner_for

    # Before anything starts: a missing build is one line; then what `ccemu validate` judges.
    cchost_binary()
    PortProgram.built()
    data, source = as_asked(args.config, with_datapath(read_yaml(args.config), args.datapath), args.schemes,
                            args.set)
    config, dilation_from = validated_experiment(args.config, args.results, args.hosts, data, source,
                                                 admit_here=args.inventory is None)
    across = None  # --inventory: (machines, plan) every block's fabric is split over
    if args.inventory is not None:
        across = _planned(config, args.inventory)
    else:
        _require_root("experiment")
    if source != str(args.config):  # the log says what ran (a plain print: rich would read a [list] as markup)
        print(f"experiment {config.name}: {source}", flush=True)
    # Not a terminal (a pipe, a log): no squeezing into 80 columns.
    console = Console(width=None if sys.stdout.isatty() else 200)
    try:
        runner = runner_for(config, args.results, console, monitoring=not args.no_monitoring,
                            keep_monitoring=args.keep_monitoring, dilation_from=dilation_from, across=across,
                            asked=source if source != str(args.config) else None)
    except WorkloadNotRunnable as exc:
        print(f"ccemu: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    # Docker hosts: one engine session for the check and the run (a dockerd ccemu starts serves both).
    with engine_session(config.hosts.kind == "docker"):
        if not args.skip_check:
            console.print(f"experiment {config.name}: checking its fabric first")
            checked = config.for_scheme(config.schemes[0])
            if across is not None:
                from .machines.fabric import SplitFabric

                if not check_fabric(checked, SplitFabric(checked, *across)):
                    return EXIT_FAILED
            elif not check_fabric(checked):
                return EXIT_FAILED
        runner.run()
    if runner.faults:
        first = runner.faults[0]
        print(f"ccemu: the emulation failed under {len(runner.faults)} block(s), which ended early (first, "
              f"{first.block.describe()}: {first.what}); the bundle keeps what finished", file=sys.stderr)
        return EXIT_FABRIC
    if runner.monitoring.lost is not None:
        print(f"ccemu: live metrics: {runner.monitoring.lost}", file=sys.stderr)
        return EXIT_MONITORING
    if runner.unfinished_flows:
        print(f"ccemu: {runner.unfinished_flows} flows never finished (see summary.md)", file=sys.stderr)
        return EXIT_UNFINISHED
    return 0


def cmd_monitor(args) -> int:
    from .metrics.grafana import bundle_links, grafana_lines
    from .metrics.monitoring import MonitoringError, Prometheus

    if not (args.bundle / "prometheus" / "data").is_dir():
        print(f"ccemu monitor: {args.bundle} holds no Prometheus data (run without --no-monitoring)",
              file=sys.stderr)
        return EXIT_FAILED
    try:
        window, links = bundle_links(args.bundle)
    except (OSError, ValueError) as exc:
        print(f"ccemu monitor: {exc}", file=sys.stderr)
        return EXIT_FAILED
    try:
        # Named "replay", not by the manifest: a name from a file people exchange makes no path.
        prometheus = Prometheus(args.bundle, None, "replay", port=args.port)
    except MonitoringError as exc:
        print(f"ccemu monitor: {exc}", file=sys.stderr)
        return EXIT_FAILED
    try:  # from here on, a Ctrl-C (whenever it comes) stops the Prometheus started above
        print(f"Prometheus with a copy of {args.bundle.name}'s data: {prometheus.url} (Ctrl-C stops it); {window}",
              flush=True)
        for line in grafana_lines(prometheus.port, links):
            print(line, flush=True)
        while True:
            time.sleep(3600)
    finally:
        prometheus.stop()


# The seeds' experiments; each distinct topology among them is checked once, before any runs.
REPRODUCED = tuple(EXPERIMENT_KINDS)  # workloads/experiments/KIND.yaml: one experiment per kind, named after it
# What `make reproduce PROFILE=...` runs. default: every claim of workloads/reference.yaml at the set-up
# its paper measured it in: the incast at the DCTCP+ paper's other DCTCP set-ups too (Fig. 1 and Table
# I's minimum window, Fig. 8's RTO), SprayPass's convergence at 100 Gbit/s; quick: one experiment per
# kind, those claims not comparable.
# paper: the experiments at the papers' own scale: their fabrics, host counts and workloads (the shuffle
# at the largest that holds here, workloads/README.md).
PROFILES = {"default": REPRODUCED + ("incast-fig1", "incast-fig8", "convergence-100g"), "quick": REPRODUCED,
            "paper": ("realistic-fig19", "realistic-fig19-search", "realistic-fig19-cachefollower",
                      "permutation-fig8", "victim-fig15", "shuffle-fig17")}


def cmd_reproduce(args) -> int:
    """Every experiment one after another (each with its own bundle), then REPORT.md."""
    from rich.console import Console

    from .fabric.checks import check_fabric

    from .containers.engine import engine_session
    from .experiments.reproduce import run_all
    from .programs.cchost import cchost_binary
    from .ports.program import PortProgram
    from .results.reproduction import write_report

    if args.names and args.profile:
        print("ccemu reproduce: give experiment names or --profile, not both", file=sys.stderr)
        return EXIT_BAD_CONFIG
    profile = "" if args.names else args.profile or "default"
    names = args.names or list(PROFILES[profile])
    configs, dilation_from = {}, {}
    for name in names:  # every file is validated before anything starts
        path = EXPERIMENTS_DIR / f"{name}.yaml"
        if not path.exists():
            known = " ".join(sorted(p.stem for p in EXPERIMENTS_DIR.glob("*.yaml")))
            print(f"ccemu reproduce: no experiment {name!r} (workloads/experiments/ has: {known})", file=sys.stderr)
            return EXIT_BAD_CONFIG
        configs[name], dilation_from[name] = validated_experiment(path, args.results, args.hosts)
    _require_root("reproduce")
    cchost_binary()
    PortProgram.built()
    console = Console(width=None if sys.stdout.isatty() else 200)
    started = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    # Docker hosts: one engine session for every experiment (a dockerd ccemu starts serves them all).
    with engine_session(any(config.hosts.kind == "docker" for config in configs.values())):
        if not args.skip_check:
            topologies = {config.topology.describe(): config for config in reversed(configs.values())}
            for described, config in reversed(topologies.items()):
                console.print(f"reproduce: checking the fabric first ({described})")
                if not check_fabric(config.for_scheme(config.schemes[0])):
                    return EXIT_FAILED
        runs, interrupted = run_all(configs, dilation_from, args.results, console, args.repeats,
                                    monitoring=not args.no_monitoring)
        report = write_report(args.results / "reproduce" / started, runs, started, profile)
        print(f"reproduction: {sum(r.seconds for r in runs) / 60:.1f} minutes; report: {report}", flush=True)
        if interrupted is not None:
            raise interrupted
        return EXIT_FAILED if any(r.error for r in runs) else 0


def cmd_report(args) -> int:
    from .results.files import BundleFileError
    from .results.merge import entries_of_bundles, merge, write_points
    from .results.report import report
    from .sweeps import outcome

    for bundle in args.bundles:
        if not (bundle / "manifest.json").exists() and not outcome.is_sweep(bundle):
            print(f"ccemu report: {bundle} is not a results bundle (no manifest.json) nor a sweep (no plan.json)",
                  file=sys.stderr)
            return EXIT_FAILED
    if len(args.bundles) == 1 and args.out is None:
        bundle = args.bundles[0]
        try:
            summary = outcome.report(bundle)[0] if outcome.is_sweep(bundle) else report(bundle)
        except BundleFileError as exc:  # a link, a device, a manifest's name that is not a name
            print(f"ccemu report: {exc}", file=sys.stderr)
            return EXIT_FAILED
        print(f"wrote {summary} and {bundle / 'plots'}/")
        return 0
    if any(outcome.is_sweep(bundle) for bundle in args.bundles):
        print("ccemu report: a sweep's folder is merged into itself: give it alone and without --out",
              file=sys.stderr)
        return EXIT_BAD_CONFIG
    out = args.out or Path("results") / "merged" / time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    entries = entries_of_bundles(args.bundles)
    write_points(out, entries)
    summary = merge(out, entries, f"{len(entries)} bundles side by side")
    print(f"wrote {summary}, {out / 'points.csv'}, {out / 'blocks.csv'} and {out / 'plots'}/")
    return 0


def cmd_sweep(args) -> int:
    """Plan (every point validated first), run here or across the inventory, merge, and say
    which points did not run and why, and which machines did not answer."""
    from .sweeps import outcome
    from .sweeps.plan import load_sweep, write_plan

    sweep = load_sweep(args.sweep)
    if args.inventory is not None and not args.inventory.is_file():
        print(f"ccemu sweep: --inventory {args.inventory}: no such file", file=sys.stderr)
        return EXIT_BAD_CONFIG
    judged_sweep(sweep, args.inventory)  # before a plan is written
    if args.inventory is None and not args.plan_only:
        _require_root("sweep")  # an inventory's machines run them as root there
    directory = write_plan(sweep, args.results)
    if args.plan_only:
        print(directory)
        return 0

    def say(line: str) -> None:
        print(f"sweep {sweep.name}: {line}", flush=True)

    where = f"across {args.inventory}" if args.inventory else "here, one after another"
    say(f"{len(sweep.points)} points of {sweep.base.name}, {where}; folder {directory}")
    unreachable: dict[str, str] = {}
    try:
        if args.inventory is None:
            from .sweeps.local import run_here
            run_here(directory, say)
        else:
            from .sweeps.fanout import run_across
            unreachable = run_across(directory, args.inventory, say).unreachable
    except KeyboardInterrupt as stop:
        if args.inventory is None:
            raise  # here, the running point was torn down
        print(f"ccemu sweep: {interrupts.said(stop)} (what finished is merged; points running on machines go on "
              "there)", file=sys.stderr)
        return interrupts.exit_status(stop)
    finally:  # also after Ctrl-C: what finished is merged
        summary, entries = outcome.report(directory)
    done = [e for e in entries if e.status == "done"]
    say(f"{len(done)} of {len(entries)} points done; summary {summary}")
    problems = [f"{e.label} {e.status} ({e.reason})" for e in entries if e.status != "done"]
    # A machine that did not answer fails the sweep even when the others ran its share: the
    # inventory is not what it says.
    problems += [f"{machine} unreachable ({why})" for machine, why in unreachable.items()]
    if problems:
        print(f"ccemu sweep: {len(entries) - len(done)} of {len(entries)} points did not finish"
              + (f", {len(unreachable)} machine(s) did not answer" if unreachable else "") + ": "
              + "; ".join(problems), file=sys.stderr)
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
