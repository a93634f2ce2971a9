"""What an experiment is made of before anything runs: its blocks (one fabric each, named by a
BlockKey), and the error for a config no block can be made of. Each kind (kind.py) says its
blocks; the lifecycle (experiments/base.py) runs them."""

from __future__ import annotations

from dataclasses import dataclass

from ..model.config import ConfigError, SchemeConfig
from ..results.bundle import BlockKey


class WorkloadNotRunnable(ConfigError):
    """A config the runner cannot run (no workload, no schemes, more senders than the topology has):
    a config error, one line."""


@dataclass(frozen=True)
class BlockSpec:
    """One fabric of the experiment: a scheme's config at one point of the kind's sweep."""

    scheme: SchemeConfig
    key: BlockKey  # its name in every table, the verdict and the console

    @property
    def alpha(self) -> float | None:
        """The credit schemes' initial rate for this block (None: the config's)."""
        return self.key.value("alpha")

    @property
    def label(self) -> str:
        return self.key.describe()

    @property
    def slug(self) -> str:
        return self.label.replace(" ", "-").replace("=", "")
