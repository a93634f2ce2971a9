"""UDP probes that ccemu sends and hears itself, from inside the emulated hosts' namespaces:
`ccemu check` and the tests use them to see which pairs and paths the fabric delivers.

No process runs in the hosts. Per host, ccemu holds two sockets made inside the host's network
namespace (sockets stay in the namespace they were made in): a raw IP socket that sends
datagrams with any source port, so any path-id (the fabric reads it from the low bits of the
UDP source port: transport/wire-format.md), and a UDP socket bound to PROBE_PORT_BASE that
hears every probe sent to the host. A k=16 fabric thus costs 2048 descriptors, where one probe
process per host cost a thousand Python processes started at once.
"""

from __future__ import annotations

import errno
import os
import selectors
import socket
import struct
from collections import Counter
from collections.abc import Iterable

from ..fabric.namespaces import made_in_namespaces, open_netns
from ..model.routing import PATH_IDS

PROBE_PORT_BASE = 0xA000  # low 8 bits zero: base + path-id carries the path-id
PAYLOAD = b"ccemu-probe"
UDP_HEADER = struct.Struct("!HHHH")
IP_HEADER = struct.Struct("!BBHHHBBH4s4s")
RECEIVE_BUFFER_BYTES = 4 << 20
Heard = Counter  # (receiving host, sender's address, path-id) -> datagrams


class ProbeError(RuntimeError):
    pass


def datagram(src_ip: str, dst_ip: str, path_id: int) -> bytes:
    """An IPv4 datagram for a raw socket (IPPROTO_RAW: the header is ours; the kernel fills in
    the length, id and header checksum) carrying UDP from PROBE_PORT_BASE + path_id to
    PROBE_PORT_BASE. UDP checksum 0: none, which IPv4 allows."""
    if not 0 <= path_id < PATH_IDS:
        raise ValueError(f"path-id {path_id} outside 0..{PATH_IDS - 1}")
    udp = UDP_HEADER.pack(PROBE_PORT_BASE + path_id, PROBE_PORT_BASE, UDP_HEADER.size + len(PAYLOAD), 0) + PAYLOAD
    ip = IP_HEADER.pack(0x45, 0, 0, 0, 0, 64, socket.IPPROTO_UDP, 0, socket.inet_aton(src_ip),
                        socket.inet_aton(dst_ip))
    return ip + udp


class Probes:
    """The probe sockets of some hosts ({name: (pid of a process in its namespace, address)});
    close() (or `with`) closes them."""

    def __init__(self, hosts: dict[str, tuple[int, str]]):
        self.address = {name: ip for name, (_, ip) in hosts.items()}
        self._senders: dict[str, socket.socket] = {}
        self._listeners: dict[int, tuple[str, socket.socket]] = {}  # listening socket's fd -> its host, it
        self._selector = selectors.DefaultSelector()
        fds: list[int] = []
        try:
            for pid, _ in hosts.values():
                with open_netns(pid) as fd:
                    if fd is None:
                        raise ProbeError(f"host with pid {pid} is gone")
                    fds.append(os.dup(fd))
            made = made_in_namespaces(fds, _probe_sockets)
        finally:
            for fd in fds:
                os.close(fd)
        for name, sockets in zip(self.address, made):
            if sockets is not None:
                self._senders[name] = sockets[0]
                self._listeners[sockets[1].fileno()] = (name, sockets[1])
        try:
            for name, listener in self._listeners.values():
                listener.bind((self.address[name], PROBE_PORT_BASE))
                self._selector.register(listener, selectors.EVENT_READ)
            if len(self._senders) < len(self.address):
                missing = next(name for name in self.address if name not in self._senders)
                raise ProbeError(f"cannot enter the network namespace of {missing}")
        except OSError as exc:
            self.close()
            raise ProbeError(f"{name}: binding {self.address[name]}:{PROBE_PORT_BASE}: {exc.strerror}") from exc
        except BaseException:
            self.close()
            raise

    def send(self, src: str, dst_ip: str, path_id: int) -> bool:
        """One probe from host `src`; False if its NIC's queue is full (send it again later)."""
        try:
            self._senders[src].sendto(datagram(self.address[src], dst_ip, path_id), (dst_ip, 0))
            return True
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.ENOBUFS):
                return False
            raise ProbeError(f"{src}: sending to {dst_ip}: {exc.strerror}") from exc

    def drain(self, heard: Heard, timeout: float = 0.0) -> int:
        """Count every probe that has arrived (waiting up to `timeout` for the first); returns
        how many were read."""
        count = 0
        for key, _ in self._selector.select(timeout):
            sock, host = key.fileobj, self._listeners[key.fd][0]
            while True:
                try:
                    _, (src, sport) = sock.recvfrom(2048)
                except BlockingIOError:
                    break
                heard[(host, src, sport - PROBE_PORT_BASE)] += 1
                count += 1
        return count

    def close(self) -> None:
        self._selector.close()
        for sock in self._senders.values():
            sock.close()
        for _, sock in self._listeners.values():
            sock.close()

    def __enter__(self) -> "Probes":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _probe_sockets() -> tuple[socket.socket, socket.socket]:
    sender = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sender.setblocking(False)
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.setblocking(False)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
    return sender, listener


def hosts_of(net, names: Iterable[str]) -> dict[str, tuple[int, str]]:
    """What Probes needs of a FabricNet's hosts."""
    return {name: (net[name].pid, net[name].IP()) for name in names}
