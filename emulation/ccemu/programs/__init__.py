"""What runs on the emulated hosts: the transport cchost, and probes and load generators."""
