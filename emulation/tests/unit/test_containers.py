"""Docker hosts without Docker: cgroup discovery and figures on fake cgroup trees, the host image's
staging and checks with a fake engine, and the engine's start, lock and stop with fake dockerds."""

import fcntl
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from ccemu.containers import engine as engine_module
from ccemu.containers import image
from ccemu.containers.cgroups import V2, cgroup_dirs, join_command, read_figures
from ccemu.containers.engine import EngineError, stop_if_unused
from ccemu.fabric.inventory import Inventory, ProcessRecord

V1_MOUNTINFO = """\
30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
32 30 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
33 30 0:29 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd
34 30 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
"""
V1_CGROUP = """\
4:cpu,cpuacct:/docker/abc
3:memory:/docker/abc
2:name=systemd:/docker/abc
1:pids:/docker/abc
0::/docker/abc
"""


def fake_proc(tmp_path: Path, mountinfo: str, cgroup: str, pid: int = 42) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / str(pid)).mkdir()
    (proc / "self" / "mountinfo").write_text(mountinfo)
    (proc / str(pid) / "cgroup").write_text(cgroup)
    return proc


def test_cgroup_dirs_maps_each_mounted_hierarchy_of_a_hybrid_machine_to_the_containers_directory(tmp_path):
    dirs = cgroup_dirs(42, fake_proc(tmp_path, V1_MOUNTINFO, V1_CGROUP))
    assert dirs == {"cpu,cpuacct": "/sys/fs/cgroup/cpu,cpuacct/docker/abc",
                    "memory": "/sys/fs/cgroup/memory/docker/abc",
                    "name=systemd": "/sys/fs/cgroup/systemd/docker/abc",
                    V2: "/sys/fs/cgroup/unified/docker/abc"}  # pids is not mounted here: left out


def test_cgroup_dirs_of_a_pure_v2_machine_with_a_namespaced_mount_root(tmp_path):
    mountinfo = "40 30 0:31 /system.slice /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n"
    dirs = cgroup_dirs(42, fake_proc(tmp_path, mountinfo, "0::/system.slice/docker-abc.scope\n"))
    assert dirs == {V2: "/sys/fs/cgroup/docker-abc.scope"}


def write(directory: Path, files: dict[str, str]) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return str(directory)


def test_read_figures_takes_cpu_throttling_and_memory_from_v1_files(tmp_path):
    dirs = {"cpu,cpuacct": write(tmp_path / "cpu", {"cpuacct.usage": "2500000000\n",
                                                     "cpu.stat": "nr_periods 40\nnr_throttled 10\n"
                                                                 "throttled_time 750000000\n"}),
            "memory": write(tmp_path / "memory", {"memory.usage_in_bytes": "1048576\n",
                                                  "memory.max_usage_in_bytes": "4194304\n"}),
            V2: write(tmp_path / "unified", {"cpu.stat": "usage_usec 999\n"})}
    figures = read_figures(dirs)
    assert (figures.cpu_seconds, figures.periods, figures.throttled_periods) == (2.5, 40, 10)
    assert figures.throttled_seconds == 0.75  # v1's nanoseconds, not v2's usage
    assert (figures.memory_bytes, figures.memory_peak_bytes) == (1 << 20, 4 << 20)


def test_read_figures_falls_back_to_v2_files_and_is_none_once_the_cgroup_is_gone(tmp_path):
    dirs = {V2: write(tmp_path / "unified", {"cpu.stat": "usage_usec 1500000\nuser_usec 1\nnr_periods 8\n"
                                                          "nr_throttled 2\nthrottled_usec 30000\n",
                                             "memory.current": "2048\n"})}
    figures = read_figures(dirs)
    assert (figures.cpu_seconds, figures.periods, figures.throttled_periods, figures.throttled_seconds) == \
        (1.5, 8, 2, 0.03)
    assert (figures.memory_bytes, figures.memory_peak_bytes) == (2048, 2048)  # no memory.peak: the current
    assert read_figures({V2: str(tmp_path / "removed")}) is None


