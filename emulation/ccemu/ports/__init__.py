"""The port model: the tc tree of every port, the eBPF port program that runs on it, its maps' reader."""
