"""A machine's archive of its sweep runs is unpacked on the controller as root: regular files and
folders under runs/ only, with plain modes and our owner, never through a link (sweeps/unpack.py)."""

import io
import os
import tarfile

import pytest

from ccemu.sweeps.unpack import UnpackError, main, unpack


def archive(tmp_path, *members: tuple[str, str, bytes | str]) -> "os.PathLike":
    """A .tar.gz of (kind, name, content) members: kind "file", "dir", "symlink" (content: its
    target), "hardlink" or "fifo"."""
    path = tmp_path / "runs-m1.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for kind, name, content in members:
            info = tarfile.TarInfo(name)
            info.uid, info.gid, info.uname, info.gname = 4242, 4242, "mallory", "mallory"
            if kind == "file":
                info.mode, info.size = 0o4777, len(content)
                tar.addfile(info, io.BytesIO(content))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE}[kind]
            info.mode = 0o777
            if kind in ("symlink", "hardlink"):
                info.linkname = content
            tar.addfile(info)
    return path


def test_a_machines_runs_are_unpacked_as_plain_files_of_ours_whatever_owner_and_mode_the_archive_gives(tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    packed = archive(tmp_path, ("dir", "runs", b""), ("dir", "runs/p01", b""), ("file", "runs/p01/log", b"done\n"),
                     ("file", "runs/p01/t/20261129-000000/manifest.json", b"{}"))
    assert unpack(packed, sweep) == 2
    log = sweep / "runs" / "p01" / "log"
    assert log.read_text() == "done\n"
    assert (log.stat().st_uid, oct(log.stat().st_mode & 0o7777)) == (os.geteuid(), "0o644")
    assert (sweep / "runs" / "p01" / "t" / "20261129-000000" / "manifest.json").read_bytes() == b"{}"
    assert oct((sweep / "runs" / "p01").stat().st_mode & 0o7777) == "0o755"


@pytest.mark.parametrize("member", [
    ("symlink", "runs/p01/summary.md", "/etc/profile.d/x.sh"),
    ("hardlink", "runs/p01/log", "/etc/shadow"),
    ("fifo", "runs/p01/log", ""),
    ("file", "../outside", b"x"),
    ("file", "/tmp/absolute", b"x"),
    ("file", "runs/../../outside", b"x"),
    ("file", "plots/not-runs.png", b"x"),
])
def test_an_archive_with_a_link_a_special_file_or_a_path_outside_runs_is_refused_before_anything_is_written(
        tmp_path, member):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    packed = archive(tmp_path, ("file", "runs/p00/log", b"first\n"), member, ("file", "runs/p02/log", b"last\n"))
    with pytest.raises(UnpackError, match="nothing unpacked"):
        unpack(packed, sweep)
    assert list(sweep.iterdir()) == []
    assert not (tmp_path / "outside").exists()


def test_a_link_already_in_the_sweep_folder_is_not_followed_by_what_is_unpacked_under_its_name(tmp_path):
    sweep, elsewhere = tmp_path / "sweep", tmp_path / "elsewhere"
    sweep.mkdir()
    elsewhere.mkdir()
    (sweep / "runs").symlink_to(elsewhere)
    with pytest.raises(UnpackError, match="not a folder"):
        unpack(archive(tmp_path, ("file", "runs/p01/log", b"x")), sweep)
    assert list(elsewhere.iterdir()) == []


def test_a_link_at_a_files_name_is_replaced_not_written_through(tmp_path):
    sweep, victim = tmp_path / "sweep", tmp_path / "victim"
    (sweep / "runs" / "p01").mkdir(parents=True)
    victim.write_text("keep")
    (sweep / "runs" / "p01" / "log").symlink_to(victim)
    unpack(archive(tmp_path, ("file", "runs/p01/log", b"new\n")), sweep)
    assert victim.read_text() == "keep"
    assert not (sweep / "runs" / "p01" / "log").is_symlink()
    assert (sweep / "runs" / "p01" / "log").read_text() == "new\n"


def test_the_command_says_in_one_line_why_it_refused_and_exits_1(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    packed = archive(tmp_path, ("symlink", "runs/p01/summary.md", "/etc/passwd"))
    assert main([str(packed), str(sweep)]) == 1
    said = capsys.readouterr().err.strip()
    assert len(said.splitlines()) == 1 and "'runs/p01/summary.md' is a link or a special file" in said, said


def test_unpacked_files_keep_the_modification_times_the_machine_gave_them(tmp_path):
    # A point's machine file is written as it starts and its log to its end: the sweep reads the
    # order of its points from these times (tests/live/test_ansible_live.py).
    path = tmp_path / "runs-m1.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, mtime in (("runs/p01/machine", 1_795_942_970), ("runs/p01/log", 1_795_942_976)):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = 3, mtime
            tar.addfile(info, io.BytesIO(b"m1\n"))
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    unpack(path, sweep)
    assert (sweep / "runs/p01/machine").stat().st_mtime == 1_795_942_970
    assert (sweep / "runs/p01/log").stat().st_mtime == 1_795_942_976
