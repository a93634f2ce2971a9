"""`ccemu plan` and `ccemu part`: how a fabric splits over machines, and one machine's part of it."""

from __future__ import annotations

from ..experiments.validation import load_experiment
from ..fabric.kernel import probe_kernel
from ..machines.across import machines_plan
from ..model.config import parse_config
from .common import RESULTS, require_root


def cmd_plan(args) -> int:
    """Prints how the file's fabric (or a fat-tree of --k) splits; exit 8 when a machine cannot
    carry its share."""
    from ..model.config import DoesNotFit

    # Not admitted here: the fabric runs on the machines, each of which admits its own share.
    config = load_experiment(args.config, RESULTS)[0]
    if args.k is not None:
        data = config.model_dump()
        data["topology"] = {"kind": "fattree", "k": args.k}
        # The file's link rate as it resolved (dilation auto would resolve again for the larger fabric).
        data["datacenter"] = {**data["datacenter"], "dilation": config.dilation.factor}
        config = parse_config(data, source=f"{args.config} with --k {args.k}", kernel=probe_kernel())
    machines, plan = machines_plan(config, args.inventory, args.machines, RESULTS)
    print(f"{config.name}: {config.topology.describe()}, links {config.link.rate_mbps:g} Mbit/s "
          f"(datacenter {config.datacenter.link_gbps:g} Gbit/s / dilation {config.dilation.factor:g})")
    print("\n".join(plan.lines()))
    if (refusal := plan.refusal()) is not None:
        raise DoesNotFit(refusal)
    print("every machine can carry its share")
    return 0


def cmd_part(args) -> int:
    require_root("part")
    from ..machines.part import main as serve_part

    return serve_part(args.machine, args.reader)
