"""Running an experiment file: the kind of its workload (kinds/, one module per kind, one
registry) says its blocks and which traffic runs them over the one block lifecycle (base.py):
incast.py for incast rounds, flows.py for the kinds whose flows are all known up front."""
# Imports nothing at load: importing ccemu.experiments.provenance (or any one module) must not
# bring the runners, the fabric and Mininet with it.
