"""The switch's XCP and RCP arithmetic, bit for bit (p4src/v1model/include/control/xcp.p4,
rcp.p4, logexp.p4): the reference model the PTF tests hold the switch to, and
the parameters the controller installs (controller/entries.py).

The dataplane neither divides nor multiplies by a runtime value. Every product and
quotient of the two papers' equations is a sum of base-2 logarithms in log7 units
(128 per octave, as the EBN share, docs/dataplane.md), turned back into a number by
an exponential table:

* :func:`log7` -- ``round(128 * log2(x))`` of an unsigned 64-bit integer, by two
  fixed tables: the position ``k`` of the leading one (a ternary table, one entry
  per bit) and the next :data:`LOG_MANTISSA_BITS` bits, rounded (an exact table of
  the fraction). Error: at most :data:`LOG7_MAX_ERROR` log7 units (0.47 %).
* :func:`exp7` -- ``2 ** (l / 128)`` rounded to an integer, by two fixed tables:
  the fraction ``l & 127`` (the mantissa, 16 bits) and the octave ``l >> 7`` (a
  constant shift per octave). Relative error below 2**-16 plus the final rounding
  (half a unit).

Both tables are constants of the program (``const entries``, generated from this
module into ``p4src/shared/logexp_tables.p4``: ``python -m controller.xr_math
--p4 > p4src/shared/logexp_tables.p4``), so the controller installs nothing for
them. Units in the switch: microseconds, bytes (Ethernet frames, as everywhere in
the dataplane) and kb/s (RCP's rate, the wire unit).

XCP (Katabi, Handley, Rohrs, "Congestion Control for High Bandwidth-Delay
Product Networks", sec. 3.5), per egress port and control interval ``d``:

* eq. (1): ``phi = alpha * d * S - beta * Q``, ``S = C - y / T`` the spare
  bandwidth (``y`` bytes received in the interval's ``T`` us), ``Q`` the
  persistent queue (the smallest queue a packet met in the interval);
* eq. (2): shuffled traffic ``h = max(0, gamma * y * d / T - |phi|)``;
* the control interval ``d`` is the flows' average RTT,
  ``sum(rtt_i^2 s_i / cwnd_i) / sum(rtt_i s_i / cwnd_i)`` over the interval's
  packets (each flow weighs the same);
* ``xi_p = (h + max(phi, 0)) / (d * sum(rtt_i s_i / cwnd_i))`` and
  ``xi_n = (h + max(-phi, 0)) / (d * sum(s_i))``, then per packet
  ``p_i = xi_p * rtt_i^2 * s_i / cwnd_i``, ``n_i = xi_n * rtt_i * s_i`` and the
  feedback ``p_i - n_i`` (eqs. 3-7 of sec. 3.5.2).

RCP (Dukkipati, McKeown, "Why Flow-Completion Time is the Right Metric for
Congestion Control"; Dukkipati et al., "Processor Sharing Flows in the Internet"),
per egress port, every control interval ``T`` (the moving average RTT ``d0``):
``R(t) = R(t - T) * [1 + (T / d0) * (alpha * (C - y / T) - beta * q / d0) / C]``.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from typing import Optional

LOG7_PER_OCTAVE = 128
#: log7 of 0: far below anything exp7 turns into a non-zero number, and sums of a
#: few of them with real logarithms stay within int32.
LOG7_ZERO = -(1 << 24)
#: Bits kept after the leading one by log7 (rounded): the fraction table has
#: 2**LOG_MANTISSA_BITS + 1 entries.
LOG_MANTISSA_BITS = 8
LOG_MANTISSA_MIN = 1 << LOG_MANTISSA_BITS
LOG_KEY_BITS = 64
#: |log7(x) - 128 log2(x)| never exceeds this (x >= 1): the mantissa's rounding,
#: 128 * log2(1 + 2**-(LOG_MANTISSA_BITS + 1)) = 0.36, plus the table's rounding, 0.5.
LOG7_MAX_ERROR = 128 * math.log2(1 + 2.0 ** -(LOG_MANTISSA_BITS + 1)) + 0.5

EXP_MANTISSA_SHIFT = 15           # the mantissa table holds 2**(f/128) * 2**15
EXP_OCTAVE_MIN = -1               # below: 0 (the value is under 0.5)
EXP_OCTAVE_MAX = 48               # above: saturated
EXP7_LOW = EXP_OCTAVE_MIN * LOG7_PER_OCTAVE
EXP7_HIGH = (EXP_OCTAVE_MAX + 1) * LOG7_PER_OCTAVE
EXP7_SATURATED = (1 << 64) - 1

U32 = (1 << 32) - 1
U64 = (1 << 64) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

#: sum_a holds rtt * s / cwnd in 1/1024 us, so that a flow with a large window
#: still adds a precise amount (log7 of 2**10).
A_SCALE_LOG7 = 10 * LOG7_PER_OCTAVE


def log7_of(value: float) -> int:
    """round(128 log2(value)): a constant's log7 (alpha, beta, a unit), computed once."""
    if value <= 0:
        raise ValueError(f"log7 needs a positive value, got {value}")
    return round(LOG7_PER_OCTAVE * math.log2(value))


