"""The transport header contract: the codec, the fast packers and the committed
vectors of docs/transport-vectors.json agree; malformed options are refused."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hosts.cc.newreno import NewReno
from hosts.transport.reassembly import MemorySink
from hosts.transport.receiver import Receiver
from hosts.transport.sender import Sender, SenderConfig
from hosts.transport.source import PatternSource
from hosts.transport.vectors import header_vectors, invalid_vectors
from hosts.transport.wire import (
    F_ACK,
    F_DATA,
    F_RST,
    F_SYN,
    HEADERS_LEN,
    OPT_RCV_STATS,
    RCV_STATS_STRUCT,
    OptionError,
    TransportHeader,
    encode_options,
    pack_ack_headers,
    pack_data_headers,
    parse_options,
)
from bwn.protocol.wire import BWN_HEADER_LEN

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "docs" /
                      "transport-vectors.json").read_text())


def test_committed_vectors_are_what_the_generator_makes() -> None:
    assert VECTORS["header"] == header_vectors()
    assert VECTORS["invalid_options"] == invalid_vectors()


def test_the_generator_prints_the_committed_file_byte_for_byte(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m hosts.transport.vectors > docs/transport-vectors.json` rewrites the
    committed file exactly: same keys, 2-space indent, one final newline (no diff
    churn when it is regenerated)."""
    from hosts.transport import vectors as transport_vectors
    transport_vectors.main()
    committed = (Path(__file__).resolve().parents[1] / "docs" / "transport-vectors.json").read_text()
    assert capsys.readouterr().out == committed
    assert committed.endswith("}\n") and committed.splitlines()[1].startswith('  "hdr_words_base": ')


@pytest.mark.parametrize("vec", VECTORS["header"], ids=lambda v: v["name"][:40])
def test_codec_matches_vectors(vec: dict) -> None:
    raw = bytes.fromhex(vec["hex"])
    h = TransportHeader.unpack(b"\0" * BWN_HEADER_LEN + raw)
    f = vec["fields"]
    assert (h.version, h.flags, h.hdr_words, h.flow_id, h.seq, h.ack, h.rwnd_bytes,
            h.ts_val_us, h.ts_ecr_us) == (f["version"], f["flags"], f["hdr_words"],
                                          f["flow_id"], f["seq"], f["ack"], f["rwnd_bytes"],
                                          f["ts_val_us"], f["ts_ecr_us"])
    assert len(raw) == 4 * f["hdr_words"]
    o = h.options
    assert o.sack_permitted == vec["options"]["sack_permitted"]
    assert [list(b) for b in o.sack_blocks] == vec["options"]["sack_blocks"]
    assert (None if o.rcv_stats is None else list(o.rcv_stats)) == vec["options"]["rcv_stats"]
    assert h.pack() == raw


@pytest.mark.parametrize("vec", VECTORS["header"], ids=lambda v: v["name"][:40])
def test_fast_packers_match_vectors(vec: dict) -> None:
    f, o = vec["fields"], vec["options"]
    opts = encode_options(sack_permitted=o["sack_permitted"],
                          sack_blocks=[tuple(b) for b in o["sack_blocks"]],
                          rcv_stats=o["rcv_stats"])
    buf = bytearray(HEADERS_LEN + 128)
    if f["flags"] & F_ACK:
        n = pack_ack_headers(buf, f["flags"], f["flow_id"], f["ack"], f["rwnd_bytes"],
                             f["ts_val_us"], f["ts_ecr_us"], None, opts)
    else:
        n = pack_data_headers(buf, f["flags"], f["flow_id"], f["seq"], f["ts_val_us"], opts)
    assert bytes(buf[BWN_HEADER_LEN:n]).hex() == vec["hex"]


@pytest.mark.parametrize("vec", VECTORS["invalid_options"], ids=lambda v: v["name"][:40])
def test_malformed_options_are_refused(vec: dict) -> None:
    raw = bytes.fromhex(vec["hex"])
    with pytest.raises(OptionError, match=vec["error"]):
        parse_options(raw, 0, len(raw))


def test_unknown_options_are_skipped_and_eol_ends_the_list() -> None:
    raw = bytes([9, 4, 0xAA, 0xBB]) + encode_options(sack_permitted=True) + bytes([0, 77, 1])
    assert parse_options(raw, 0, len(raw)).sack_permitted


def _syn(options: bytes, words_delta: int = 0) -> bytes:
    buf = bytearray(HEADERS_LEN + len(options))
    pack_data_headers(buf, F_SYN, 5, 0, 0, options)
    buf[BWN_HEADER_LEN + 2] += words_delta
    return bytes(buf)


