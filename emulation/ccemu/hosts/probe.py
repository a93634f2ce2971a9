"""UDP probe run inside an emulated host: send datagrams on chosen path-ids, report what
arrives. Used by `ccemu check` and the tests; the orchestrator starts one per host.

Protocol on stdin/stdout, so that every host is listening before any host sends:
the probe binds its sockets and prints "ready"; on the line "go" it sends, listens for
`--linger` seconds more, and prints one JSON object {"<src ip> <path-id>": count, ...}.

Sockets are bound to PROBE_PORT_BASE + path-id: the fabric reads the path-id from the low
bits of the UDP source port (transport/wire-format.md). Everything is sent to the peer's
PROBE_PORT_BASE socket.
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import sys
import time
from collections import Counter

from ..model.routing import PATH_IDS

PROBE_PORT_BASE = 0xA000  # low 8 bits zero: base + path-id carries the path-id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", required=True, help="this host's address")
    parser.add_argument("--target", action="append", default=[], metavar="IP:PATH_ID[:COUNT]",
                        help="send COUNT (default 1) datagrams to IP with PATH_ID; repeatable")
    parser.add_argument("--targets-file", help="file of IP:PATH_ID[:COUNT] lines")
    parser.add_argument("--linger", type=float, default=1.0, help="seconds to keep listening after sending")
    args = parser.parse_args(argv)

    targets = [parse_target(t) for t in args.target]
    if args.targets_file:
        with open(args.targets_file) as f:
            targets += [parse_target(line) for line in f if line.strip()]
    path_ids = sorted({0} | {pid for _, pid, _ in targets})
    sockets = {}
    for pid in path_ids:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((args.bind, PROBE_PORT_BASE + pid))
        sock.setblocking(False)
        sockets[pid] = sock
    selector = selectors.DefaultSelector()
    for sock in sockets.values():
        selector.register(sock, selectors.EVENT_READ)

    heard: Counter[str] = Counter()
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    payload = b"ccemu-probe"
    for ip, pid, count in targets:
        for _ in range(count):
            _send(sockets[pid], payload, (ip, PROBE_PORT_BASE))
            _drain(selector, heard, 0)
    deadline = time.monotonic() + args.linger
    while (left := deadline - time.monotonic()) > 0:
        _drain(selector, heard, left)
    print(json.dumps(heard), flush=True)
    return 0


def parse_target(text: str) -> tuple[str, int, int]:
    parts = text.strip().split(":")
    if len(parts) not in (2, 3):
        raise SystemExit(f"bad target {text!r}: expected IP:PATH_ID[:COUNT]")
    ip, pid, count = parts[0], int(parts[1]), int(parts[2]) if len(parts) == 3 else 1
    if not 0 <= pid < PATH_IDS:
        raise SystemExit(f"bad target {text!r}: path-id must be in 0..{PATH_IDS - 1}")
    return ip, pid, count


def _send(sock: socket.socket, payload: bytes, address: tuple[str, int]) -> None:
    while True:
        try:
            sock.sendto(payload, address)
            return
        except BlockingIOError:
            time.sleep(0.001)  # the shaped NIC's queue is full: let it drain


def _drain(selector: selectors.BaseSelector, heard: Counter, timeout: float) -> None:
    for key, _ in selector.select(timeout):
        sock = key.fileobj
        while True:
            try:
                _, (src, sport) = sock.recvfrom(2048)
            except BlockingIOError:
                break
            heard[f"{src} {sport - PROBE_PORT_BASE}"] += 1


if __name__ == "__main__":
    sys.exit(main())