#: kb/s = bytes/us * 8000: log7(8000).
LOG7_8000 = log7_of(8000)


def _frac_table() -> tuple[int, ...]:
    """m (LOG_MANTISSA_MIN .. 2 * LOG_MANTISSA_MIN) -> round(128 log2(m / LOG_MANTISSA_MIN))."""
    return tuple(round(LOG7_PER_OCTAVE * math.log2(m / LOG_MANTISSA_MIN))
                 for m in range(LOG_MANTISSA_MIN, 2 * LOG_MANTISSA_MIN + 1))


def _mantissa_table() -> tuple[int, ...]:
    """f (0..127) -> round(2**(f/128) * 2**15)."""
    return tuple(round(2 ** (f / LOG7_PER_OCTAVE) * (1 << EXP_MANTISSA_SHIFT))
                 for f in range(LOG7_PER_OCTAVE))


LOG_FRAC = _frac_table()
EXP_MANTISSA = _mantissa_table()


def log7(x: int) -> int:
    """The switch's log7 of an unsigned 64-bit integer (LOG7_ZERO for 0)."""
    if not 0 <= x <= U64:
        raise ValueError(f"log7 takes an unsigned 64-bit integer, got {x}")
    if x == 0:
        return LOG7_ZERO
    k = x.bit_length() - 1
    shift = k - LOG_MANTISSA_BITS
    if shift > 0:
        m = ((x >> (shift - 1)) + 1) >> 1        # the next bits, rounded (may carry to 2 * MIN)
    else:
        m = x << -shift                           # exact
    return LOG7_PER_OCTAVE * k + LOG_FRAC[m - LOG_MANTISSA_MIN]


def exp7(l: int) -> int:
    """The switch's 2**(l/128), an unsigned 64-bit integer (0 below 0.5, saturated above 2**49)."""
    if l < EXP7_LOW:
        return 0
    if l >= EXP7_HIGH:
        return EXP7_SATURATED
    e, f = l >> 7, l & (LOG7_PER_OCTAVE - 1)
    m = EXP_MANTISSA[f]
    if e >= EXP_MANTISSA_SHIFT:
        return m << (e - EXP_MANTISSA_SHIFT)
    shift = EXP_MANTISSA_SHIFT - e
    return (m + (1 << (shift - 1))) >> shift


def sat_add(a: int, b: int, bits: int = 64) -> int:
    """P4's |+| on unsigned values."""
    return min(a + b, (1 << bits) - 1)


def clamp_int32(x: int) -> int:
    return max(INT32_MIN, min(INT32_MAX, x))


