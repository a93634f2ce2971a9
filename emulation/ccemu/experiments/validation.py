"""Everything judged of an experiment or sweep file before anything starts, as `ccemu validate`,
`experiment`, `reproduce`, `plan` and `sweep` meet it: the file read as the command line changes it,
`dilation: auto` resolved, the schema, the workload, the schemes' arguments and this machine's
admission."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..bench import capacity as bench_capacity
from ..fabric.admission import admit
from ..fabric.kernel import probe_kernel
from ..model.config import (ConfigError, ExperimentConfig, dilation_is_auto, fabric_section,
                            parse_config, read_yaml)
from ..model.config.overrides import changed, setting, with_schemes
from ..model.dilation import FaithfulRates
from ..model.excerpt import cut, shown

if TYPE_CHECKING:
    from ..sweeps.plan import Sweep


def load_experiment(path: Path, results: Path, data: object = None, source: str | None = None
                    ) -> tuple[ExperimentConfig, FaithfulRates | None]:
    """An experiment file, its `dilation: auto` resolved from this machine's measured capacity for
    its placement where `ccemu bench capacity --results RESULTS` measured one (model/dilation.py's defaults
    otherwise); and what auto was resolved from (None: the file gives its dilation), for the summary.
    Not yet admitted: the caller admits the config it will run (fabric/admission.py). `data`: the
    file's, where the caller read it already; `source`: what messages call it (default: the path)."""
    data = read_yaml(Path(path)) if data is None else data
    faithful, kernel = None, probe_kernel()
    if dilation_is_auto(data):
        faithful = bench_capacity.faithful_here(fabric_section(data), results, kernel)
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
    from ..kinds import runnable_kind
    from ..programs.cchost import check_args

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
    from ..fabric.footprint import MachineLimits
    from ..sweeps.machines import machines_of

    path = sweep.source
    if inventory is not None:
        machines = machines_of(inventory)
        return f"{len(sweep.points)} points of {sweep.base.name} across {len(machines)} machines of {inventory}"
    kernel, machine = probe_kernel(), MachineLimits.probe()
    for point in sweep.points:
        admit(parse_config(point.config, source=f"{path}: point {point.id}", kernel=kernel),
              f"{path}: point {point.id} ({point.describe()})", machine)
    return f"{len(sweep.points)} points of {sweep.base.name}, here"
