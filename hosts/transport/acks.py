"""Reading the receiver's datagrams on the sender's side: one flow's ACK decoder.

An ACK is the BWN header (whose echo fields carry the switches' feedback back,
docs/wire-format.md) followed by the transport header and its options
(:mod:`hosts.transport.wire`). :class:`AckDecoder` does what every ACK needs
before the sender's logic sees it, in the order the sender asks:

* :meth:`AckDecoder.header`: the fixed headers, unpacked in one ``struct`` call,
  or None when the datagram is not a well-formed transport datagram of this flow
  (too short, another version or flow, a header length it does not hold);
* :meth:`AckDecoder.options`: the transport options (SACK blocks, SACK
  permitted, the receiver's counters), or None when they are malformed;
* :meth:`AckDecoder.feedback`: the echoed BWN feedback as a
  :class:`hosts.cc.base.Feedback`, decoded once per distinct echo (most ACKs of a
  flow carry the same one);
* :meth:`AckDecoder.send_time_us`: the ACK's send time on the receiver's clock,
  unwrapped from 32 bits to a 64-bit count (SARBE reads it).
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

from hosts.cc.base import Feedback
from hosts.transport.wire import (
    ACK_IN_STRUCT,
    ACK_VK,
    BWN_HEADER_LEN,
    HDR_WORDS,
    HEADERS_LEN,
    TRANSPORT_VERSION,
    OptionError,
    TransportOptions,
    feedback_from_echo,
    parse_options,
    ts_diff_us,
)

_NO_OPTIONS = TransportOptions()

#: ACK_IN_STRUCT's fields: (vk, echo_ebn, echo_narrow, echo_tight, echo_hop, bwn_flags,
#: version, flags, words, flow_id, ack, rwnd, ts_val, ts_ecr)
AckHeader = Tuple[int, int, int, int, int, int, int, int, int, int, int, int, int, int]


class AckDecoder:
    """The decoding state of one flow's ACKs (the last echo, the clock's wraps)."""

    __slots__ = ("flow_id", "last_feedback", "_echo_key", "_ts_raw", "_ts_us")

    def __init__(self, flow_id: int) -> None:
        self.flow_id = flow_id
        self.last_feedback: Optional[Feedback] = None
        self._echo_key: Optional[Tuple[int, int, int, int, int]] = None
        self._ts_raw: Optional[int] = None
        self._ts_us = 0

    def header(self, data: Any) -> Optional[AckHeader]:
        """The fixed headers of ``data``, or None if it is not this flow's."""
        n = len(data)
        if n < HEADERS_LEN:
            return None
        fields = ACK_IN_STRUCT.unpack_from(data)
        vk, tver, words, flow_id = fields[0], fields[6], fields[8], fields[9]
        if (vk != ACK_VK or tver != TRANSPORT_VERSION or flow_id != self.flow_id
                or words < HDR_WORDS or BWN_HEADER_LEN + 4 * words > n):
            return None
        return fields

    @staticmethod
    def options(data: Any, words: int) -> Optional[TransportOptions]:
        """The options after the fixed headers (``words``: the header length in
        32-bit words), or None if they are malformed."""
        if words <= HDR_WORDS:
            return _NO_OPTIONS
        try:
            return parse_options(data, HEADERS_LEN, BWN_HEADER_LEN + 4 * words)
        except OptionError:
            return None

    def feedback(self, bwn_flags: int, echo_hop: int, echo_ebn: int, echo_narrow: int,
                 echo_tight: int) -> Optional[Feedback]:
        """The echoed feedback, decoded again only when the echo changed."""
        key = (bwn_flags, echo_hop, echo_ebn, echo_narrow, echo_tight)
        if key != self._echo_key:
            self._echo_key = key
            self.last_feedback = feedback_from_echo(bwn_flags, echo_hop, echo_ebn, echo_narrow,
                                                    echo_tight)
        return self.last_feedback

    def send_time_us(self, ts_val: int) -> int:
        """The ACK's send time (its 32-bit timestamp) as a 64-bit count of us."""
        if self._ts_raw is None:
            self._ts_us = ts_val
        else:
            self._ts_us += ts_diff_us(ts_val, self._ts_raw)
        self._ts_raw = ts_val
        return self._ts_us