# -- XCP ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class XcpConfig:
    """``xcp_port``'s parameters (``set_xcp``) (the XCP paper's alpha, beta, gamma; sec. 3.5), as
    the controller installs them (log7 of each constant)."""

    alpha: float = 0.4
    beta: float = 0.226
    gamma: float = 0.1
    queue_unit_bytes: int = 1514     # BMv2 counts queued packets: bytes per packet
    d_init_us: int = 50_000          # the first interval, before any RTT was seen
    d_min_us: int = 1_000
    d_max_us: int = 2_000_000

    def __post_init__(self) -> None:
        for name in ("alpha", "beta", "gamma"):
            if not 0 < getattr(self, name) < 16:
                raise ValueError(f"XCP {name} must be in (0, 16), got {getattr(self, name)}")
        if self.queue_unit_bytes <= 0:
            raise ValueError(f"queue_unit_bytes must be positive, got {self.queue_unit_bytes}")
        if not 0 < self.d_min_us <= self.d_init_us <= self.d_max_us <= U32:
            raise ValueError("XCP intervals need 0 < d_min_us <= d_init_us <= d_max_us < 2**32, "
                             f"got {self.d_min_us}, {self.d_init_us}, {self.d_max_us}")

    @property
    def params(self) -> dict[str, int]:
        """``set_xcp``'s action parameters (int32 logs as 32-bit two's complement)."""
        return dict(log_alpha=log7_of(self.alpha) & U32, log_beta=log7_of(self.beta) & U32,
                    log_gamma=log7_of(self.gamma) & U32,
                    log_queue_unit=log7_of(self.queue_unit_bytes) & U32,
                    d_init_us=self.d_init_us, log_d_init=log7(self.d_init_us) & U32,
                    log_d_min=log7(self.d_min_us) & U32, log_d_max=log7(self.d_max_us) & U32)


@dataclass
class XcpPort:
    """One egress port's XCP state (the registers of control/xcp.p4, same names)."""

    interval_end: int = 0           # arrival time (us) the interval ends; 0: none yet
    interval_start: int = 0         # arrival time of the packet that opened it
    rx_mark: int = 0                # the port's received bytes before that packet (32 bits)
    sum_a: int = 0                  # sum of rtt s / cwnd, in 1/1024 us
    sum_b: int = 0                  # sum of rtt^2 s / cwnd, us^2
    sum_s: int = 0                  # sum of s (bytes), packets of XCP senders
    queue_min: int = 0              # smallest queue (packets) met in the interval
    d_us: int = 0                   # the control interval in force
    log_d: int = 0
    log_xi_p: int = LOG7_ZERO
    log_xi_n: int = LOG7_ZERO
    # the last close (what the controller and the tests read)
    phi_bytes: int = 0
    shuffle_bytes: int = 0
    closed_us: int = 0              # T
    closed_bytes: int = 0           # y
    closed_queue: int = 0           # Q (packets)
    intervals: int = 0


@dataclass(frozen=True)
class XcpClose:
    """What one interval's close computed (every term, for tests and docs)."""

    t_us: int
    y_bytes: int
    log_d: int
    d_us: int
    t1: int          # alpha d C
    t2: int          # alpha d y / T
    t3: int          # beta Q
    t4: int          # gamma y d / T
    phi: int
    h: int
    log_xi_p: int
    log_xi_n: int


def xcp_close(port: XcpPort, cfg: XcpConfig, now_us: int, rx_before: int, cap_log7: int) -> XcpClose:
    """The close of ``port``'s interval by a packet that arrived at ``now_us``, when
    the port had received ``rx_before`` bytes before it (32-bit count)."""
    p = cfg.params
    la, lb, lg, lq = (_s32(p[k]) for k in ("log_alpha", "log_beta", "log_gamma", "log_queue_unit"))
    t_us = max(now_us - port.interval_start, 1)
    y = (rx_before - port.rx_mark) & U32
    if port.sum_a == 0 or port.sum_s == 0:
        # no packet of an XCP sender in the interval: nobody to give feedback to
        return XcpClose(t_us, y, port.log_d, port.d_us, 0, 0, 0, 0, 0, 0, LOG7_ZERO, LOG7_ZERO)
    log_sa = log7(port.sum_a)
    ld = log7(port.sum_b) - log_sa + A_SCALE_LOG7
    ld = min(max(ld, _s32(p["log_d_min"])), _s32(p["log_d_max"]))
    d_us = min(exp7(ld), U32)
    lc = cap_log7 - LOG7_8000                       # C in bytes per us
    lydt = log7(y) + ld - log7(t_us)                # y d / T, bytes
    t1 = exp7(la + ld + lc)
    t2 = exp7(la + lydt)
    t3 = exp7(lb + log7(port.queue_min) + lq)
    t4 = exp7(lg + lydt)
    phi = t1 - t2 - t3
    h = max(t4 - abs(phi), 0)
    pos, neg = h + max(phi, 0), h + max(-phi, 0)
    log_xi_p = log7(min(pos, U64)) - ld - log_sa + A_SCALE_LOG7
    log_xi_n = log7(min(neg, U64)) - ld - log7(port.sum_s)
    return XcpClose(t_us, y, ld, d_us, t1, t2, t3, t4, phi, h, log_xi_p, log_xi_n)


