"""One fabric over several machines, without root: how the controller talks to each machine's part
(machines/session.py, part.py), what a remote host's cchost is given and gives back (machines/remote.py,
mirror.py), and `ccemu plan`. test_partition.py holds how topologies split and the tunnels."""

import base64
import io
import json
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from ccemu import cli
from ccemu.commands import exits
from ccemu.model.kernel import KernelFeatures
from ccemu.machines.mirror import Outbox, apply, mapped, shipped
from ccemu.machines.part import Part, serve
from ccemu.machines.session import MachineLost, Session, ask
from ccemu.sweeps.machines import Machine

REPO = Path(__file__).resolve().parents[3]
NO_MODULES = KernelFeatures(openvswitch=False)


def fake_machine(tmp_path: Path, name: str, script: str) -> Machine:
    """A local "machine" whose ccemu is `script` (Python): what the controller's channel meets."""
    ccemu = tmp_path / name / ".venv" / "bin" / "ccemu"
    ccemu.parent.mkdir(parents=True)
    ccemu.write_text(f"#!{sys.executable}\n{script}\n")
    ccemu.chmod(0o755)
    return Machine(name, "local", {"ccemu_build_root": str(tmp_path / name)})


ECHO = "import sys, json\nfor line in sys.stdin:\n    print(json.dumps({'echo': json.loads(line)['op']}), flush=True)"


def test_requests_go_to_every_machine_at_once_and_each_reply_comes_back_to_its_asker(tmp_path):
    sessions = [Session(fake_machine(tmp_path, name, ECHO)) for name in ("m1", "m2")]
    try:
        replies = ask(sessions, {"m1": {"op": "up"}, "m2": {"op": "port_counters"}}, timeout=30)
        assert replies == {"m1": {"echo": "up"}, "m2": {"echo": "port_counters"}}
    finally:
        for session in sessions:
            session.close(10)


def test_a_machine_whose_part_ends_or_stops_answering_is_named_in_one_line(tmp_path):
    ends = Session(fake_machine(tmp_path, "m1", "import sys\nsys.stdin.readline()\nprint('lost its disk', "
                                               "file=sys.stderr)\nsys.exit(3)"))
    silent = Session(fake_machine(tmp_path, "m2", "import time\ntime.sleep(60)"))
    try:
        with pytest.raises(MachineLost) as lost:
            ask([ends], {"m1": {"op": "up"}}, timeout=30)
        assert str(lost.value) == ("machine m1 (local) stopped answering during 'up': its part (ccemu part over ssh) "
                                   "exited with status 3: lost its disk")
        silence = "machine m2 \\(local\\) stopped answering within 0.5 s of 'probes_drain'"
        with pytest.raises(MachineLost, match=silence):
            ask([silent], {"m2": {"op": "probes_drain"}}, timeout=0.5)
    finally:
        ends.close(10)
        silent.close(10)


def test_a_part_answers_a_bad_request_with_one_line_and_tears_down_when_its_controller_goes():
    downs = []

    class Counting(Part):
        def down(self):
            downs.append(self.machine)
            return super().down()

    requests = io.StringIO(json.dumps({"op": "reboot"}) + "\n" + json.dumps({"op": "probes_close"}) + "\n")
    replies = io.StringIO()
    serve(Counting("m1"), requests, replies)  # its input ends after two requests: the controller went away
    assert [json.loads(line) for line in replies.getvalue().splitlines()] == [
        {"error": "m1: unknown request 'reboot'"}, {}]
    assert downs == ["m1"]


def test_a_part_answers_no_one_way_request_and_says_a_failed_one_on_stderr(capsys):
    requests = io.StringIO(json.dumps({"op": "write", "id": 9, "data": ""}) + "\n" + json.dumps({"op": "probes_close"})
                           + "\n")
    replies = io.StringIO()
    serve(Part("m1"), requests, replies)
    # Only probes_close's reply: the controller waits for none of a write, so a reply would answer its next request.
    assert [json.loads(line) for line in replies.getvalue().splitlines()] == [{}]
    assert "ccemu part: write: m1: " in capsys.readouterr().err


def test_a_reader_serves_only_a_run_folder_of_its_machines_state_root_and_changes_nothing(tmp_path, monkeypatch):
    from ccemu.fabric import inventory
    from ccemu.machines import part

    monkeypatch.setattr(inventory, "DEFAULT_STATE_ROOT", tmp_path)
    (tmp_path / "incast-b1-abc123").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "incast-b1-abc123")
    assert part.Reader("m1", str(tmp_path / "incast-b1-abc123")).state_dir == tmp_path / "incast-b1-abc123"
    for elsewhere in ("/etc", str(tmp_path / "link"), str(tmp_path / "missing"), str(tmp_path)):
        with pytest.raises(ValueError, match="is no run folder of"):
            part.Reader("m1", elsewhere)
    requests = io.StringIO("\n".join(json.dumps({"op": op}) for op in ("spawn", "cpu")) + "\n")
    replies = io.StringIO()
    serve(part.Reader("m1", str(tmp_path / "incast-b1-abc123")), requests, replies)
    first, second = (json.loads(line) for line in replies.getvalue().splitlines())
    assert first == {"error": "m1: unknown request 'spawn'"} and set(second) == {"cpu"}


