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
import importlib
import sys
from pathlib import Path
from typing import get_args

from . import interrupts
from .bench import capacity as bench_capacity
from .bench import transport as bench_transport
from .catalog import PROFILES, REPRODUCED, SECTIONS, topology_kinds
from .commands.common import RESULTS
from .commands.exits import one_line
from .commands.help import HelpFormatter, MainHelpFormatter, VersionAction
from .model.config import DATAPATHS, HostsConfig


# --hosts: the kinds an experiment file's hosts.kind takes.
HOST_KINDS = get_args(HostsConfig.model_fields["kind"].annotation)
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
        prog="ccemu", formatter_class=MainHelpFormatter,
        description="Emulation testbed for datacenter congestion control.\n`ccemu list` says what there is to run, "
                    "`ccemu COMMAND --help` what a command takes.",
        epilog="exit status:" + __doc__.split("exit status names the kind:", 1)[1])
    parser.add_argument("--version", action=VersionAction, help="print ccemu's version and the git commit of its tree")
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


# Each command: the module of commands/ that runs it, imported when it runs (ccemu report loads no
# Mininet), and its function there.
COMMANDS = {
    "experiment": ("experiment", "cmd_experiment"), "reproduce": ("experiment", "cmd_reproduce"),
    "validate": ("experiment", "cmd_validate"), "monitor": ("experiment", "cmd_monitor"),
    "list": ("experiment", "cmd_list"), "bench": ("experiment", "cmd_bench"),
    "report": ("results", "cmd_report"), "sweep": ("results", "cmd_sweep"),
    "check": ("fabric", "cmd_check"), "up": ("fabric", "cmd_up"), "clean": ("fabric", "cmd_clean"),
    "image": ("fabric", "cmd_image"), "ports": ("fabric", "cmd_ports"), "exec": ("fabric", "cmd_exec"),
    "plan": ("machines", "cmd_plan"), "part": ("machines", "cmd_part"),
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    interrupts.unwind_on_signals()  # SIGINT and SIGTERM unwind through the teardown in `finally`
    try:
        module, function = COMMANDS[args.command]
        return getattr(importlib.import_module(f".commands.{module}", __package__), function)(args)
    except KeyboardInterrupt as stop:
        print(f"ccemu: {interrupts.said(stop)} (what was up is torn down)", file=sys.stderr)
        return interrupts.exit_status(stop)
    except Exception as exc:
        if args.debug:
            raise
        return one_line(exc)


if __name__ == "__main__":
    sys.exit(main())