def xcp_packet_terms(log_rtt: int, log_cwnd: int, log_size: int, log_xi_p: int,
                     log_xi_n: int) -> tuple[int, int, int, int]:
    """(a, b, p, n) of one packet: rtt s / cwnd (1/1024 us), rtt^2 s / cwnd (us^2),
    the positive and the negative feedback (bytes)."""
    la = log_rtt + log_size - log_cwnd
    return (exp7(la + A_SCALE_LOG7), exp7(la + log_rtt), exp7(log_xi_p + la + log_rtt),
            exp7(log_xi_n + log_rtt + log_size))


def xcp_feedback(log_xi_p: int, log_xi_n: int, rtt_us: int, cwnd_bytes: int, size_bytes: int) -> int:
    """The switch's feedback for one packet (bytes, int32): p_i - n_i."""
    _, _, pos, neg = xcp_packet_terms(log7(rtt_us), log7(cwnd_bytes), log7(size_bytes),
                                      log_xi_p, log_xi_n)
    return clamp_int32(pos - neg)


def xcp_packet(port: XcpPort, cfg: XcpConfig, *, now_us: int, rx_bytes: int, size_bytes: int,
               queue_pkts: int, cap_log7: int, rtt_us: int, cwnd_bytes: int) -> Optional[int]:
    """One XR DATA packet at the port, as control/xcp.p4 handles it: open or close the
    interval, account the packet, and return its feedback (None for a packet that is
    not an XCP sender's: rtt or cwnd 0). ``rx_bytes`` is the port's received-byte count
    with this packet (Window's ``rx_bytes``, 32 bits)."""
    rx_before = (rx_bytes - size_bytes) & U32
    p = cfg.params
    if port.interval_end == 0:
        port.interval_start, port.interval_end = now_us, now_us + cfg.d_init_us
        port.rx_mark = rx_before
        port.d_us, port.log_d = cfg.d_init_us, _s32(p["log_d_init"])
        port.log_xi_p = port.log_xi_n = LOG7_ZERO
        port.sum_a = port.sum_b = port.sum_s = 0
        port.queue_min = queue_pkts
    elif now_us >= port.interval_end:
        c = xcp_close(port, cfg, now_us, rx_before, cap_log7)
        port.phi_bytes, port.shuffle_bytes = clamp_int32(c.phi), min(c.h, INT32_MAX)
        port.closed_us, port.closed_bytes = min(c.t_us, U32), c.y_bytes
        port.closed_queue = min(port.queue_min, U32)
        port.intervals = (port.intervals + 1) & U32
        port.log_d, port.d_us = c.log_d, c.d_us
        port.log_xi_p, port.log_xi_n = c.log_xi_p, c.log_xi_n
        port.interval_start, port.interval_end = now_us, now_us + c.d_us
        port.rx_mark = rx_before
        port.sum_a = port.sum_b = port.sum_s = 0
        port.queue_min = queue_pkts
    else:
        port.queue_min = min(port.queue_min, queue_pkts)
    if rtt_us == 0 or cwnd_bytes == 0:
        return None
    a, b, pos, neg = xcp_packet_terms(log7(rtt_us), log7(cwnd_bytes), log7(size_bytes),
                                      port.log_xi_p, port.log_xi_n)
    port.sum_a = sat_add(port.sum_a, a)
    port.sum_b = sat_add(port.sum_b, b)
    port.sum_s = sat_add(port.sum_s, size_bytes)
    return clamp_int32(pos - neg)


# -- RCP ---------------------------------------------------------------------------------

#: RCP's moving average of the RTT gains 2**-RCP_RTT_GAIN_SHIFT (1/64) of each
#: sample's difference: the gain is a shift.
RCP_RTT_GAIN_SHIFT = 6