def test_every_request_a_part_takes_is_one_of_its_methods_and_every_public_method_a_request():
    from ccemu.machines.part import REQUESTS, Reader

    for served in (Part, Reader):
        public = {name for name in vars(served) if not name.startswith("_") and name != "REQUESTS"}
        assert set(served.REQUESTS) == public, served
    assert Part.REQUESTS == REQUESTS


def run_cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ccemu.cli", *argv], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def test_ccemu_plan_prints_a_k8_fat_tree_over_four_and_over_eight_machines_with_their_loads():
    for count, switches, cut in ((4, 20, 96), (8, 10, 112)):
        done = run_cli("plan", "workloads/experiments/incast.yaml", "--k", "8", "--machines", str(count))
        lines = done.stdout.splitlines()
        assert lines[1].startswith(f"fattree: 80 switches, 128 hosts over {count} machines;"), done.stdout
        assert f"{cut} of 256 links between switches cut" in lines[1]
        assert sum(line.startswith("  m") and f": {switches} switches" in line for line in lines) == count
        assert done.returncode in (0, exits.EXIT_DOES_NOT_FIT), done.stderr
        # Refused exactly when a machine's printed load is above 1.
        over = any("** over capacity **" in line for line in lines)
        assert (done.returncode == exits.EXIT_DOES_NOT_FIT) == over
        assert over == (len(done.stderr.splitlines()) == 1)


def test_ccemu_plan_judges_no_fabric_against_this_controller_whose_machines_admit_their_own_share(monkeypatch,
                                                                                                   capsys):
    from dataclasses import replace

    from ccemu.fabric.footprint import MachineLimits

    tiny = replace(MachineLimits.probe(), memory_available_bytes=50 << 20)  # a k=4 fabric would not fit here
    monkeypatch.setattr(MachineLimits, "probe", classmethod(lambda cls: tiny))
    monkeypatch.chdir(REPO)
    assert cli.main(["plan", "workloads/experiments/incast.yaml", "--machines", "2"]) == 0
    assert "every machine can carry its share" in capsys.readouterr().out


def test_ccemu_plan_over_more_machines_than_pods_and_an_experiment_over_an_unreadable_inventory_are_one_line(
        tmp_path):
    done = run_cli("plan", "workloads/experiments/incast.yaml", "--machines", "5")
    assert done.returncode == exits.EXIT_BAD_CONFIG
    assert done.stderr == ("ccemu: a fattree splits by pod and has 4: it cannot be split over 5 machines (each needs "
                           "one pod at least)\n")
    (tmp_path / "bad.yml").write_text("ccemu: [unclosed\n")
    done = run_cli("experiment", "workloads/experiments/incast.yaml", "--inventory", str(tmp_path / "bad.yml"))
    assert done.returncode == exits.EXIT_BAD_CONFIG and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"{tmp_path / 'bad.yml'}: lists no machine (Unable to parse" in done.stderr


def test_a_hosts_paths_under_the_work_folder_go_to_the_machines_mirror_with_the_files_it_reads(tmp_path):
    root, mirror = tmp_path / "work", Path("/run/ccemu/r1/mirror")
    (root / "b1").mkdir(parents=True)
    (root / "b1" / "h2.delays").write_text("{}\n")
    argv = ["cchost", "--records", str(root / "b1" / "h2.records"), "--delays", str(root / "b1" / "h2.delays"),
            "--host", "2"]
    assert [mapped(arg, root, mirror) for arg in argv][2:5] == [
        "/run/ccemu/r1/mirror/b1/h2.records", "--delays", "/run/ccemu/r1/mirror/b1/h2.delays"]
    assert mapped(str(tmp_path / "workshop"), root, mirror) == str(tmp_path / "workshop")  # a prefix is no folder
    assert shipped(argv, root) == {str(root / "b1" / "h2.delays"): base64.b64encode(b"{}\n").decode()}


def test_what_hosts_append_comes_back_as_its_tail_and_a_rewritten_file_whole(tmp_path):
    mirror, back = tmp_path / "mirror", tmp_path / "back"
    (mirror / "b1").mkdir(parents=True)
    back.mkdir()
    outbox = Outbox(mirror)
    records, counters = mirror / "b1" / "h2.records", mirror / "b1" / "h2.counters"
    records.write_text('{"id": 1}\n')
    counters.write_text('{"sent": 1}')
    apply(outbox.changes(), back)
    assert outbox.changes() == []  # nothing changed since
    with open(records, "a") as out:
        out.write('{"id": 2}\n{"id": 3')  # the last line half written
    counters.write_text('{"sent": 22}')
    changes = outbox.changes()
    assert [(path, how) for path, how, _ in changes] == [("b1/h2.counters", "whole"), ("b1/h2.records", "tail")]
    apply(changes, back)
    assert (back / "b1" / "h2.records").read_text() == '{"id": 1}\n{"id": 2}\n{"id": 3'
    assert (back / "b1" / "h2.counters").read_text() == '{"sent": 22}'
    with pytest.raises(ValueError, match="outside the work folder"):
        apply([["../../etc/x", "whole", ""]], back)


