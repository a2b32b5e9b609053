"""Small pieces shared by the estimate-based sender algorithms.

Nothing here is an algorithm of its own and nothing here subclasses
:class:`~hosts.cc.base.CongestionControl` (so that a registry that walks the
subclasses finds only the seven named algorithms):

* :class:`AckedCounter` -- how many bytes one ACK stands for, duplicate ACKs
  included. This is the "acked" of TCP Westwood's pseudocode, computed with the
  accounting of Mascolo et al. (UCLA CS TR 200017, the one the DFT paper points to
  with "the algorithm shown in [11] must be used"), as in Linux's
  ``westwood_acked_count()``: a duplicate ACK counts as one MSS delivered and the
  cumulative ACK that follows is reduced by what was already counted.
* :class:`RttMin` -- the minimum RTT sample (Vegas's BaseRTT, GTCP's rtt_base,
  Westwood/DFT/SARBE's RTTmin).
* :class:`EstimateRecoveryMixin` -- the congestion-event rules shared by Westwood,
  DFT and SARBE: after three duplicate ACKs ``ssthresh = BWE * RTTmin / seg_size``,
  ``cwnd = min(cwnd, ssthresh)``; after a timeout the same ``ssthresh`` and
  ``cwnd = 1``. See docs/algorithms.md ("Estimate-based recovery") for the
  decisions taken where the papers are silent (window inflation during fast
  recovery, the window at the full ACK, no estimate yet).

Units: bits/s for rates, µs for times, segments for windows.
"""
from typing import Optional

from .base import CcState, AckInfo, MIN_CWND_SEGMENTS

US_PER_S = 1_000_000.0


def as_bool(value) -> bool:
    """A constructor flag that may arrive as a string from ``--param key=value``."""
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("1", "true", "yes", "on"):
            return True
        if v in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"not a boolean: {value!r}")
    return bool(value)


def bdp_segments(rate_bps: float, rtt_us: float, mss_bytes: int) -> float:
    """rate * rtt expressed in segments of ``mss_bytes``: rate[b/s] * rtt[s] / (8 * mss)."""
    return rate_bps * (rtt_us / US_PER_S) / (8.0 * mss_bytes)


class AckedCounter:
    """Bytes one ACK stands for (TCP Westwood's ``acked * pkt_size``).

    A duplicate ACK (``acked_bytes == 0``, ``dupacks > 0``) means one more segment reached the
    receiver: it counts as one MSS and is remembered in ``accounted``. A cumulative
    ACK for more than one MSS (delayed, or the ACK ending a run of duplicates) is
    reduced by what the duplicates already counted, but never below one MSS.
    """

    def __init__(self) -> None:
        self.accounted = 0

    def count(self, ack: AckInfo, mss_bytes: int) -> int:
        """Bytes ``ack`` stands for; 0 for an ACK that is neither new nor a duplicate
        (the SYN-ACK, a stale ACK below ``snd_una``), which callers then ignore."""
        acked_bytes = ack.acked_bytes
        if acked_bytes <= 0:
            if ack.dupacks <= 0:
                return 0
            self.accounted += mss_bytes
            return mss_bytes
        cumul = acked_bytes
        if cumul > mss_bytes:
            if self.accounted >= cumul:
                self.accounted -= cumul
                cumul = mss_bytes
            else:
                cumul -= self.accounted
                self.accounted = 0
        return cumul


class RttMin:
    """Minimum of the RTT samples seen (µs), falling back to the transport's value."""

    def __init__(self) -> None:
        self.value_us: Optional[int] = None

    def update(self, sample_us: Optional[int]) -> None:
        if sample_us is not None and sample_us > 0:
            if self.value_us is None or sample_us < self.value_us:
                self.value_us = sample_us

    def get(self, st: CcState) -> Optional[float]:
        candidates = [v for v in (self.value_us, st.min_rtt_us) if v]
        return float(min(candidates)) if candidates else None


class EstimateRecoveryMixin:
    """Westwood's congestion-event rules, shared by Westwood, DFT and SARBE.

    Mix in *before* :class:`CongestionControl`. The class using it keeps
    ``st.estimate_bps`` up to date and owns an :class:`RttMin` in ``self.rtt_min``.

    * 3rd duplicate ACK: ``ssthresh = BWE * RTTmin / seg_size`` (at least 2);
      ``cwnd = min(cwnd, ssthresh)`` -- in congestion avoidance cwnd drops to
      ssthresh, in slow start it is kept. The three segments that the duplicate
      ACKs report as delivered are added back (``+3``) and every further duplicate
      ACK inflates cwnd by one, as in the NewReno fast recovery of the base class
      and of the NS-2 agents the papers used; partial ACKs deflate as RFC 6582.
    * full ACK: ``cwnd = min(target, FlightSize + 1)`` where ``target`` is the
      window chosen at the 3rd duplicate ACK (RFC 6582 step 6, option 1, with the
      paper's window in place of ssthresh).
    * timeout: ``ssthresh`` as above, ``cwnd = 1``.
    * no estimate or no RTT sample yet: the NewReno rules of the base class.
    """

    rtt_min: RttMin
    _recovery_target: Optional[float] = None

    def estimate_ssthresh(self, st: CcState) -> Optional[float]:
        bw = st.estimate_bps
        rtt_min = self.rtt_min.get(st)
        if not bw or bw <= 0 or not rtt_min:
            return None
        return max(bdp_segments(bw, rtt_min, st.mss_bytes), 2.0)

    def on_enter_recovery(self, st: CcState) -> None:
        ssthresh = self.estimate_ssthresh(st)
        if ssthresh is None:
            super().on_enter_recovery(st)  # type: ignore[misc]
            self._recovery_target = st.ssthresh
        else:
            st.ssthresh = ssthresh
            self._recovery_target = min(st.cwnd, ssthresh)
            # NewReno's inflation by the 3 duplicate ACKs; not with SACK, where the
            # transport's pipe already excludes what the receiver got (RFC 6675).
            st.cwnd = self._recovery_target + (0.0 if st.sack else 3.0)
        st.clamp()

    def on_exit_recovery(self, st: CcState, ack: AckInfo) -> None:
        target = self._recovery_target if self._recovery_target is not None else st.ssthresh
        st.cwnd = min(target, st.flight_segments + 1.0)
        self._recovery_target = None
        st.clamp()

    def on_timeout(self, st: CcState) -> None:
        ssthresh = self.estimate_ssthresh(st)
        if ssthresh is None:
            ssthresh = max(st.flight_segments / 2.0, 2.0)
        st.ssthresh = ssthresh
        st.cwnd = MIN_CWND_SEGMENTS
        self._recovery_target = None
        st.clamp()
