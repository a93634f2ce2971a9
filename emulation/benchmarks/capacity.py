"""Forwarding capacity of the emulated fabric: `ccemu bench capacity` (ccemu/bench/capacity.py
says what it measures), kept here so that `make bench` runs every benchmark from one folder.

    sudo .venv/bin/python emulation/benchmarks/capacity.py [--rates 5 10 25] [--instances 1 auto] [--pinned yes]
"""

from __future__ import annotations

import argparse

from mininet.log import setLogLevel

from ccemu import interrupts
from ccemu.bench import capacity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    capacity.add_arguments(parser)
    setLogLevel("warning")
    capacity.run(parser.parse_args())


if __name__ == "__main__":
    interrupts.run_script(main, "benchmarks/capacity.py")