def test_receiver_counts_lying_hdr_words_and_bad_options() -> None:
    out = []
    rx = Receiver(lambda v, a: out.append(bytes(v)) or True, lambda a, f: MemorySink())
    rx.on_datagram(_syn(b"", words_delta=5), ("h", 1), 0)          # header beyond datagram
    rx.on_datagram(_syn(b"", words_delta=-1), ("h", 1), 0)         # below 9 words
    rx.on_datagram(_syn(bytes.fromhex("0101030a")), ("h", 1), 0)   # option runs past the end
    assert rx.stats.malformed_length == 2 and rx.stats.malformed_options == 1
    assert out == [] and not rx.flows
    rx.on_datagram(_syn(encode_options(sack_permitted=True)), ("h", 1), 0)
    ans = TransportHeader.unpack(out[-1])
    assert ans.flags == F_SYN | F_ACK and ans.options.sack_permitted


def test_sender_counts_acks_with_bad_options() -> None:
    s = Sender(NewReno(), PatternSource(10, 1000), lambda v: True, flow_id=5)
    s.start(0)
    buf = bytearray(HEADERS_LEN + 4)
    n = pack_ack_headers(buf, F_SYN | F_ACK, 5, 0, 65536, 0, 0, None, bytes.fromhex("0101030a"))
    s.on_datagram(bytes(buf[:n]), 1000)
    assert s.bad_packets == 1 and s.state.value == "connecting"
    n = pack_ack_headers(buf, F_SYN | F_ACK, 5, 0, 65536, 0, 0, None,
                         encode_options(sack_permitted=True))
    s.on_datagram(bytes(buf[:n]), 2000)
    assert s.state.value == "established" and s.sack


def test_receiver_summary_and_log_row_name_each_counter() -> None:
    """A flow's summary (bwn-recv --summary-json) and its log row (--log) report each
    counter under its documented name (docs/transport.md), the status, the duration
    from the first packet to the close (or the last packet), and the goodput."""
    from hosts.transport.reassembly import ReceiverFlow
    from hosts.flowlog import RECEIVER_FIELDS
    flow = ReceiverFlow(("10.0.0.1", 4242), 9, MemorySink(), 65536, 1_000_000, sack_ok=True)
    counters = {"segments": 11, "duplicate_segments": 2, "out_of_order_segments": 3,
                "spurious_retransmissions": 4, "beyond_window_segments": 5, "reordered_segments": 6,
                "acks_sent": 7, "sack_blocks_sent": 8, "ce_segments": 9}
    for name, value in counters.items():
        setattr(flow, name, value)
    flow.ecn_ok = True
    flow.payload_bytes_by_dscp = {14: 50_000, 10: 203_000}
    flow.rcv_nxt, flow.ooo_bytes, flow.last_us = 250_000, 3000, 2_000_000
    flow.echo = (2, 98, 10_000, -500)
    open_summary = flow.summary(5_000_000)
    assert open_summary == {"flow_id": 9, "peer": "10.0.0.1:4242", "status": "incomplete",
                            "bytes": 250_000, "duration_s": 1.0, "goodput_bps": 2e6, "sack": True,
                            "ecn": True, **counters, "payload_bytes_by_dscp": {"10": 203_000, "14": 50_000},
                            "out": None}
    flow.closed_us, flow.complete = 3_000_000, True
    assert flow.summary(9_000_000)["status"] == "complete"
    assert (flow.summary(0)["duration_s"], flow.summary(0)["goodput_bps"]) == (2.0, 1e6)
    flow.complete, flow.aborted = False, True
    assert flow.summary(0)["status"] == "reset"
    flow.closed_us = flow.first_us                                   # no time: no goodput
    assert (flow.summary(0)["duration_s"], flow.summary(0)["goodput_bps"]) == (0.0, None)

    rx = Receiver(lambda v, a: True, lambda a, f: MemorySink())
    row = rx._row(flow, 1_500_000)
    assert row == {"time_s": 0.5, "flow_id": 9, "peer": "10.0.0.1:4242", "delivered_bytes": 250_000,
                   "ooo_bytes": 3000, "segments": 11, "duplicate_segments": 2,
                   "out_of_order_segments": 3, "acks_sent": 7, "hop_count": 2, "ebn_code": 98,
                   "narrow_kbps": 10_000, "tight_kbps": -500, "spurious_retransmissions": 4,
                   "sack_blocks_sent": 8}
    assert set(row) <= set(RECEIVER_FIELDS)
    flow.echo = None                                                  # nothing echoed yet
    assert [rx._row(flow, 0)[k] for k in ("hop_count", "ebn_code", "narrow_kbps", "tight_kbps")] == [None] * 4


