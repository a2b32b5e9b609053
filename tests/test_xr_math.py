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


def test_end_to_end_errors_are_within_the_documented_bounds():
    """docs/dataplane.md's table: each computed term against exact arithmetic, over
    20,000 random inputs (worst cases printed; the bounds are the table's)."""
    rng = random.Random(1)
    cfg, rcfg = xm.XcpConfig(), xm.RcpConfig()
    worst: dict[str, float] = {}

    def note(key: str, got: float, exact: float) -> None:
        if 1000 < exact < 2**60:
            worst[key] = max(worst.get(key, 0.0), abs(got / exact - 1))

    for _ in range(20000):
        n, rtt, cwnd, s = (rng.randint(1, 2000), rng.randint(2000, 1_900_000),
                           rng.randint(1500, 50_000_000), rng.randint(64, 1514))
        cap = rng.choice([1000, 10_000, 100_000, 1_000_000, 10_000_000])
        y, t, q = rng.randint(1, 10**8), rng.randint(1000, 2_000_000), rng.randint(1, 4000)
        la = xm.log7(rtt) + xm.log7(s) - xm.log7(cwnd)
        a, b = xm.exp7(la + xm.A_SCALE_LOG7), xm.exp7(la + xm.log7(rtt))
        if a == 0:
            continue
        c = xm.xcp_close(xm.XcpPort(sum_a=n * a, sum_b=n * b, sum_s=n * s, queue_min=q), cfg, t, y,
                         xm.log7(cap))
        note("d", c.d_us, rtt)                       # every packet alike: d is their RTT
        note("xcp", c.t1, 0.4 * rtt * cap / 8000)
        note("xcp", c.t2, 0.4 * rtt * y / t)
        note("xcp", c.t4, 0.1 * rtt * y / t)
        note("queue", c.t3, 0.226 * q * 1514)
        pos, neg = c.h + max(c.phi, 0), c.h + max(-c.phi, 0)
        _, _, p, m = xm.xcp_packet_terms(xm.log7(rtt), xm.log7(cwnd), xm.log7(s), c.log_xi_p, c.log_xi_n)
        # exact: xi_p rtt^2 s / cwnd with xi_p = pos / (d n rtt s / cwnd) and d = rtt is
        # pos / n (each of the n alike packets gets its share); n_i likewise neg / n
        note("packet", p, pos / n)
        note("packet", m, neg / n)
        r = rng.randint(100, 10_000_000)
        rcap, d0 = max(r, cap), rng.randint(1000, 2_000_000)
        rc = xm.rcp_close(xm.RcpPort(rate_kbps=r, d0_us=d0), rcfg, t, y, q, rcap, xm.log7(rcap))
        note("rcp", rc.up, r * 0.1 * t / d0)
        note("rcp", rc.down, r * 0.1 * y * 8000 / (d0 * rcap))
        note("rcp", rc.queue, r * t * q * 1514 * 8000 / (d0 * d0 * rcap))
    bounds = {"d": 0.03, "xcp": 0.03, "queue": 0.01, "packet": 0.02, "rcp": 0.025}
    print({k: f"{100 * v:.2f} %" for k, v in worst.items()})
    assert set(worst) == set(bounds)
    for key, bound in bounds.items():
        assert worst[key] <= bound, (key, worst[key])