def test_a_ports_figures_cross_machines_as_json_and_come_back_equal():
    from ccemu.ports.stats import ClassStats, PortProgramConfig, PortStats, Residence

    stats = ClassStats(1, 1538, 0, 0, 1, 1538, 0, 1538, 0, 0, 1538, 1538 * 5000 + (1 << 70), (1, 0, 2))
    port = PortStats("sw0", "a1-eth4", 1_048_580, PortProgramConfig(625_000, 32_000, (128_000, 672), 32_000, 4, 7, 8,
                                                                    True, 10**9),
                     (0, 0), 0, (0.0, 0.0), 0.0, 0, stats, stats, Residence(packets=1, sum_ns=5, max_ns=5), 3)
    assert PortStats.from_json(json.loads(json.dumps(asdict(port)))) == port


class FakeFabric:
    """What a RemoteHost asks of its SplitFabric: the requests it sent, and scripted replies."""

    def __init__(self, workroot: Path, replies: dict[str, list[dict]], returncodes: list[int | None] = ()):
        self.workroot, self.replies, self.asked, self.told = workroot, replies, [], []
        self.clock_offsets_ns = {"m2": 1_000}
        self.returncodes = list(returncodes)

    def ask_one(self, machine: str, request: dict) -> dict:
        self.asked.append((machine, request))
        return self.replies[request["op"]].pop(0)

    def tell(self, machine: str, request: dict) -> None:
        self.told.append((machine, request))

    def returncode(self, id: int, fresh_s: float) -> int | None:
        return self.returncodes.pop(0)


def test_a_remote_hosts_cchost_starts_on_its_machines_clock_with_the_files_it_reads(tmp_path):
    from ccemu.machines.remote import RemoteHost

    work = tmp_path / "work"
    (work / "b1").mkdir(parents=True)
    (work / "b1" / "h9.flows").write_text("{}\n")
    fabric = FakeFabric(work, {"spawn": [{"pid": 77}]})
    host = RemoteHost(fabric, "h9", "m2", "10.0.0.9")
    with open(work / "b1" / "h9.log", "wb") as log:
        proc = host.popen_transport(["cchost", "--epoch-ns", "5000", "--schedule", str(work / "b1" / "h9.flows")],
                                    stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)
    (machine, request), = fabric.asked
    assert machine == "m2" and request["argv"][:3] == ["cchost", "--epoch-ns", "6000"]  # + m2's clock offset
    assert request["log"] == str(work / "b1" / "h9.log") and request["stdin"] is True
    assert list(request["files"]) == [str(work / "b1" / "h9.flows")] and proc.pid == 77


def test_a_remote_cchosts_input_goes_one_way_and_a_wait_times_out_as_popens_does(tmp_path):
    from ccemu.machines.remote import RemoteProcess

    fabric = FakeFabric(tmp_path, {}, returncodes=[None] * 100 + [0])
    proc = RemoteProcess(fabric, "m2", "h9", 77, True, 3)
    proc.stdin.write(b'{"id": 1}\n')
    assert fabric.asked == []  # no reply waited for: a round's flows to 127 senders are no 127 round trips
    ((machine, request),) = fabric.told
    assert machine == "m2" and request["op"] == "write" and base64.b64decode(request["data"]) == b'{"id": 1}\n'
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.1)
    assert proc.returncode is None


def test_polling_every_process_of_a_split_fabric_asks_each_machine_once_per_poll_period(monkeypatch):
    from ccemu.machines.fabric import SplitFabric
    from ccemu.machines.remote import POLL_FRESH_S

    fabric = object.__new__(SplitFabric)  # its bookkeeping alone: no machine, no session
    fabric.returncodes, fabric.returncodes_at = {}, float("-inf")
    collected = []

    def collect():
        collected.append(1)
        fabric.returncodes.update({i: (0 if i == 7 else None) for i in range(1, 128)})
        fabric.returncodes_at = time.monotonic()

    monkeypatch.setattr(fabric, "collect", collect)
    seen = [fabric.returncode(i, POLL_FRESH_S) for i in range(1, 128)]  # a runner's poll of 127 cchosts
    assert len(collected) == 1 and seen.count(0) == 1 and seen[6] == 0
    fabric.returncodes_at -= POLL_FRESH_S + 0.01  # a poll period later: collected again, once
    fabric.returncode(1, POLL_FRESH_S)
    fabric.returncode(2, POLL_FRESH_S)
    assert len(collected) == 2
