"""`ccemu experiment` on a small experiment (by default a two-scheme incast), in its own process,
for the live tests."""

import os
import subprocess
import sys

SMALL_INCAST = """
name: {name}
seed: {seed}
topology: {{kind: star, hosts: 5}}
link: {{rate_mbps: 10}}
hosts: {hosts}
schemes:
  - scheme: expresspass
  - scheme: dctcp
    port: {{ecn_threshold_bytes: 15000, buffer_bytes: 30000}}
workload: {{kind: incast, aggregator: h1, total_bytes: {total_bytes}, flows: {flows}, rounds: {rounds},
            round_timeout_s: {round_timeout_s}}}
"""


def start_experiment(tmp_path, name, seed, total_bytes, flows, rounds, round_timeout_s=30, hosts="{kind: namespace}"):
    """(the running `ccemu experiment`, its environment); state under tmp_path/state,
    bundles under tmp_path/results. `hosts`: the config's hosts section (YAML flow style)."""
    return start_config(tmp_path, name, SMALL_INCAST.format(name=name, seed=seed, total_bytes=total_bytes,
                                                            flows=flows, rounds=rounds,
                                                            round_timeout_s=round_timeout_s, hosts=hosts))


def start_config(tmp_path, name, text, *flags, cwd=None):
    """`ccemu experiment` of the config `text` (YAML), fabric check skipped; (process, env). A later
    `--results` in `flags` wins (e.g. a relative one, with `cwd`)."""
    config = tmp_path / f"{name}.yaml"
    config.write_text(text)
    env = {**os.environ, "CCEMU_STATE_ROOT": str(tmp_path / "state")}
    run = subprocess.Popen([sys.executable, "-m", "ccemu.cli", "experiment", str(config), "--skip-check",
                            "--results", str(tmp_path / "results"), *flags],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    return run, env
