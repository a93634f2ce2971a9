"""What the fabric's hosts are: namespaces or Docker containers, and the containers' limits."""

from __future__ import annotations

import re
from typing import Literal, Union

from pydantic import Field, field_validator, model_validator

from .base import HOST_NAME, Section
from .errors import KeyedError
from ..excerpt import shown


class HostLimits(Section):
    """What a Docker host's container may use (cgroups)."""

    cpus: Union[float, None] = Field(None, ge=0.01, allow_inf_nan=False,
                                     description="CPUs, e.g. 0.5 (Docker's --cpus: CFS quota per 100 ms period); "
                                                 "unset: no limit")
    # At most 2^43 MiB: Docker takes the limit in bytes as an int64.
    memory_mb: Union[int, None] = Field(None, ge=6, le=2 ** 43,
                                        description="memory, MiB, swap included (Docker's minimum is 6); unset: no "
                                                    "limit")


class HostsConfig(HostLimits):
    """What the fabric's hosts are: network namespaces (ccemu's default), or Docker containers
    (containers/: an image, CPU and memory limits; the same network, addresses and transport)."""

    kind: Literal["namespace", "docker"] = "namespace"
    image: Union[str, None] = Field(None, min_length=1,
                                    description="Docker image every host runs; unset: ccemu-host:<hash of "
                                                "build/cchost>, built when missing (`make image`)")
    per_host: dict[str, HostLimits] = Field({}, description="limits of single hosts over the ones above, e.g. "
                                                            "{h2: {cpus: 0.05}}")

    @field_validator("per_host")
    @classmethod
    def _host_names(cls, value: dict[str, HostLimits]) -> dict[str, HostLimits]:
        for name in value:
            if not re.fullmatch(HOST_NAME, name):
                raise ValueError(f"keys are host names like h2 (got {shown(name)})")
        return value

    @model_validator(mode="after")
    def _limits_need_containers(self) -> "HostsConfig":
        if self.kind == "namespace":
            for key in ("image", "cpus", "memory_mb", "per_host"):
                if getattr(self, key):
                    raise KeyedError((key,), "needs kind: docker (namespace hosts have no image and no limits)")
        return self

    def limits(self, host: str) -> HostLimits:
        """`host`'s limits: its own where per_host sets them, else every host's."""
        own = self.per_host.get(host)
        return HostLimits(cpus=own.cpus if own and own.cpus is not None else self.cpus,
                          memory_mb=own.memory_mb if own and own.memory_mb is not None else self.memory_mb)
