"""By hand, not in CI (75 s of incast plus a bring-up of 128 hosts on two shared CPUs): the issue 45
measurement of control across machines. Incast on a k=8 fat-tree (128 hosts) split over two
namespace machines (netns_machines.py), one round of N = 127, ExpressPass, at dilation 400 (the
plan's load fits two machines' default capacity from 200); prints the runner's requests to the
machines' parts per poll, the verdict, and how late the round's senders started their flows
against the schedule (records against the round's .flows files).

    .venv/bin/python emulation/tests/live/control_k8_across_machines.py /tmp/k8   # a folder not there yet
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from netns_machines import REPO, NetnsMachines


def round_lateness_ms(work: Path) -> list[float]:
    """Each round-1 flow's start minus its scheduled start, in ms."""
    scheduled = {}
    for flows in work.glob("round1-*.flows"):
        host = flows.name.removeprefix("round1-").removesuffix(".flows")
        for flow in map(json.loads, flows.read_text().splitlines()):
            scheduled[(host, flow["id"])] = flow["start"]
    return sorted((record["start"] - scheduled[(records.stem, record["id"])]) * 1e3
                  for records in work.glob("*.records") for record in map(json.loads, records.read_text().splitlines())
                  if (records.stem, record["id"]) in scheduled)


def main(root: Path) -> None:
    root.mkdir(parents=True)
    machines = NetnsMachines(root, ["m1", "m2"])
    try:
        machines.start()
        incast = yaml.safe_load((REPO / "workloads" / "experiments" / "incast.yaml").read_text())
        incast["topology"]["k"] = 8
        incast["datacenter"]["dilation"] = 400
        incast["schemes"] = incast["schemes"][:1]
        incast["workload"].update({"flows": [127], "rounds": 1, "settle_rounds": 0})
        experiment = root / "incast-k8.yaml"
        experiment.write_text(yaml.safe_dump(incast))
        began = time.monotonic()
        done = subprocess.run(machines.controller_command(
            "experiment", str(experiment), "--results", str(root / "results"), "--inventory",
            str(machines.inventory()), "--no-monitoring", "--skip-check"), capture_output=True, text=True, timeout=3000)
        print(f"exit {done.returncode} in {time.monotonic() - began:.0f} s")
        print(done.stdout[-3000:], done.stderr[-2000:])
        (manifest,) = (root / "results").glob("*/*/manifest.json")
        print(json.dumps(json.loads(manifest.read_text())["fidelity"]["blocks"], indent=1))
        (work,) = manifest.parent.glob("work/*/")
        late = round_lateness_ms(work)
        print(f"round 1: {len(late)} flows started {late[0]:.2f} / {late[len(late) // 2]:.2f} / {late[-1]:.2f} ms "
              "(least / median / most) after their schedule")
    finally:
        machines.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
