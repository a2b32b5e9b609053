"""controller/xr_math.py: the switch's log7/exp7 tables and XCP's and RCP's per-port
arithmetic (the reference model the PTF tests hold the switch to)."""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from controller import xr_math as xm

REPO = Path(__file__).resolve().parents[1]


def test_generated_p4_tables_are_the_committed_file():
    """p4src/shared/logexp_tables.p4 is what the model generates: the switch's
    tables and the model cannot drift apart."""
    assert (REPO / "p4src" / "shared" / "logexp_tables.p4").read_text() == xm.p4_tables()


def test_log7_error_is_within_its_documented_bound():
    rng = random.Random(7)
    values = list(range(1, 5000)) + [rng.randrange(1, 1 << 64) for _ in range(20000)] + [xm.U64]
    worst = max(abs(xm.log7(x) - 128 * math.log2(x)) for x in values)
    assert worst <= xm.LOG7_MAX_ERROR
    assert xm.LOG7_MAX_ERROR < 0.87          # docs/dataplane.md: under 0.47 %
    assert xm.log7(0) == xm.LOG7_ZERO
    # exact on powers of two
    assert [xm.log7(1 << k) for k in range(64)] == [128 * k for k in range(64)]
    with pytest.raises(ValueError):
        xm.log7(-1)


def test_exp7_is_the_rounded_power_within_its_bound():
    for l in range(xm.EXP7_LOW, xm.EXP7_HIGH):
        exact = 2 ** (l / 128)
        got = xm.exp7(l)
        # mantissa table: relative 2**-16; the final shift: half a unit
        assert abs(got - exact) <= exact * 2.0 ** -16 + 0.5 + 1e-9, l
    assert xm.exp7(xm.EXP7_LOW - 1) == 0
    assert xm.exp7(xm.EXP7_HIGH) == xm.EXP7_SATURATED
    assert xm.exp7(xm.log7(1_000_000)) == pytest.approx(1_000_000, rel=0.005)


def _drive_xcp(load_fraction: float, queue_pkts: int, cap_kbps: int = 10_000,
               rtt_us: int = 20_000, cwnd_bytes: int = 30_000, size: int = 1000):
    """Packets at ``load_fraction`` of the port's capacity over two intervals."""
    cfg, port = xm.XcpConfig(d_init_us=20_000), xm.XcpPort()
    gap_us = round(size * 8000 / (cap_kbps * load_fraction))
    rx, fb = 0, None
    for i in range(int(2.5 * 20_000 / gap_us) + 2):
        rx = (rx + size) & xm.U32
        fb = xm.xcp_packet(port, cfg, now_us=1_000 + i * gap_us, rx_bytes=rx, size_bytes=size,
                           queue_pkts=queue_pkts, cap_log7=xm.log7(cap_kbps), rtt_us=rtt_us,
                           cwnd_bytes=cwnd_bytes)
    return port, fb


def test_xcp_idle_port_gives_positive_and_congested_port_negative_feedback():
    """eq. (1): spare bandwidth makes phi > 0 (windows grow); a persistent queue on a
    full link makes it < 0 (windows shrink)."""
    idle, fb_idle = _drive_xcp(0.2, queue_pkts=0)
    busy, fb_busy = _drive_xcp(1.0, queue_pkts=40)
    assert idle.intervals >= 1 and busy.intervals >= 1
    assert idle.phi_bytes > 0 and fb_idle > 0
    assert busy.phi_bytes < 0 and fb_busy < 0
    # phi = alpha d S - beta Q within the tables' error
    d = idle.d_us
    s = 10_000 / 8000 - idle.closed_bytes / idle.closed_us
    assert idle.phi_bytes == pytest.approx(0.4 * d * s, rel=0.03)
    q = 40 * 1514
    assert busy.phi_bytes == pytest.approx(0.4 * busy.d_us * (10_000 / 8000 - busy.closed_bytes / busy.closed_us)
                                           - 0.226 * q, rel=0.03, abs=200)


def test_rcp_rate_moves_toward_spare_capacity():
    """R(t) = R (1 + T/d0 (alpha (C - y/T) - beta q/d0) / C): with the port loaded at
    twice its capacity it falls; kept within [rate_min, C]."""
    cfg, port = xm.RcpConfig(), xm.RcpPort()
    cap = 10_000
    rx, rates = 0, []
    for i in range(400):
        rx = (rx + 2500) & xm.U32          # 2500 B per ms = 20 Mb/s: twice C
        rates.append(xm.rcp_packet(port, cfg, now_us=1000 * (i + 1), rx_bytes=rx, size_bytes=2500,
                                   queue_pkts=0, cap_kbps=cap, cap_log7=xm.log7(cap), rtt_us=10_000))
    assert rates[0] == cap
    assert port.intervals > 10
    assert rates[-1] < 0.3 * cap
    assert min(rates) >= cfg.rate_min_kbps


def test_configs_reject_values_the_switch_cannot_hold():
    with pytest.raises(ValueError, match="alpha"):
        xm.XcpConfig(alpha=0)
    with pytest.raises(ValueError, match="intervals"):
        xm.RcpConfig(d_min_us=10, d_init_us=5)
    with pytest.raises(ValueError, match="rate_min_kbps"):
        xm.RcpConfig(rate_min_kbps=0)
