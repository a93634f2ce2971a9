"""Running an experiment file: one runner per workload kind over one shared block lifecycle."""
