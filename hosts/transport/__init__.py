"""The host transport: a TCP-like reliable byte stream over UDP + BWN (docs/transport.md).

This module gathers the public names; the implementation is split by concern:

* :mod:`hosts.transport.wire` -- the transport header after the BWN header;
* :mod:`hosts.transport.sender` -- :class:`Sender` (RFC 6298 timer, windows, the
  CongestionControl callbacks), with :mod:`hosts.transport.recovery` (its loss
  recovery: SACK/RFC 6675 or NewReno, one module each), :mod:`hosts.transport.pacing`,
  :mod:`hosts.transport.acks` (ACK decoding) and :mod:`hosts.transport.senderlog`
  (its log rows and summary);
* :mod:`hosts.transport.sack` -- the SACK scoreboard (RFC 6675);
* :mod:`hosts.transport.receiver` -- :class:`Receiver` (demux, half-open flows,
  ACKs, limits and counters), with :mod:`hosts.transport.reassembly` (one flow's
  reassembly, SACK blocks and counters, :class:`ReceiverFlow`; the sinks);
* :mod:`hosts.transport.rto` -- :class:`RtoEstimator` (RFC 6298);
* :mod:`hosts.transport.source` -- what is sent (pattern, file, bytes);
* :mod:`hosts.transport.loop` -- sockets and the epoll event loop;
* :mod:`hosts.sim.channel` -- a simulated channel with a fake clock (tests);
* :mod:`hosts.sim.netsim` -- the same over a network of ports (eq. 6
  feedback, the RFC 2597 edge model), :mod:`hosts.sim.scenarios` the papers'
  topologies on it.
"""
from __future__ import annotations

from hosts.transport.reassembly import FileSink, MemorySink, ReceiverFlow, Sink
from hosts.transport.receiver import Receiver
from hosts.transport.rto import RtoEstimator
from hosts.transport.sender import Sender, SenderConfig, SenderState
from hosts.transport.source import BytesSource, FileSource, PatternSource, StreamSource, pattern_bytes
from hosts.transport.wire import DEFAULT_MSS_BYTES, HEADERS_LEN, TRANSPORT_HEADER_LEN, TransportHeader

__all__ = [
    "BytesSource", "DEFAULT_MSS_BYTES", "FileSink", "FileSource", "HEADERS_LEN", "MemorySink",
    "PatternSource", "Receiver", "ReceiverFlow", "RtoEstimator", "Sender", "SenderConfig",
    "SenderState", "Sink", "StreamSource", "TRANSPORT_HEADER_LEN", "TransportHeader",
    "pattern_bytes",
]
