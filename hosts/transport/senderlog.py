"""What a sender reports: its time-series row and its end-of-flow summary.

The row's columns are :data:`hosts.flowlog.SENDER_FIELDS` (``bwn-send --log``);
the summary is ``bwn-send --summary-json`` (docs/transport.md, "Logs" and
"Summary"). Both read a :class:`hosts.transport.sender.Sender` and change nothing.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Protocol, Tuple

from bwn.protocol.wire import ebn_decode_kbps
from hosts.cc.base import CcState, CongestionControl, Feedback
from hosts.flowlog import RttSamples, rtt_stats_ms
from hosts.transport.recovery.base import LossRecovery
from hosts.transport.rto import RtoEstimator


class ReportingSender(Protocol):
    """What a sender's row and summary read (:class:`hosts.transport.sender.Sender`)."""

    flow_id: int
    cc: CongestionControl
    st: CcState
    feedback: Optional[Feedback]
    rto: RtoEstimator
    recovery: LossRecovery
    rtt_samples: RttSamples
    status: str
    mss_bytes: int
    sack: bool
    stream_end: Optional[int]
    start_us: Optional[int]
    established_us: Optional[int]
    data_done_us: Optional[int]
    end_us: Optional[int]
    last_rtt_sample_us: Optional[int]
    receiver_stats: Optional[Tuple[int, int, int, int]]
    packets_sent: int
    payload_bytes_sent: int
    retransmits: int
    timeouts: int
    fast_recoveries: int
    rescue_retransmits: int
    forced_segments: int
    sack_reneging: int
    ecn: bool
    ecn_echoes: int
    ecn_reductions: int
    acks_received: int
    dupacks_total: int
    bad_packets: int


def log_row(sender: ReportingSender, now_us: int) -> Dict[str, Any]:
    """One row of the flow's time series at ``now_us``."""
    s = sender
    st = s.st
    fb = s.feedback
    t0 = s.start_us if s.start_us is not None else now_us
    return {
        "time_s": round((now_us - t0) / 1e6, 6),
        "flow_id": s.flow_id,
        "algo": s.cc.name,
        "cwnd": round(st.cwnd, 4),
        "ssthresh": st.ssthresh,
        "pacing_rate_bps": st.pacing_rate_bps,
        "rtt_sample_us": s.last_rtt_sample_us,
        "srtt_us": None if st.srtt_us is None else round(st.srtt_us, 1),
        "min_rtt_us": st.min_rtt_us,
        "rto_us": s.rto.rto_us,
        "bytes_in_flight": st.bytes_in_flight,
        "delivered_bytes": st.delivered_bytes,
        "retransmits": s.retransmits,
        "timeouts": s.timeouts,
        "in_recovery": int(st.in_recovery),
        "estimate_bps": st.estimate_bps,
        "echo_hop_count": None if fb is None else fb.hop_count,
        "echo_ebn_code": None if fb is None else fb.ebn_code,
        "echo_ebn_kbps": (None if fb is None or fb.ebn_code is None
                          else round(ebn_decode_kbps(fb.ebn_code) or 0.0, 3)),
        "echo_narrow_kbps": None if fb is None else fb.narrow_kbps,
        "echo_tight_kbps": None if fb is None else fb.tight_kbps,
        "extra": dict(st.extra) if st.extra else None,
        "pipe_bytes": st.pipe_bytes,
        "sacked_bytes": s.recovery.sacked_bytes,
    }


def summary(sender: ReportingSender, now_us: int) -> Dict[str, Any]:
    """The end-of-flow figures (docs/transport.md, "Summary")."""
    s = sender
    begin = s.established_us
    end = s.data_done_us if s.data_done_us is not None else (s.end_us or now_us)
    duration_s = None if begin is None else max(end - begin, 0) / 1e6
    delivered = s.st.delivered_bytes
    goodput = (delivered * 8 / duration_s) if duration_s else None
    rs = s.receiver_stats
    out: Dict[str, Any] = {
        "flow_id": s.flow_id,
        "algo": s.cc.name,
        "status": s.status,
        "bytes": delivered,
        "stream_bytes": s.stream_end,
        "duration_s": None if duration_s is None else round(duration_s, 6),
        "goodput_bps": None if goodput is None else round(goodput, 1),
        "mss_bytes": s.mss_bytes,
        "sack": s.sack,
        "packets_sent": s.packets_sent,
        "payload_bytes_sent": s.payload_bytes_sent,
        "retransmits": s.retransmits,
        "timeouts": s.timeouts,
        "fast_recoveries": s.fast_recoveries,
        "rescue_retransmits": s.rescue_retransmits,
        "forced_segments": s.forced_segments,
        "sack_reneging": s.sack_reneging,
        "ecn": s.ecn,
        "ecn_echoes": s.ecn_echoes,
        "ecn_reductions": s.ecn_reductions,
        "acks_received": s.acks_received,
        "dupacks": s.dupacks_total,
        "bad_packets": s.bad_packets,
        # The receiver's own counts, from the RCV_STATS option of its FIN|ACK
        # (None when no FIN|ACK arrived): docs/transport.md "Counters".
        "receiver_segments": None if rs is None else rs[0],
        "duplicate_segments": None if rs is None else rs[1],
        "out_of_order_segments": None if rs is None else rs[2],
        "spurious_retransmits": None if rs is None else rs[3],
        "final_cwnd": round(s.st.cwnd, 3),
        "final_ssthresh": s.st.ssthresh if s.st.ssthresh != float("inf") else None,
        "srtt_ms": None if s.rto.srtt_us is None else round(s.rto.srtt_us / 1e3, 3),
        "min_rtt_ms": None if s.st.min_rtt_us is None else s.st.min_rtt_us / 1e3,
    }
    out.update(rtt_stats_ms(s.rtt_samples.values))
    return out