def test_sender_summary_names_each_counter_and_the_status() -> None:
    """bwn-send's --summary-json: each counter under its documented name
    (docs/transport.md, "Summary"), the receiver's counts from its FIN|ACK (None
    without one), the status, and duration and goodput from the handshake to the
    last data acknowledged."""
    from hosts.transport.sender import SenderState
    s = Sender(NewReno(), PatternSource(10_000, 1000), lambda v: True, flow_id=5)
    counters = {"packets_sent": 12, "payload_bytes_sent": 11_000, "retransmits": 2, "timeouts": 1,
                "fast_recoveries": 3, "rescue_retransmits": 4, "forced_segments": 5, "sack_reneging": 6,
                "acks_received": 7, "bad_packets": 8, "ecn_echoes": 10, "ecn_reductions": 11}
    for name, value in counters.items():
        setattr(s, name, value)
    s.dupacks_total = 9
    s.established_us, s.data_done_us, s.state = 1_000_000, 3_000_000, SenderState.DONE
    s.st.delivered_bytes, s.st.cwnd, s.st.ssthresh, s.st.min_rtt_us = 10_000, 12.34567, 8.0, 41_500
    summary = s.summary(9_000_000)
    expected = {"flow_id": 5, "algo": "newreno", "status": "complete", "bytes": 10_000,
                "duration_s": 2.0, "goodput_bps": 40_000.0, "mss_bytes": 1412, "sack": False,
                "ecn": False, **counters,
                "dupacks": 9, "receiver_segments": None, "duplicate_segments": None,
                "out_of_order_segments": None, "spurious_retransmits": None, "final_cwnd": 12.346,
                "final_ssthresh": 8.0, "min_rtt_ms": 41.5}
    assert {k: summary[k] for k in expected} == expected
    s.receiver_stats = (20, 1, 2, 3)
    s.st.ssthresh = float("inf")
    s.interrupted = True
    summary = s.summary(9_000_000)
    assert [summary[k] for k in ("receiver_segments", "duplicate_segments", "out_of_order_segments",
                                 "spurious_retransmits", "final_ssthresh", "status")] == [
        20, 1, 2, 3, None, "interrupted"]
    s.state, s.fail_reason = SenderState.FAILED, "reset by the receiver"
    assert s.summary(0)["status"] == "failed: reset by the receiver"
    s.state, s.data_done_us, s.end_us = SenderState.ESTABLISHED, None, None
    summary = s.summary(2_000_000)                        # still running: up to now
    assert (summary["status"], summary["duration_s"], summary["goodput_bps"]) == ("incomplete", 1.0, 80_000.0)
    s.established_us = None                               # never connected: no duration
    assert (s.summary(0)["duration_s"], s.summary(0)["goodput_bps"]) == (None, None)


def _established_sender(out: list, size: int = 3000) -> "Sender":
    s = Sender(NewReno(), PatternSource(size, 1000), lambda v: out.append(bytes(v)) or True, flow_id=5,
               config=SenderConfig(mss_bytes=1000))
    s.start(0)
    buf = bytearray(HEADERS_LEN + 4)
    n = pack_ack_headers(buf, F_SYN | F_ACK, 5, 0, 65536, 0, 0, None, encode_options(sack_permitted=True))
    s.on_datagram(bytes(buf[:n]), 1000)
    assert s.state.value == "established"
    return s


def test_abort_tells_the_receiver_with_a_rst_once() -> None:
    """A second Ctrl-C: a RST at the next sequence number, the flow failed with the reason."""
    out: list = []
    s = _established_sender(out)
    sent = len(out)
    s.abort(5000, "interrupted twice")
    rst = TransportHeader.unpack(out[-1])
    assert len(out) == sent + 1 and rst.flags == F_RST
    assert (rst.flow_id, rst.seq) == (5, s.snd_nxt)
    assert (s.state.value, s.fail_reason, s.end_us, s.next_deadline_us()) == (
        "failed", "interrupted twice", 5000, None)
    s.abort(6000, "again")                                   # finished: nothing more
    assert len(out) == sent + 1 and s.fail_reason == "interrupted twice" and s.end_us == 5000


def test_an_interrupt_before_the_handshake_fails_the_flow() -> None:
    s = Sender(NewReno(), PatternSource(3000, 1000), lambda v: True, flow_id=5)
    s.start(0)
    s.finish_now(700)
    assert (s.state.value, s.fail_reason, s.end_us) == (
        "failed", "interrupted before the connection was established", 700)
    assert s.interrupted


def test_an_interrupt_ends_the_stream_at_the_bytes_sent() -> None:
    out: list = []
    s = _established_sender(out, size=100_000)
    s.pump(2000)
    sent_bytes = s.snd_max
    assert 0 < sent_bytes < 100_000
    s.finish_now(3000)
    assert s.interrupted and s.stream_end == sent_bytes and s.state.value == "established"