@dataclass(frozen=True)
class RcpConfig:
    """``rcp_port``'s parameters (``set_rcp``): RCP's alpha and beta (0.1 and 1, the values the RCP
    papers simulate with), the interval's bounds, the lowest rate."""

    alpha: float = 0.1
    beta: float = 1.0
    queue_unit_bytes: int = 1514
    d_init_us: int = 50_000
    d_min_us: int = 1_000
    d_max_us: int = 2_000_000
    rate_min_kbps: int = 8

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            if not 0 < getattr(self, name) < 16:
                raise ValueError(f"RCP {name} must be in (0, 16), got {getattr(self, name)}")
        if self.queue_unit_bytes <= 0:
            raise ValueError(f"queue_unit_bytes must be positive, got {self.queue_unit_bytes}")
        if not 0 < self.d_min_us <= self.d_init_us <= self.d_max_us <= U32:
            raise ValueError("RCP intervals need 0 < d_min_us <= d_init_us <= d_max_us < 2**32, "
                             f"got {self.d_min_us}, {self.d_init_us}, {self.d_max_us}")
        if not 1 <= self.rate_min_kbps <= U32:
            raise ValueError(f"rate_min_kbps must be 1 .. 2**32-1, got {self.rate_min_kbps}")

    @property
    def params(self) -> dict[str, int]:
        return dict(log_alpha=log7_of(self.alpha) & U32, log_beta=log7_of(self.beta) & U32,
                    log_queue_unit=log7_of(self.queue_unit_bytes) & U32, d_init_us=self.d_init_us,
                    d_min_us=self.d_min_us, d_max_us=self.d_max_us, rate_min_kbps=self.rate_min_kbps)


@dataclass
class RcpPort:
    """One egress port's RCP state (the registers of control/rcp.p4, same names)."""

    interval_end: int = 0
    interval_start: int = 0
    rx_mark: int = 0
    rate_kbps: int = 0              # R(t); 0: not set yet (the port's capacity at the first packet)
    d0_us: int = 0                  # moving average RTT; 0: no sample yet
    closed_us: int = 0
    closed_bytes: int = 0
    closed_queue: int = 0
    intervals: int = 0


@dataclass(frozen=True)
class RcpClose:
    t_us: int
    y_bytes: int
    up: int          # R alpha T / d0
    down: int        # R alpha y / (d0 C)
    queue: int       # R beta T q / (d0^2 C)
    rate_kbps: int


def rcp_interval_us(d0_us: int, cfg: RcpConfig) -> int:
    """The next interval: d0 within the bounds (the first one before any RTT: d_init)."""
    if d0_us == 0:
        return cfg.d_init_us
    return min(max(d0_us, cfg.d_min_us), cfg.d_max_us)


def rcp_close(port: RcpPort, cfg: RcpConfig, now_us: int, rx_before: int, queue_pkts: int,
              cap_kbps: int, cap_log7: int) -> RcpClose:
    p = cfg.params
    la, lb, lq = (_s32(p[k]) for k in ("log_alpha", "log_beta", "log_queue_unit"))
    t_us = max(now_us - port.interval_start, 1)
    y = (rx_before - port.rx_mark) & U32
    d0 = rcp_interval_us(port.d0_us, cfg)
    lr, lt, ld0 = log7(port.rate_kbps), log7(t_us), log7(d0)
    up = exp7(lr + la + lt - ld0)
    down = exp7(lr + la + log7(y) + LOG7_8000 - ld0 - cap_log7)
    queue = exp7(lr + lb + lt + log7(queue_pkts) + lq + LOG7_8000 - 2 * ld0 - cap_log7)
    rate = port.rate_kbps + up - down - queue
    rate = min(max(rate, cfg.rate_min_kbps), cap_kbps)
    return RcpClose(t_us, y, up, down, queue, rate)


def rcp_packet(port: RcpPort, cfg: RcpConfig, *, now_us: int, rx_bytes: int, size_bytes: int,
               queue_pkts: int, cap_kbps: int, cap_log7: int, rtt_us: int) -> int:
    """One XR DATA packet at the port, as control/rcp.p4 handles it: the RTT average,
    the interval's open or close; returns the rate the packet is lowered to (kb/s)."""
    rx_before = (rx_bytes - size_bytes) & U32
    if rtt_us != 0:
        if port.d0_us == 0:
            port.d0_us = rtt_us
        else:
            port.d0_us = (port.d0_us + ((rtt_us - port.d0_us) >> RCP_RTT_GAIN_SHIFT)) & U32
    if port.interval_end == 0:
        port.rate_kbps = cap_kbps
        port.interval_start = now_us
        port.interval_end = now_us + rcp_interval_us(port.d0_us, cfg)
        port.rx_mark = rx_before
    elif now_us >= port.interval_end:
        c = rcp_close(port, cfg, now_us, rx_before, queue_pkts, cap_kbps, cap_log7)
        port.rate_kbps = c.rate_kbps
        port.closed_us, port.closed_bytes = min(c.t_us, U32), c.y_bytes
        port.closed_queue = queue_pkts
        port.intervals = (port.intervals + 1) & U32
        port.interval_start = now_us
        port.interval_end = now_us + rcp_interval_us(port.d0_us, cfg)
        port.rx_mark = rx_before
    return port.rate_kbps


