"""The live fabric: private OVS instances, Mininet nodes and links, the run's inventory, checks."""
