"""What every kind of experiment says about itself (one subclass per kind, one module each:
see __init__.py). The lifecycle (experiments/base.py) and the bundle's summary (reports/report.py)
ask a kind; neither names one."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pydantic import TypeAdapter, ValidationError

from ..model.config import ExperimentConfig
from ..model.config.topology import TopologyConfig
from ..results.bundle import BlockKey
from .blocks import BlockSpec

if TYPE_CHECKING:
    from ..model.workloads import Flow
    from ..results.figures import Tables
    from ..experiments.base import ExperimentRunner, LiveBlock


@dataclass(frozen=True)
class Headline:
    """The figure a kind's papers lead with, per scheme: the first line of summary.md."""

    what: str  # the figure, its unit and where it is read ("Goodput at N = 256, share of the link")
    by_scheme: dict[str, str]  # scheme -> the figure as text ("-": the bundle has none)


class Kind:
    """One kind of experiment: the workload model it runs, its blocks, its traffic's runner, the
    host whose link is its bottleneck, and its sections of summary.md and plots/."""

    name: ClassVar[str]  # the workload's `kind:`
    workload: ClassVar[type]  # its pydantic model (model/config/workloads.py)
    # summary.md's FCT-per-size-bucket section after the kind's own (realistic has its own per load).
    fct_by_bucket: ClassVar[bool] = True
    # Which traffic runs its blocks: a name of experiments/runners.py's RUNNERS ("rounds":
    # incast.py, request and response rounds; "scheduled": flows.py, every flow known up front).
    runner: ClassVar[str]

    # Running ----------------------------------------------------------------------------------

    def blocks(self, config: ExperimentConfig) -> list[BlockSpec]:
        """The fabrics the experiment brings up, in order: by default one per scheme."""
        return [BlockSpec(s, BlockKey(s.scheme)) for s in config.schemes]

    def progress_total(self, config: ExperimentConfig, block: BlockSpec) -> int:
        """Steps of a block's progress bar (rounds, flows)."""
        return 1

    def bottleneck_host(self, config: ExperimentConfig) -> str | None:
        """The host whose link is every block's bottleneck (None: no single one; the verdict then
        judges the port that lagged most)."""
        return None

    def manifest_extra(self, config: ExperimentConfig) -> dict:
        return {}

    # The bundle -------------------------------------------------------------------------------

    def summary_lines(self, tables: "Tables") -> list[str]:
        """The kind's own section of summary.md."""
        raise NotImplementedError

    def headline(self, tables: "Tables") -> Headline:
        """Per scheme, the figure the kind's papers' claims read first: what summary.md opens with."""
        raise NotImplementedError

    def points_text(self, tables: "Tables") -> str:
        """The run's points or workload in a few words, for the plots' titles ("N = 8, 20, 40")."""
        return ""

    def where(self, tables: "Tables", points: bool = True) -> str:
        """Where the run's figures were taken, for the plots' titles: the experiment, its topology, its links
        (at the datacenter rate they stand for) and, with `points`, its points."""
        topology = tables.config_value("topology") or {}
        try:
            shape = TypeAdapter(TopologyConfig).validate_python(topology).describe()
        except ValidationError:  # a hand-made or older manifest: its kind alone
            shape = str(topology.get("kind", "an unnamed topology"))
        rate = float((tables.manifest.get("datacenter") or {}).get("link_rate_bps") or tables.link_bps)
        link = f"{rate / 1e9:g} Gbit/s" if rate >= 1e9 else f"{rate / 1e6:g} Mbit/s"
        return ", ".join(part for part in (f"{self.name} on {shape}", f"{link} links",
                                           self.points_text(tables) if points else "") if part)

    def plots(self, tables: "Tables", out: Path, plt) -> list[Path]:
        """The kind's own plots (after the FCT and queue CDFs every kind has)."""
        return []


class ScheduledKind(Kind):
    """A kind whose whole traffic is known before it starts (experiments/flows.py runs it): every
    host's cchost gets a schedule of the flows it sends."""

    runner = "scheduled"

    def seed(self, config: ExperimentConfig, block: BlockSpec) -> str:
        """What decides a block's flows: the same for every scheme at one point."""
        return f"{config.seed}-{self.name}-{block.key.point_text}"

    def flows(self, runner: "ExperimentRunner", live: "LiveBlock", rng: random.Random) -> list["Flow"]:
        """The block's flows, starts in wall seconds from the first."""
        raise NotImplementedError

    def receiver_args(self, live: "LiveBlock", host: str) -> tuple[str, ...]:
        """More cchost arguments for a host that receives flows."""
        return ()

    def after_traffic(self, runner: "ExperimentRunner", live: "LiveBlock", receivers: set[str]) -> None:
        """What the kind records once its block's flows are done (beside flows and rounds)."""
