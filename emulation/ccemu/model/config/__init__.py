"""Experiment configuration: the YAML schema, validated before anything is started.

A bad config raises ConfigError whose message is one line naming the key path and the rule
(errors.py). Unknown keys are always an error, so a typo never passes silently. Values the
port program cannot represent are refused here too (bounds in ports.py and topology.py, each
with its reason). The package is pure: what this machine can hold is fabric/admission.py's.

One module per section: topology (and links), ports (profiles), fabric (datapath), schemes
(and the transport's parameters), workloads, hosts, and experiment (all of them together,
parsing). Everything public is re-exported here.
"""

from .base import HOST_NAME, Section
from .errors import ConfigError, DoesNotFit, KeyedError, read_yaml
from .experiment import (EXPERIMENTS_DIR, DatacenterConfig, ExperimentConfig, default_faithful, dilation_is_auto,
                         fabric_section, load_config, parse_config, with_datapath)
from .fabric import DATAPATHS, SWITCHES_PER_INSTANCE, FabricConfig
from .hosts import HostLimits, HostsConfig
from .ports import (CREDIT_WIRE_BYTES, DATA_WIRE_BYTES, ETHERNET_HEADER_BYTES, EXPRESSPASS_CREDIT_SHARE,
                    MAX_CREDIT_MARK_WINDOW, MAX_PORT_BUFFER_BYTES, MIN_CREDIT_RATE_BPS, PORT_PROFILES, DcqcnPort,
                    DctcpPort, DropTailPort, ExpressPassPort, LosslessConfig, PortConfig, SprayPassPort, TcdPort)
from .schemes import CREDIT_SCHEMES, SCHEME_PORT_PROFILES, SchemeConfig, SchemeName, TransportConfig
from .topology import (MAX_LINK_RATE_MBPS, MIN_LINK_RATE_MBPS, DumbbellConfig, FatTreeConfig, LeafSpineConfig,
                       LinkConfig, StarConfig, TopologyConfig)
from .workloads import (WORKLOAD_KINDS, ConvergenceTiming, ConvergenceWorkload, IncastWorkload, PermutationWorkload,
                        RealisticWorkload, ShuffleWorkload, VictimWorkload, WorkloadConfig)

__all__ = ["HOST_NAME", "Section", "ConfigError", "DoesNotFit", "KeyedError", "read_yaml", "EXPERIMENTS_DIR",
           "DatacenterConfig", "ExperimentConfig", "default_faithful", "dilation_is_auto", "fabric_section",
           "load_config", "parse_config", "with_datapath", "DATAPATHS", "SWITCHES_PER_INSTANCE", "FabricConfig",
           "HostLimits", "HostsConfig",
           "CREDIT_WIRE_BYTES", "DATA_WIRE_BYTES", "ETHERNET_HEADER_BYTES", "EXPRESSPASS_CREDIT_SHARE",
           "MAX_CREDIT_MARK_WINDOW", "MAX_PORT_BUFFER_BYTES", "MIN_CREDIT_RATE_BPS", "PORT_PROFILES", "DcqcnPort",
           "DctcpPort", "DropTailPort", "ExpressPassPort", "LosslessConfig", "PortConfig", "SprayPassPort",
           "TcdPort", "CREDIT_SCHEMES", "SCHEME_PORT_PROFILES", "SchemeConfig", "SchemeName", "TransportConfig",
           "MAX_LINK_RATE_MBPS", "MIN_LINK_RATE_MBPS", "DumbbellConfig", "FatTreeConfig", "LeafSpineConfig",
           "LinkConfig", "StarConfig", "TopologyConfig", "WORKLOAD_KINDS", "ConvergenceTiming",
           "ConvergenceWorkload", "IncastWorkload", "PermutationWorkload", "RealisticWorkload", "ShuffleWorkload",
           "VictimWorkload", "WorkloadConfig"]
