"""`ccemu check`, `up`, `clean`, `image`, `ports` and `exec`: fabrics brought up, looked into and
cleaned, here or (--inventory) across machines."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from ..experiments.validation import load_experiment
from ..fabric.admission import admit
from ..fabric.inventory import DEFAULT_STATE_ROOT, Inventory
from ..fabric.kernel import probe_kernel
from ..machines.across import check_here_or_across, clean_across, planned, up_across
from ..model.config import ExperimentConfig, parse_config, read_yaml, with_datapath
from .common import RESULTS, require_root
from .exits import EXIT_FAILED


def check_config(args) -> ExperimentConfig:
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
    return judged(parse_config(data, source="command line", kernel=probe_kernel()), "command line")


def cmd_check(args) -> int:
    config = check_config(args)
    if args.inventory is None:
        require_root("check")
        across = None
    else:
        across = planned(config, args.inventory, RESULTS)
    return 0 if check_here_or_across(config, across) else EXIT_FAILED


def cmd_up(args) -> int:
    from mininet.cli import CLI

    from ..fabric.net import FabricNet

    config = load_experiment(args.config, RESULTS)[0]
    if args.inventory is not None:  # each machine admits its own share
        up_across(config, args.inventory, RESULTS)
        return 0
    config = admit(config, str(args.config))
    require_root("up")
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
        return 0 if clean_across(args.inventory) else EXIT_FAILED
    from ..fabric.cleanup import clean_here
    from ..metrics.monitoring import MONITORING_STATE  # here: it loads the collector and prometheus_client

    require_root("clean")
    return 0 if clean_here([DEFAULT_STATE_ROOT, DEFAULT_STATE_ROOT / MONITORING_STATE]) else EXIT_FAILED


def cmd_image(args) -> int:
    """The host image of this cchost build (and, with --extend, an image of the user's FROM it). Its
    tag alone goes to stdout, for scripts; the rest to stderr."""
    from ..containers import image
    from ..containers.engine import DockerEngine

    require_root("image")
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

    from ..ports.maps import PortMaps
    from ..results.port_tables import lossless_table, port_table, residence_line

    require_root("ports")
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
    require_root("exec")
    run = _live_run("exec", args.run)
    shell = run.shell_of(args.node)
    if shell is None:
        raise SystemExit(f"ccemu exec: {run.run_id} has no node {args.node!r}")
    if not args.argv:
        raise SystemExit("ccemu exec: give a command to run")
    if args.in_container:
        from ..containers import CONTAINERS_FILE
        from ..containers.engine import EngineError
        from ..containers.host import Container, inside
        from ..results.files import read_text

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
