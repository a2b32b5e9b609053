"""NewReno: RFC 5681 congestion control with RFC 6582 fast recovery.

Everything is the default behaviour of :class:`~hosts.cc.base.CongestionControl`:

* slow start and congestion avoidance, RFC 5681 sec. 3.1 (cwnd += 1 segment per ACK
  below ssthresh, += 1/cwnd per acknowledged segment above it);
* after three duplicate ACKs, RFC 5681 sec. 3.2 / RFC 6582 sec. 3.2 step 3:
  ssthresh = max(FlightSize / 2, 2 segments) (eq. 4), cwnd = ssthresh + 3;
  each further duplicate ACK inflates cwnd by one segment (step 4);
* a partial ACK deflates cwnd by the amount acknowledged and adds one segment back
  (RFC 6582 step 5) while the transport retransmits the next hole;
* the full ACK ends recovery with cwnd = min(ssthresh, FlightSize + 1 segment)
  (RFC 6582 step 6, option 1);
* a retransmission timeout sets ssthresh = max(FlightSize / 2, 2) and cwnd = 1
  (RFC 5681 sec. 3.1 eq. 4 and the loss window).

The transport (hosts.transport.sender) keeps the recovery point ``recover``.
"""
from __future__ import annotations

from typing import ClassVar, Literal

from .base import CongestionControl


class NewReno(CongestionControl):
    """NewReno (RFC 5681 + RFC 6582): the reference loss-based sender."""

    name: ClassVar[str] = "newreno"
    recovery_style: ClassVar[Literal["newreno", "reno"]] = "newreno"