def test_join_command_moves_the_shell_into_every_cgroup_before_it_execs(tmp_path):
    dirs = {"cpu": write(tmp_path / "a b", {"cgroup.procs": ""}), "memory": write(tmp_path / "m", {"cgroup.procs": ""})}
    out = subprocess.run(["bash", "-c", join_command(dirs) + " && exec bash -c 'echo $$'"], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert (tmp_path / "a b" / "cgroup.procs").read_text().strip() == out
    assert (tmp_path / "m" / "cgroup.procs").read_text().strip() == out


# The host image ---------------------------------------------------------------------------------


def test_is_static_tells_a_static_busybox_from_a_dynamically_linked_python():
    assert image.is_static(image.BUSYBOX)
    assert not image.is_static(Path(sys.executable).resolve())


def test_the_build_context_holds_busybox_with_its_applets_cchost_and_a_sticky_tmp(tmp_path, static_cchost):
    cchost = static_cchost
    context = tmp_path / "context"
    context.mkdir()
    image._stage(context, cchost)
    rootfs = context / "rootfs"
    assert (context / "Dockerfile").read_text().splitlines()[-1] == 'CMD ["/bin/sleep", "2147483647"]'
    assert os.readlink(rootfs / "bin" / "sh") == "busybox" and os.readlink(rootfs / "bin" / "sleep") == "busybox"
    assert (rootfs / "usr" / "local" / "bin" / "cchost").read_bytes() == cchost.read_bytes()
    assert stat.S_IMODE((rootfs / "tmp").stat().st_mode) == 0o1777


def test_a_dynamically_linked_cchost_is_refused_before_anything_is_built(tmp_path):
    with pytest.raises(image.ImageError, match=r"dynamically linked .* `make setup`"):
        image._stage(tmp_path, Path(sys.executable).resolve())


class FakeImages:
    """The SDK's client.images with the images given (tag -> labels)."""

    def __init__(self, images: dict[str, dict]):
        self.images, self.built = images, []

    def get(self, tag):
        from docker.errors import ImageNotFound

        if tag not in self.images:
            raise ImageNotFound(tag)
        return SimpleNamespace(labels=self.images[tag])

    def build(self, **kwargs):
        self.built.append(kwargs)
        self.images[kwargs["tag"]] = kwargs.get("labels", {})


@pytest.fixture
def static_cchost(tmp_path, monkeypatch):
    cchost = tmp_path / "cchost"
    cchost.write_bytes(image.BUSYBOX.read_bytes())  # any static executable stands in
    monkeypatch.setattr(image, "cchost_binary", lambda: cchost)
    return cchost


def test_the_default_image_is_built_once_per_cchost_offline_and_labelled_with_its_hash(static_cchost):
    client = SimpleNamespace(images=FakeImages({}))
    said = []
    tag = image.require(client, None, announce=said.append)
    digest = image.file_sha256(static_cchost)
    assert tag == f"ccemu-host:{digest[:12]}" and said == [f"building the host image {tag} (once per cchost build)"]
    (build,) = client.images.built
    assert build["network_mode"] == "none" and build["pull"] is False
    assert build["labels"] == {image.CCHOST_LABEL: digest}
    assert image.require(client, None, announce=said.append) == tag and len(client.images.built) == 1


def test_a_configured_image_must_exist_and_carry_the_built_cchost(static_cchost):
    digest = image.file_sha256(static_cchost)
    client = SimpleNamespace(images=FakeImages({"lab/host:1": {image.CCHOST_LABEL: digest},
                                                "lab/old:1": {image.CCHOST_LABEL: "0" * 64}, "other:1": {}}))
    assert image.require(client, "lab/host:1") == "lab/host:1"
    with pytest.raises(image.ImageError, match=r"^hosts.image: no image 'lab/missing' in the local Docker engine: "
                                               rf"build it FROM ccemu-host:{digest[:12]}"):
        image.require(client, "lab/missing")
    with pytest.raises(image.ImageError, match=rf"lab/old:1 has a cchost of sha256 000000000000, not build/cchost's "
                                               rf"{digest[:12]}: rebuild it FROM ccemu-host:{digest[:12]}"):
        image.require(client, "lab/old:1")
    with pytest.raises(image.ImageError, match=r"other:1 has no org.ccemu.cchost.sha256 label"):
        image.require(client, "other:1")
    assert client.images.built == []


# The engine --------------------------------------------------------------------------------------


@pytest.fixture
def no_engine(tmp_path, monkeypatch):
    """No Docker engine answers (DOCKER_HOST names a socket nobody listens on); the engine's
    records go to tmp_path/docker."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nobody.sock")
    return tmp_path / "docker"


def fake_dockerd(tmp_path: Path, script: str) -> str:
    path = tmp_path / "dockerd"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return str(path)


def test_a_dockerd_that_fails_to_start_is_one_line_quoting_its_log_and_leaves_no_record(tmp_path, monkeypatch,
                                                                                       no_engine):
    monkeypatch.setenv("CCEMU_DOCKERD", fake_dockerd(tmp_path, 'echo "fake dockerd: no storage driver for $*"\n'
                                                               "exit 1\n"))
    with pytest.raises(EngineError) as failure:
        engine_module.DockerEngine.acquire(no_engine)
    assert str(failure.value) == ("dockerd exited with status 1: fake dockerd: no storage driver for "
                                  f"--iptables=false --bridge=none --ip-forward=false --host unix://{tmp_path}/nobody.sock")
    assert not no_engine.exists()


def test_a_missing_dockerd_says_how_to_install_it(tmp_path, monkeypatch, no_engine):
    monkeypatch.setenv("CCEMU_DOCKERD", str(tmp_path / "not-installed"))
    with pytest.raises(EngineError, match=r"^Docker hosts need Docker's engine and dockerd is not installed: "
                                          r"`apt-get install docker.io`"):
        engine_module.DockerEngine.acquire(no_engine)
    assert not no_engine.exists()


def test_the_dockerd_ccemu_started_stops_only_once_its_last_user_lets_go(no_engine):
    """A recorded stand-in for dockerd (a sleep), and the shared lock as users hold it."""
    record = Inventory.create("dockerd", no_engine)
    process = record.spawn("dockerd started by ccemu", ["sleep", "60"])
    user = engine_module._lock(no_engine, fcntl.LOCK_SH)
    try:
        assert stop_if_unused(no_engine) is False
        assert process.poll() is None and (no_engine / "dockerd").is_dir()
    finally:
        os.close(user)
    assert stop_if_unused(no_engine) is True
    assert process.wait(timeout=10) == -15  # SIGTERM, as dockerd wants to stop its containerd
    assert not no_engine.exists()
    assert stop_if_unused(no_engine) is False


def test_a_dockerd_ccemu_did_not_start_is_never_stopped(no_engine):
    machines = subprocess.Popen(["sleep", "60"])  # the machine's own dockerd: on no record of ccemu's
    try:
        user = engine_module._lock(no_engine, fcntl.LOCK_SH)
        os.close(user)
        assert stop_if_unused(no_engine) is False
        assert machines.poll() is None and not no_engine.exists()
    finally:
        machines.kill()
        machines.wait()


def test_a_dead_dockerds_record_is_cleared_before_a_start_and_a_silent_one_is_stopped_unless_used(tmp_path,
                                                                                                monkeypatch,
                                                                                                no_engine):
    monkeypatch.setenv("CCEMU_DOCKERD", fake_dockerd(tmp_path, 'echo "fake dockerd: no"; exit 1\n'))
    dead = Inventory.create("dockerd", no_engine)
    dead.spawn("dockerd started by ccemu", ["true"]).wait()
    with pytest.raises(EngineError, match="^dockerd exited with status 1: fake dockerd: no$"):
        engine_module.DockerEngine.acquire(no_engine)  # the dead record went; the (fake) start was tried
    assert not no_engine.exists()
    silent = Inventory.create("dockerd", no_engine)
    process = silent.spawn("dockerd started by ccemu", ["sleep", "60"])
    try:
        user = engine_module._lock(no_engine, fcntl.LOCK_SH)  # a run of another DOCKER_HOST uses it
        try:
            with pytest.raises(EngineError, match=rf"^the dockerd ccemu started \(pid {process.pid}\) does not "
                                                  "answer .*: it is stopped now unless a run of ccemu uses it"):
                engine_module.DockerEngine.acquire(no_engine)
            assert process.poll() is None
        finally:
            os.close(user)
        with pytest.raises(EngineError, match="does not answer"):
            engine_module.DockerEngine.acquire(no_engine)  # nobody uses it now: stopped on the way out
        assert process.wait(timeout=10) == -15 and not no_engine.exists()
    finally:
        if process.poll() is None:
            silent.remove()


def test_an_extended_image_is_built_from_the_host_image_offline(tmp_path):
    client = SimpleNamespace(images=FakeImages({}))
    (tmp_path / "Dockerfile").write_text("ARG CCEMU_HOST\nFROM ${CCEMU_HOST}\n")
    assert image.extend(client, "ccemu-host:0123456789ab", tmp_path, "lab/host:1") == "lab/host:1"
    (build,) = client.images.built
    assert build["buildargs"] == {"CCEMU_HOST": "ccemu-host:0123456789ab"} and build["network_mode"] == "none"
    with pytest.raises(image.ImageError, match="no Dockerfile there"):
        image.extend(client, "ccemu-host:0123456789ab", tmp_path / "empty", "lab/host:2")


def test_container_names_hold_the_run_id_in_the_characters_docker_takes():
    from ccemu.containers.host import container_name

    assert container_name("incast-dctcp+-N8-780e60", "h1") == "ccemu-incast-dctcp_-N8-780e60-h1"
    assert container_name("check-20261123-054300-a1b2c3", "h16") == "ccemu-check-20261123-054300-a1b2c3-h16"


def test_only_a_container_labelled_with_its_run_is_removed_for_it(monkeypatch):
    from ccemu.fabric.inventory import ContainerRecord

    removed = []

    class FakeContainer:
        def __init__(self, name, labels):
            self.name, self.labels = name, labels

        def remove(self, force, v):
            removed.append(self.name)

    containers = {"ccemu-run-1-h1": FakeContainer("ccemu-run-1-h1", {"org.ccemu.run": "run-1"}),
                  "ccemu-run-1-h2": FakeContainer("ccemu-run-1-h2", {"org.ccemu.run": "someone-else"})}
    class FakeEngine:
        client = SimpleNamespace(containers=SimpleNamespace(get=containers.__getitem__))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    monkeypatch.setattr(engine_module.DockerEngine, "acquire", classmethod(lambda cls: FakeEngine()))
    problems = engine_module.remove_containers("run-1", [ContainerRecord("ccemu-run-1-h1"),
                                                         ContainerRecord("ccemu-run-1-h2")])
    assert removed == ["ccemu-run-1-h1"]
    assert problems == ["container ccemu-run-1-h2 is not labelled org.ccemu.run=run-1: left alone"]


def test_a_containers_record_is_used_only_while_its_process_runs_and_its_cgroups_are_cgroups():
    from ccemu.containers.host import Container, inside

    me = {"host": "h1", "name": "ccemu-run-1-h1", "id": "f00d", "pid": os.getpid(),
          "start_time": ProcessRecord.of(os.getpid(), "me").start_time, "cgroups": cgroup_dirs(os.getpid()),
          "cpus": None, "memory_mb": None}
    assert Container.running(me).pid == os.getpid()
    for wrong, why in (({"pid": "1; touch /tmp/x"}, "not a container's record"),
                       ({"start_time": me["start_time"] - 1}, f"pid {os.getpid()}) is not running"),
                       ({"cgroups": {"": "/etc"}}, "cgroup '/etc' is not in a cgroup filesystem"),
                       ({"cgroups": {"": f"{next(iter(me['cgroups'].values()))}/../../../etc"}}, "is not in a cgroup"),
                       ({"evil": 1}, "not a container's record")):
        with pytest.raises(EngineError, match=re.escape(why)):
            Container.running({**me, **wrong})
    # The pid is an argument of the script, never its text.
    argv = inside(4242, {"": "/sys/fs/cgroup/x"}, ["ip", "link"])
    assert argv[:2] == ["bash", "-c"] and "4242" not in argv[2] and argv[3:] == ["ccemu-enter", "4242", "ip", "link"]
