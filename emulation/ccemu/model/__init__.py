"""The pure model of an experiment: its config, topology, routing and workloads (no I/O, no root)."""
