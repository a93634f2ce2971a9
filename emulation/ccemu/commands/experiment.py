"""`ccemu experiment`, `reproduce`, `validate`, `monitor`, `list` and `bench`: experiment files
judged, run and replayed."""

from __future__ import annotations

import sys
import time

from ..bench import capacity as bench_capacity
from ..bench import transport as bench_transport
from ..catalog import PROFILES, listing
from ..experiments.validation import as_asked, judged_sweep, validated_experiment
from ..model.config import EXPERIMENTS_DIR, ConfigError, read_yaml, with_datapath
from .common import RESULTS, require_root
from .exits import EXIT_BAD_CONFIG, EXIT_FABRIC, EXIT_FAILED, EXIT_MONITORING, EXIT_UNFINISHED


def cmd_experiment(args) -> int:
    from rich.console import Console

    from ..machines.across import check_here_or_across, planned
    from ..programs.cchost import cchost_binary
    from ..ports.program import PortProgram
    from ..containers.engine import engine_session
    from ..experiments.runners import runner_for
    from ..kinds import WorkloadNotRunnable

    # Before anything starts: a missing build is one line; then what `ccemu validate` judges.
    cchost_binary()
    PortProgram.built()
    data, source = as_asked(args.config, with_datapath(read_yaml(args.config), args.datapath), args.schemes,
                            args.set)
    config, dilation_from = validated_experiment(args.config, args.results, args.hosts, data, source,
                                                 admit_here=args.inventory is None)
    across = None  # --inventory: (machines, plan) every block's fabric is split over
    if args.inventory is not None:
        across = planned(config, args.inventory, args.results)
    else:
        require_root("experiment")
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
            if not check_here_or_across(checked, across):
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


def cmd_reproduce(args) -> int:
    """Every experiment one after another (each with its own bundle), then REPORT.md."""
    from rich.console import Console

    from ..fabric.checks import check_fabric

    from ..containers.engine import engine_session
    from ..experiments.reproduce import run_all
    from ..programs.cchost import cchost_binary
    from ..ports.program import PortProgram
    from ..results.reproduction import write_report

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
    require_root("reproduce")
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


def cmd_validate(args) -> int:
    """Judges each file as `ccemu experiment` or `ccemu sweep` would before starting anything."""
    from ..sweeps.plan import load_sweep

    for path in args.files:
        data = read_yaml(path)
        if isinstance(data, dict) and "grid" in data:  # a sweep file
            if args.schemes is not None or args.set:
                raise ConfigError(f"{path}: --schemes and --set change experiment files; a sweep file changes its "
                                  "points with its own set: and grid:")
            print(f"{path}: valid: a sweep of {judged_sweep(load_sweep(path, data), args.inventory)}")
        else:  # read once, and changed by --set and --schemes before it is judged
            data, source = as_asked(path, data, args.schemes, args.set)
            config, _ = validated_experiment(path, RESULTS, args.hosts, data, source)
            print(f"{source}: valid: {config.workload.kind} on {config.topology.describe()}, "
                  f"{len(config.schemes)} scheme{'s' if len(config.schemes) != 1 else ''}, dilation "
                  f"{config.dilation.factor:g}, admitted here, cchost accepts every scheme's arguments")
    return 0


def cmd_monitor(args) -> int:
    from ..metrics.grafana import bundle_links, grafana_lines
    from ..metrics.monitoring import MonitoringError, Prometheus

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


def cmd_list(args) -> int:
    print(listing(PROFILES, args.section))
    return 0


def cmd_bench(args) -> int:
    require_root(f"bench {args.bench}")
    {"capacity": bench_capacity, "transport": bench_transport}[args.bench].run(args)
    return 0
