"""What every kind of experiment says about itself (one subclass per kind, one module each:
see __init__.py). The lifecycle (experiments/base.py) and the bundle's summary (results/report.py)
ask a kind; neither names one."""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ...model.config import ExperimentConfig
from ...results.bundle import BlockKey
from ..blocks import BlockSpec

if TYPE_CHECKING:
    from ...model.workloads import Flow
    from ...results.figures import Tables
    from ..base import ExperimentRunner, LiveBlock


class Kind:
    """One kind of experiment: the workload model it runs, its blocks, its traffic's runner, the
    host whose link is its bottleneck, and its sections of summary.md and plots/."""

    name: ClassVar[str]  # the workload's `kind:`
    workload: ClassVar[type]  # its pydantic model (model/config/workloads.py)
    # summary.md's FCT-per-size-bucket section after the kind's own (realistic has its own per load).
    fct_by_bucket: ClassVar[bool] = True
    # Which traffic runs its blocks: a name of experiments/__init__.py's RUNNERS ("rounds":
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