def _s32(x: int) -> int:
    x &= U32
    return x - (1 << 32) if x >= 1 << 31 else x


# -- the P4 tables ---------------------------------------------------------------------------

def p4_tables() -> str:
    """``p4src/shared/logexp_tables.p4``: the const entries of log7's and exp7's tables."""
    out = ["/* -*- P4_16 -*- */",
           "/*",
           " * bwn: the constant tables of log7 and exp7 (control/logexp.p4). GENERATED by",
           " * `python -m controller.xr_math --p4 > p4src/shared/logexp_tables.p4` from",
           " * controller/xr_math.py, the reference model; tests/test_xr_math.py checks that",
           " * this file is what it generates. Do not edit by hand.",
           " */",
           "#ifndef __BWN_LOGEXP_TABLES__",
           "#define __BWN_LOGEXP_TABLES__",
           "",
           f"#define LOG7_ZERO ({LOG7_ZERO})",
           f"#define LOG_MANTISSA_BITS {LOG_MANTISSA_BITS}",
           f"#define EXP7_LOW ({EXP7_LOW})",
           f"#define EXP7_HIGH {EXP7_HIGH}",
           f"#define LOG7_8000 {LOG7_8000}",
           f"#define A_SCALE_LOG7 {A_SCALE_LOG7}",
           f"#define RCP_RTT_GAIN_SHIFT {RCP_RTT_GAIN_SHIFT}",
           "",
           "/* The leading one of a 64-bit value at bit k: norm_k (log7's msb table). */",
           "#define LOG7_MSB_ENTRIES \\"]
    for k in range(LOG_KEY_BITS - 1, -1, -1):
        mask = U64 & ~((1 << k) - 1)
        out.append(f"    64w0x{1 << k:016x} &&& 64w0x{mask:016x} : norm_{k}(); \\")
    out.append("")
    out.append(f"/* m ({LOG_MANTISSA_MIN}..{2 * LOG_MANTISSA_MIN}) -> round(128 log2(m / {LOG_MANTISSA_MIN})) (log7's mant table). */")
    out.append("#define LOG7_FRAC_ENTRIES(ACTION) \\")
    for i, v in enumerate(LOG_FRAC):
        out.append(f"    {LOG_MANTISSA_MIN + i} : ACTION({v}); \\")
    out.append("")
    out.append("/* f (0..127) -> round(2^(f/128) * 2^15) (exp7's mant table). */")
    out.append("#define EXP7_MANTISSA_ENTRIES(ACTION) \\")
    for f, m in enumerate(EXP_MANTISSA):
        out.append(f"    {f} : ACTION({m}); \\")
    out.append("")
    out.append(f"/* The octave e ({EXP_OCTAVE_MIN}..{EXP_OCTAVE_MAX}, 8-bit two's complement) -> its shift (exp7's octave table). */")
    out.append("#define EXP7_OCTAVE_ENTRIES \\")
    for e in range(EXP_OCTAVE_MIN, EXP_OCTAVE_MAX + 1):
        name = f"shl_{e - EXP_MANTISSA_SHIFT}" if e >= EXP_MANTISSA_SHIFT else f"shr_{EXP_MANTISSA_SHIFT - e}"
        out.append(f"    8w{e & 0xFF} : {name}(); \\")
    out.append("")
    out.append("#endif")
    return "\n".join(out) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="The switch's XCP/RCP arithmetic (reference model). "
                                             "--p4 writes the P4 tables of log7 and exp7.")
    ap.add_argument("--p4", action="store_true", help="print p4src/shared/logexp_tables.p4")
    args = ap.parse_args(argv)
    if not args.p4:
        ap.print_help()
        return 2
    sys.stdout.write(p4_tables())
    return 0


if __name__ == "__main__":
    sys.exit(main())
