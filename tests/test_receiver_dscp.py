"""The receiver counts each flow's new payload by the DSCP of the segment that
brought it (GTCP's compliant and best-effort components: docs/transport.md)."""
from __future__ import annotations

from hosts.transport.reassembly import MemorySink
from hosts.transport.receiver import Receiver
from hosts.transport.wire import F_DATA, F_FIN, F_SYN, HEADERS_LEN, encode_options, pack_data_headers

AF11, AF13 = 10, 14
PEER = ("10.0.1.1", 5000)


def packet(flags: int, seq: int, payload: bytes = b"", options: bytes = b"") -> bytes:
    buf = bytearray(HEADERS_LEN + len(options))
    n = pack_data_headers(buf, flags, 7, seq, 0, options)
    return bytes(buf[:n]) + payload


def test_new_bytes_are_counted_once_by_the_dscp_they_first_came_with():
    flows = []
    rx = Receiver(lambda v, a: True, lambda a, f: flows.append(MemorySink()) or flows[-1])
    rx.on_datagram(packet(F_SYN, 0, options=encode_options(sack_permitted=True)), PEER, 0)
    rx.on_datagram(packet(F_DATA, 0, b"a" * 1000), PEER, 1, dscp=AF11)
    rx.on_datagram(packet(F_DATA, 2000, b"c" * 1000), PEER, 2, dscp=AF13)     # out of order
    rx.on_datagram(packet(F_DATA, 1000, b"b" * 1000), PEER, 3, dscp=AF11)     # fills the hole
    rx.on_datagram(packet(F_DATA, 1000, b"b" * 1000), PEER, 4, dscp=AF13)     # a duplicate
    rx.on_datagram(packet(F_DATA, 2500, b"c" * 500 + b"d" * 1000), PEER, 5, dscp=0)   # half new
    rx.on_datagram(packet(F_DATA | F_FIN, 4000), PEER, 6)
    (flow,) = rx.flows.values()
    summary = flow.summary(7)
    assert summary["bytes"] == 4000 and summary["status"] == "complete"
    assert summary["payload_bytes_by_dscp"] == {"0": 1000, "10": 2000, "14": 1000}


def test_the_event_loop_reads_the_dscp_of_a_real_datagram():
    """Over loopback, a datagram sent with TOS = AF11 << 2 | ECT(0): the ancillary
    data the receiver's loop reads gives the DSCP and the ECN bits apart."""
    import socket

    from hosts.transport.loop import ECN_MASK, IP_RECVTOS, TOS_CMSG_SPACE, tos_of
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.bind(("127.0.0.1", 0))
        rx.settimeout(5)
        rx.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)
        tx.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, AF11 << 2 | 0x02)
        tx.sendto(b"x", rx.getsockname())
        _data, cmsgs, _flags, _addr = rx.recvmsg(16, TOS_CMSG_SPACE)
        tos = tos_of(cmsgs)
        assert (tos >> 2, tos & ECN_MASK) == (AF11, 0x02)
        assert tos_of([]) == 0
    finally:
        rx.close()
        tx.close()