def test_port_unreachable_ends_the_flow_only_when_everything_was_acknowledged() -> None:
    out: list = []
    s = _established_sender(out)
    s.on_unreachable(2000)                                   # data outstanding: the timers decide
    assert s.state.value == "established"
    s.stream_end, s.snd_una = 3000, 3000                     # every byte acknowledged, FIN unanswered
    s.on_unreachable(9000)
    assert (s.state.value, s.end_us, s.data_done_us) == ("done", 9000, 9000)


def test_unpack_refuses_a_header_its_datagram_cannot_hold() -> None:
    """Hostile input: each length the header claims is checked against the bytes there
    (BWN header first, so the transport header starts at byte 24)."""
    buf = bytearray(HEADERS_LEN + 8)
    n = pack_data_headers(buf, F_DATA, 7, 1000, 5, encode_options(sack_permitted=True))   # 1 option word
    pkt = bytes(buf[:n]) + b"payload!"
    h = TransportHeader.unpack(pkt)
    assert (h.version, h.hdr_words, h.flow_id, h.seq) == (1, 10, 7, 1000)
    assert h.options_raw == pkt[HEADERS_LEN:HEADERS_LEN + 4]        # the option word, not the payload
    with pytest.raises(ValueError) as err:
        TransportHeader.unpack(pkt[:BWN_HEADER_LEN + 35])
    assert str(err.value) == f"transport header needs 36 bytes at offset {BWN_HEADER_LEN}, got 35"
    short = bytearray(pkt)
    short[BWN_HEADER_LEN + 2] = 8                                    # fewer words than the fixed header
    with pytest.raises(ValueError) as err:
        TransportHeader.unpack(bytes(short))
    assert str(err.value) == f"hdr_words 8 does not fit a {len(pkt) - BWN_HEADER_LEN}-byte transport header (at least 9)"
    long = bytearray(pkt[:HEADERS_LEN + 4])
    long[BWN_HEADER_LEN + 2] = 11                                    # one word more than the datagram has
    with pytest.raises(ValueError) as err:
        TransportHeader.unpack(bytes(long))
    assert str(err.value) == "hdr_words 11 does not fit a 40-byte transport header (at least 9)"
    other = bytearray(pkt)
    other[BWN_HEADER_LEN] = 2                                        # a later version is reported as such
    assert TransportHeader.unpack(bytes(other)).version == 2


def test_the_sender_counts_each_unusable_datagram_once_by_its_reason() -> None:
    """Too short, a foreign flow id, bad options, no ACK flag, an ACK of data never
    sent: each is counted once in bad_packets (the summary's figure), none changes
    the flow."""
    s = Sender(NewReno(), PatternSource(10_000, 1000), lambda v: True, flow_id=5,
               config=SenderConfig(mss_bytes=1000))
    s.start(0)
    buf = bytearray(HEADERS_LEN + 4)
    n = pack_ack_headers(buf, F_SYN | F_ACK, 5, 0, 65536, 0, 0, None)
    s.on_datagram(bytes(buf[:n]), 1000)
    assert s.state.value == "established" and s.bad_packets == 0
    bad = [bytes(buf[:HEADERS_LEN - 1])]                                            # too short
    n = pack_ack_headers(buf, F_ACK, 6, 0, 65536, 0, 0, None)
    bad.append(bytes(buf[:n]))                                                      # another flow
    n = pack_ack_headers(buf, F_ACK, 5, 0, 65536, 0, 0, None, bytes.fromhex("0101030a"))
    bad.append(bytes(buf[:n]))                                                      # bad options
    n = pack_ack_headers(buf, 0, 5, 0, 65536, 0, 0, None)
    bad.append(bytes(buf[:n]))                                                      # no ACK flag
    n = pack_ack_headers(buf, F_ACK, 5, s.snd_max + 1000, 65536, 0, 0, None)
    bad.append(bytes(buf[:n]))                                                      # never sent
    for i, pkt in enumerate(bad, 1):
        s.on_datagram(pkt, 2000 + i)
        assert s.bad_packets == i
    assert s.snd_una == 0 and s.state.value == "established"


def test_an_ack_without_options_is_exactly_the_headers_long() -> None:
    buf = bytearray(HEADERS_LEN + 40)
    assert pack_ack_headers(buf, F_ACK, 5, 0, 65536, 0, 0, None) == HEADERS_LEN


def test_malformed_options_are_refused_with_what_was_wrong() -> None:
    with pytest.raises(OptionError) as err:
        encode_options(sack_blocks=[(5, 5)])
    assert str(err.value) == "SACK block must have 0 <= left < right < 2**64, got [5, 5)"
    stats_len = 2 + RCV_STATS_STRUCT.size
    bad = bytes([OPT_RCV_STATS, stats_len - 1]) + bytes(stats_len - 3)
    bad += bytes(-len(bad) % 4)
    with pytest.raises(OptionError) as err:
        parse_options(bad, 0, len(bad))
    assert str(err.value) == f"RCV_STATS must have length {stats_len}, got {stats_len - 1}"
