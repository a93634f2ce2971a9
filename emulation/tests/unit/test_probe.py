import socket
import struct

import pytest

from ccemu.programs.probe import PAYLOAD, PROBE_PORT_BASE, datagram
from ccemu.model.routing import PATH_IDS


def test_a_probe_datagram_carries_its_path_id_in_the_udp_source_port_and_is_sent_to_the_probe_port():
    packet = datagram("10.0.0.1", "10.0.1.7", 37)
    version_ihl, _, _, _, _, ttl, proto, _, src, dst = struct.unpack("!BBHHHBBH4s4s", packet[:20])
    sport, dport, length, checksum = struct.unpack("!HHHH", packet[20:28])
    assert (version_ihl, ttl, proto) == (0x45, 64, socket.IPPROTO_UDP)
    assert (socket.inet_ntoa(src), socket.inet_ntoa(dst)) == ("10.0.0.1", "10.0.1.7")
    assert (sport - PROBE_PORT_BASE, dport) == (37, PROBE_PORT_BASE)
    assert length == 8 + len(PAYLOAD) and packet[28:] == PAYLOAD
    assert checksum == 0  # none: IPv4 allows it, and no offload is left to fill it in


@pytest.mark.parametrize("path_id", [-1, PATH_IDS])
def test_a_path_id_outside_the_range_is_refused(path_id):
    with pytest.raises(ValueError, match="path-id"):
        datagram("10.0.0.1", "10.0.0.2", path_id)
