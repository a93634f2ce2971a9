"""Paced UDP traffic for checking ports (run inside emulated hosts): `send` emits datagrams
at a fixed rate, optionally as ccemu credits (transport/wire-format.md) and with an ECN
codepoint; `recv` counts what arrives, how much of it carries CE, and over what time.
Both print one JSON object when done.

    python -m ccemu.programs.udpgen send --dst 10.0.0.2 --rate-pps 3000 --seconds 3 --credit
    python -m ccemu.programs.udpgen recv --bind 10.0.0.2 --seconds 5
    python -m ccemu.programs.udpgen recv --bind 10.0.0.2 --seconds 60 --idle-s 2
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time

CCEMU_MAGIC = 0xCCE1
CCEMU_TYPE_CREDIT = 2
CCEMU_TYPE_DATA = 3
DEFAULT_PORT = 0xB000
ECN_MASK, ECN_CE = 3, 3
ECN_UE = 1  # ECT(1): TCD's undetermined mark (transport/wire-format.md)
# A credit is a minimum Ethernet frame: 60 bytes = 14 + 20 (IP) + 8 (UDP) + 18.
CREDIT_PAYLOAD_BYTES = 18


def header(kind: int, seq: int) -> bytes:
    return struct.pack("!HBxI", CCEMU_MAGIC, kind, seq)


def send(args) -> dict:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, args.ecn)
    sock.bind(("0.0.0.0", args.sport))
    kind, size = (CCEMU_TYPE_CREDIT, CREDIT_PAYLOAD_BYTES) if args.credit else (CCEMU_TYPE_DATA, args.size)
    gap = 1.0 / args.rate_pps
    start = time.perf_counter()
    sent = blocked = 0
    total = round(args.rate_pps * args.seconds)
    while sent < total:
        due = start + sent * gap
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        payload = header(kind, sent).ljust(size, b"\0")
        try:
            sock.sendto(payload, (args.dst, args.port))
        except BlockingIOError:
            blocked += 1
        sent += 1
    return {"sent": sent, "blocked": blocked, "seconds": time.perf_counter() - start}


def recv(args) -> dict:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind((args.bind, args.port))
    sock.settimeout(0.2)
    deadline = time.monotonic() + args.seconds
    packets = ce = ue = 0
    first = last = None
    while time.monotonic() < deadline:
        if args.idle_s is not None and last is not None and time.monotonic() - last > args.idle_s:
            break  # the senders are done
        try:
            _, ancillary, _, _ = sock.recvmsg(65535, socket.CMSG_SPACE(4))
        except socket.timeout:
            continue
        now = time.monotonic()
        first = first if first is not None else now
        last = now
        packets += 1
        for level, kind, data in ancillary:
            if level == socket.IPPROTO_IP and kind == socket.IP_TOS:
                ce += data[0] & ECN_MASK == ECN_CE
                ue += data[0] & ECN_MASK == ECN_UE
    return {"packets": packets, "ce": ce, "ue": ue, "first": first, "last": last}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, default=DEFAULT_PORT)
    s.add_argument("--sport", type=int, default=DEFAULT_PORT, help="low 8 bits: the path-id")
    s.add_argument("--rate-pps", type=float, required=True)
    s.add_argument("--seconds", type=float, required=True)
    s.add_argument("--size", type=int, default=1000, help="UDP payload bytes of data datagrams")
    s.add_argument("--credit", action="store_true", help="send minimum-size ccemu credits")
    s.add_argument("--ecn", type=int, default=0, choices=[0, 1, 2, 3], help="ECN codepoint (2 = ECT(0))")
    r = commands.add_parser("recv")
    r.add_argument("--bind", required=True)
    r.add_argument("--port", type=int, default=DEFAULT_PORT)
    r.add_argument("--seconds", type=float, required=True, help="at most this long")
    r.add_argument("--idle-s", type=float, help="stop once nothing came for this long after the first datagram")
    args = parser.parse_args(argv)
    print(json.dumps(send(args) if args.command == "send" else recv(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
