"""The Docker host image (docker/host/Dockerfile): static cchost and busybox FROM scratch, built
offline by the local engine, tagged with cchost's hash so that a stale image is never used.

A run names no image by default: it uses ccemu-host:<hash of build/cchost>, building it the first
time (about a second). An image the experiment names (`hosts.image`, e.g. one built FROM
ccemu-host with a researcher's own tools) must exist and carry the same cchost (its label).
"""

from __future__ import annotations

import hashlib
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

from ..programs.cchost import REPO_ROOT, cchost_binary
from .engine import docker_sdk

REPOSITORY = "ccemu-host"
CCHOST_LABEL = "org.ccemu.cchost.sha256"
CCHOST_IN_IMAGE = Path("/usr/local/bin/cchost")
DOCKERFILE = REPO_ROOT / "docker" / "host" / "Dockerfile"
BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static
TAG_DIGITS = 12


class ImageError(RuntimeError):
    """The host image cannot be built or used; str() is one line saying what to do."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def is_static(path: Path) -> bool:
    """An ELF executable without a program interpreter (PT_INTERP) needs no dynamic loader: it
    runs in an image that holds nothing else."""
    with open(path, "rb") as f:
        header = f.read(64)
        if header[:4] != b"\x7fELF" or header[4] != 2:  # 64-bit ELF only (x86-64, arm64)
            return False
        phoff, = struct.unpack_from("<Q", header, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != 3 for i in range(phnum))


def tag_of(digest: str) -> str:
    """The host image's tag for a cchost of sha256 `digest`."""
    return f"{REPOSITORY}:{digest[:TAG_DIGITS]}"


def default_tag(cchost: Path | None = None) -> str:
    return tag_of(file_sha256(cchost or cchost_binary()))


def _stage(context: Path, cchost: Path) -> None:
    """The build context: the Dockerfile and rootfs/ (busybox with a link per applet, cchost, /tmp)."""
    if not BUSYBOX.exists() or not is_static(BUSYBOX):
        raise ImageError(f"the host image needs a static busybox at {BUSYBOX}: `apt-get install busybox-static` "
                         "(or `make setup`)")
    if not is_static(cchost):
        raise ImageError(f"{cchost} is dynamically linked and the host image holds no libraries: rebuild it with "
                         "`make setup` (the Makefile links it statically)")
    shutil.copy(DOCKERFILE, context / "Dockerfile")
    rootfs = context / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    (rootfs / "usr" / "local" / "bin").mkdir(parents=True)
    (rootfs / "tmp").mkdir(mode=0o1777)
    (rootfs / "tmp").chmod(0o1777)
    shutil.copy(BUSYBOX, rootfs / "bin" / "busybox")
    applets = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            (rootfs / "bin" / applet).symlink_to("busybox")
    shutil.copy(cchost, rootfs / CCHOST_IN_IMAGE.relative_to("/"))


def build(client, cchost: Path | None = None) -> str:
    """Build the default host image for `cchost` (build/cchost) with the engine `client` is of;
    returns its tag. Nothing is pulled and no network is used: FROM scratch, no RUN step."""
    docker = docker_sdk()
    cchost = cchost or cchost_binary()
    digest = file_sha256(cchost)
    tag = tag_of(digest)
    with tempfile.TemporaryDirectory(prefix="ccemu-image-") as context:
        _stage(Path(context), cchost)
        try:
            client.images.build(path=context, tag=tag, rm=True, forcerm=True, pull=False, network_mode="none",
                                labels={CCHOST_LABEL: digest})
        except (docker.errors.BuildError, docker.errors.APIError) as exc:
            raise ImageError(f"building {tag} failed: {getattr(exc, 'msg', None) or exc}") from exc
    return tag


def extend(client, base: str, directory: Path, tag: str) -> str:
    """Build `directory`'s Dockerfile (which starts `ARG CCEMU_HOST` / `FROM ${CCEMU_HOST}`) with
    CCEMU_HOST = `base` into `tag`: a researcher's tools beside cchost. Offline, as the base is."""
    docker = docker_sdk()
    if not (directory / "Dockerfile").is_file():
        raise ImageError(f"--extend {directory}: no Dockerfile there")
    try:
        client.images.build(path=str(directory), tag=tag, rm=True, forcerm=True, pull=False, network_mode="none",
                            buildargs={"CCEMU_HOST": base})
    except (docker.errors.BuildError, docker.errors.APIError) as exc:
        raise ImageError(f"building {tag} from {directory} failed: {getattr(exc, 'msg', None) or exc}") from exc
    return tag


def require(client, configured: str | None, announce=print) -> str:
    """The image the hosts run: `configured` if it carries build/cchost, else ccemu-host:<hash>,
    built if missing (`announce` says so: it takes a moment)."""
    docker = docker_sdk()
    cchost = cchost_binary()
    digest = file_sha256(cchost)
    wanted = tag_of(digest)
    if configured is None:
        try:
            client.images.get(wanted)
        except docker.errors.ImageNotFound:
            announce(f"building the host image {wanted} (once per cchost build)")
            build(client, cchost)
        return wanted
    try:
        image = client.images.get(configured)
    except docker.errors.ImageNotFound:
        raise ImageError(f"hosts.image: no image {configured!r} in the local Docker engine: build it FROM {wanted} "
                         f"(`make image` builds that one; docker/host/README.md shows how)") from None
    carried = (image.labels or {}).get(CCHOST_LABEL)
    if carried != digest:
        what = f"a cchost of sha256 {carried[:TAG_DIGITS]}" if carried else f"no {CCHOST_LABEL} label"
        raise ImageError(f"hosts.image: {configured} has {what}, not build/cchost's {digest[:TAG_DIGITS]}: "
                         f"rebuild it FROM {wanted}")
    return configured
