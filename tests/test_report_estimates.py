"""The report's estimate of each log row and its error (bwn/report.py): which rows
carry an estimate, in which bits, and how the error is averaged."""
from __future__ import annotations

from typing import Optional

import pytest

from bwn import report
from bwn.report import FlowLog, SchemeRun

PPF = SchemeRun("x", []).payload_per_frame          # 1000 / 1102


def est(source: str, sample: dict, own_bps: float = 0.0) -> Optional[float]:
    return report.estimate_bps(SchemeRun("x", []), sample, source, own_bps)


def test_a_senders_own_estimate_counts_only_when_positive():
    assert est("estimate_bps", {"estimate_bps": 5e6}) == 5e6
    assert est("estimate_bps", {"estimate_bps": 0.5}) == 0.5            # below 1 bit/s is still one
    assert est("estimate_bps", {"estimate_bps": 0}) is None
    assert est("estimate_bps", {"estimate_bps": -3.0}) is None
    assert est("estimate_bps", {}) is None
    # the sender's own estimate does not need a BWN switch on the path
    assert est("estimate_bps", {"estimate_bps": 5e6, "fb_hop_count": 0}) == 5e6


def test_switch_feedback_counts_only_from_a_bwn_switch_and_in_payload_bits():
    assert est("fb_ebn_code", {"fb_ebn_code": 80, "fb_hop_count": 0}) is None
    assert est("fb_tight_kbps", {"fb_tight_kbps": 500, "fb_hop_count": 0}) is None
    assert est("fb_ebn_code", {"fb_ebn_code": 80, "fb_hop_count": 1}) == pytest.approx(1024e3 * PPF)
    assert est("fb_ebn_code", {"fb_ebn_code": 80}) == pytest.approx(1024e3 * PPF)   # older logs
    assert est("fb_ebn_code", {"fb_ebn_code": 0, "fb_hop_count": 2}) == pytest.approx(1e3 * PPF)
    assert est("fb_ebn_code", {"fb_ebn_code": 255, "fb_hop_count": 1}) is None     # unset
    assert est("fb_ebn_code", {"fb_hop_count": 1}) is None


def test_tight_link_is_the_available_bandwidth_plus_the_flows_own_rate():
    unset = report.TIGHT_UNSET_KBPS
    assert est("fb_tight_kbps", {"fb_tight_kbps": unset, "fb_hop_count": 1}, 1e6) is None
    assert est("fb_tight_kbps", {"fb_tight_kbps": unset - 1, "fb_hop_count": 1}, 0.0) == pytest.approx(
        (unset - 1) * 1e3 * PPF)
    assert est("fb_tight_kbps", {"fb_tight_kbps": 0, "fb_hop_count": 1}, 2e6) == 2e6
    assert est("fb_tight_kbps", {"fb_tight_kbps": -400, "fb_hop_count": 1}, 2e6) == pytest.approx(
        2e6 - 400e3 * PPF)                                              # overload: AB below 0
    assert est("fb_tight_kbps", {"fb_hop_count": 1}, 2e6) is None


def test_an_unknown_source_is_an_error_that_names_it():
    with pytest.raises(report.ReportError, match=r"^unknown estimate source 'fb_bogus'$"):
        est("fb_bogus", {"fb_hop_count": 1})


def test_interpolation_of_delivered_bytes_at_and_beyond_its_ends():
    times, values = [10.0, 20.0], [100.0, 300.0]
    assert report._interp([], [], 5.0) == 0.0
    assert report._interp(times, values, 9.0) == 0.0                     # before the first row
    assert report._interp(times, values, 10.0) == 100.0                  # at it
    assert report._interp(times, values, 15.0) == 200.0
    assert report._interp(times, values, 20.0) == 300.0
    assert report._interp(times, values, 99.0) == 300.0
    assert report._interp([10.0], [100.0], 10.0) == 100.0
    assert report._interp([10.0], [100.0], 9.9) == 0.0


class ConstantShares:
    def __init__(self, bps: Optional[float]) -> None:
        self.bps = bps

    def share_bps(self, flow: FlowLog, t_s: float) -> Optional[float]:
        return self.bps


def westwood_flow(rows: list[tuple[float, float, float]]) -> FlowLog:
    """Rows of (t_s, delivered bytes, estimate bit/s)."""
    return FlowLog("f1", [{"t_s": t, "delivered_bytes": d, "estimate_bps": e} for t, d, e in rows],
                   algo="westwood")


def test_estimate_error_against_a_given_share_and_the_flows_own_rate():
    # 1 s rows: 125 000 bytes a second = 1 Mb/s of own rate from the second row on
    flow = westwood_flow([(0.0, 0, 1.5e6), (1.0, 125_000, 1.5e6), (2.0, 250_000, 0.5e6)])
    run = SchemeRun("westwood", [flow])
    err = report.estimate_error(run, flow, ConstantShares(2e6), window_s=1.0)
    assert err.samples == 3                                          # every row with an estimate
    assert err.vs_share == pytest.approx((0.25 + 0.25 + 0.75) / 3)   # |est - 2e6| / 2e6
    assert err.vs_rate == pytest.approx((0.5 + 0.5) / 2)             # the first row has no own rate
    assert report.estimate_error(run, flow, ConstantShares(0.5), window_s=1.0).samples == 3   # > 0 counts
    none = report.estimate_error(run, flow, ConstantShares(0.0), window_s=1.0)
    assert (none.vs_share, none.samples) == (None, 0)                # a zero share is no share


def test_estimate_error_without_shares_uses_the_runs_fair_shares():
    flow = westwood_flow([(0.0, 0, 1e6), (1.0, 125_000, 1e6)])
    err = report.estimate_error(SchemeRun("westwood", [flow]), flow, window_s=1.0)
    assert (err.vs_share, err.samples) == (None, 0)                  # no capacity known: no share
    assert err.vs_rate == pytest.approx(0.0)


def test_a_slow_own_rate_still_counts_and_a_lone_first_row_has_none():
    # 1 byte in 16 s: an own rate of 0.5 bit/s
    flow = westwood_flow([(0.0, 0, 1.0), (16.0, 1, 1.0)])
    err = report.estimate_error(SchemeRun("westwood", [flow]), flow, ConstantShares(None), window_s=16.0)
    assert err.vs_rate == pytest.approx(1.0)                          # |1 - 0.5| / 0.5
    lone = westwood_flow([(0.0, 0, 1e6)])
    err = report.estimate_error(SchemeRun("westwood", [lone]), lone, ConstantShares(1e6), window_s=1.0)
    assert (err.vs_share, err.vs_rate, err.samples) == (0.0, None, 1)


def test_a_scheme_without_an_estimate_has_no_error():
    flow = FlowLog("f1", [{"t_s": 1.0, "delivered_bytes": 10, "estimate_bps": 1e6}], algo="newreno")
    assert report.estimate_error(SchemeRun("newreno", [flow]), flow, ConstantShares(1e6)) == \
        report.EstimateError(None, None, 0)
