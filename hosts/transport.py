"""The host transport: a TCP-like reliable byte stream over UDP + BWN (docs/transport.md).

This module gathers the public names; the implementation is split by concern:

* :mod:`bwn.hosts.transport_wire` -- the transport header after the BWN header;
* :mod:`bwn.hosts.transport_sender` -- :class:`Sender` (SACK/RFC 6675 or NewReno
  loss recovery, RFC 6298 timer, windows, pacing, the CongestionControl callbacks);
* :mod:`bwn.hosts.transport_sack` -- the SACK scoreboard (RFC 6675);
* :mod:`bwn.hosts.transport_receiver` -- :class:`Receiver` (demux, half-open flows,
  reassembly, ACKs, SACK blocks, limits and counters);
* :mod:`bwn.hosts.transport_rto` -- :class:`RtoEstimator` (RFC 6298);
* :mod:`bwn.hosts.transport_source` -- what is sent (pattern, file, bytes);
* :mod:`bwn.hosts.transport_loop` -- sockets and the epoll event loop;
* :mod:`bwn.hosts.transport_sim` -- a simulated channel with a fake clock (tests);
* :mod:`bwn.hosts.transport_netsim` -- the same over a network of ports (eq. 6
  feedback, the RFC 2597 edge model), :mod:`bwn.hosts.netsim_scenarios` the papers'
  topologies on it.
"""
from __future__ import annotations

from .transport_receiver import FileSink, MemorySink, Receiver, ReceiverFlow, Sink
from .transport_rto import RtoEstimator
from .transport_sender import Sender, SenderConfig, SenderState
from .transport_source import BytesSource, FileSource, PatternSource, StreamSource, pattern_bytes
from .transport_wire import (
    DEFAULT_MSS_BYTES,
    HEADERS_LEN,
    TRANSPORT_HEADER_LEN,
    TransportHeader,
)

__all__ = [
    "BytesSource", "DEFAULT_MSS_BYTES", "FileSink", "FileSource", "HEADERS_LEN", "MemorySink",
    "PatternSource", "Receiver", "ReceiverFlow", "RtoEstimator", "Sender", "SenderConfig",
    "SenderState", "Sink", "StreamSource", "TRANSPORT_HEADER_LEN", "TransportHeader",
    "pattern_bytes",
]
