"""Max-min fair shares (bwn/analysis/fairshare.py), the flows' links (bwn/scenario/flowpaths.py) and the
report's estimate error against them."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bwn.scenario import flowpaths
from bwn.analysis.report.load import DEFAULT_FRAME_BYTES, DEFAULT_MSS_BYTES, load_scheme_run
from bwn.analysis.report.tables import summarize
from bwn.scenario.config import load_config
from bwn.analysis.fairshare import max_min_shares
from bwn.rundir import RunDir, RunMeta

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "topologies" / "scenarios"
K = DEFAULT_MSS_BYTES / DEFAULT_FRAME_BYTES

# ---------------------------------------------------------------------------------------
# max_min_shares


def test_parking_lot_each_link_is_shared_by_its_own_flows_only():
    # long crosses b1, b2, b3; cross_i only b_i: two flows per link, C/2 each. Counting
    # the flows of the other links would give the long flow C/4.
    capacity = {"b1": 10.0, "b2": 10.0, "b3": 10.0}
    flows = {"long": ["b1", "b2", "b3"], "c1": ["b1"], "c2": ["b2"], "c3": ["b3"]}
    assert max_min_shares(capacity, flows) == pytest.approx(
        {"long": 5.0, "c1": 5.0, "c2": 5.0, "c3": 5.0})


def test_parking_lot_with_a_narrower_middle_link():
    # b2 = 4: long and c2 get 2 each there; c1 and c3 take what long leaves on b1, b3.
    shares = max_min_shares({"b1": 10.0, "b2": 4.0, "b3": 10.0},
                            {"long": ["b1", "b2", "b3"], "c1": ["b1"], "c2": ["b2"], "c3": ["b3"]})
    assert shares == pytest.approx({"long": 2.0, "c1": 8.0, "c2": 2.0, "c3": 8.0})


def test_two_way_directions_are_separate_resources():
    # Two flows each way on one 5 Mb/s link: 2.5 each, not 1.25.
    capacity = {"bn:s1>s2": 5.0, "bn:s2>s1": 5.0}
    flows = {"fwd1": ["bn:s1>s2"], "fwd2": ["bn:s1>s2"], "rev1": ["bn:s2>s1"],
             "rev2": ["bn:s2>s1"]}
    assert max_min_shares(capacity, flows) == pytest.approx(
        {"fwd1": 2.5, "fwd2": 2.5, "rev1": 2.5, "rev2": 2.5})


def test_demand_limited_flow_leaves_the_rest_to_the_others():
    # The EBN scenario's 20 kb/s background flow on a 200 kb/s link.
    shares = max_min_shares({"C-D": 200.0}, {"main": ["C-D"], "bg": ["C-D"]}, {"bg": 20.0})
    assert shares == pytest.approx({"main": 180.0, "bg": 20.0})
    # A demand above the fair share does not bind.
    shares = max_min_shares({"C-D": 200.0}, {"main": ["C-D"], "bg": ["C-D"]}, {"bg": 150.0})
    assert shares == pytest.approx({"main": 100.0, "bg": 100.0})


def test_unlimited_flow_and_unknown_links():
    shares = max_min_shares({"a": 3.0}, {"f": ["a", "unknown"], "free": ["unknown"],
                                         "app": []}, {"app": 7.0})
    assert shares["f"] == pytest.approx(3.0)
    assert shares["free"] == math.inf and shares["app"] == pytest.approx(7.0)
    with pytest.raises(ValueError, match="capacity of 'a'"):
        max_min_shares({"a": -1.0}, {"f": ["a"]})


# ---------------------------------------------------------------------------------------
# flowpaths on the shipped scenarios


def test_parking_lot_paths_and_bottlenecks():
    cfg = load_config(SCENARIOS / "obp-parking-lot.toml")
    long = next(f for f in cfg.flows if f.name == "long")
    hops = flowpaths.limited_hops(cfg, long)
    # h0 -> s1 is not rate-limited (a host sends at veth speed); s4 -> h9 is.
    assert [(h.link, h.direction) for h in hops] == [
        ("b1", "s1>s2"), ("b2", "s2>s3"), ("b3", "s3>s4"), ("h9-s4", "s4>h9")]
    assert [h.link for h in flowpaths.flow_bottlenecks(cfg, long, cfg.duration_s)] == \
        ["b1", "b2", "b3"]
    assert flowpaths.bottleneck_links(cfg, cfg.duration_s) == ["b1", "b2", "b3"]


def test_two_way_paths_cross_the_bottleneck_in_opposite_directions():
    cfg = load_config(SCENARIOS / "two-way.toml")
    links = flowpaths.flow_links_json(cfg)
    assert {"link": "bottleneck", "from": "s1", "to": "s2"} in links["fwd1"]
    assert {"link": "bottleneck", "from": "s2", "to": "s1"} in links["rev1"]
    assert flowpaths.bottleneck_links(cfg, cfg.duration_s) == ["bottleneck"]


def test_bottleneck_follows_the_schedule_mean():
    # smoke: the 20 Mb/s access link vs the 5 -> 2 Mb/s steps of "bottleneck".
    cfg = load_config(SCENARIOS / "smoke.toml")
    assert flowpaths.bottleneck_links(cfg, cfg.duration_s) == ["bottleneck"]
    # ebn-sine: the C-D sine around 0.2 Mb/s for both flows.
    cfg = load_config(SCENARIOS / "ebn-sine.toml")
    assert flowpaths.bottleneck_links(cfg, cfg.duration_s) == ["C-D"]


# ---------------------------------------------------------------------------------------
# The report's estimate error against the fair share and the own rate


def write_flow(flows_dir: Path, name: str, rate_bps: float, estimate_bps: float,
               duration_s: float = 10.0) -> None:
    """A westwood flow sending at rate_bps (payload) with a constant estimate."""
    with (flows_dir / f"{name}.jsonl").open("w") as fh:
        for i in range(int(duration_s * 10) + 1):
            t_s = i / 10
            fh.write(json.dumps({"time_s": t_s, "algo": "westwood", "estimate_bps": estimate_bps,
                                 "delivered_bytes": rate_bps * t_s / 8}) + "\n")


def make_run(tmp_path: Path, scheme: str, capacity: dict[str, float],
             flows: dict[str, tuple[float, float, list[tuple[str, str, str]]]]) -> Path:
    run = RunDir(tmp_path / scheme)
    run.flows_dir.mkdir(parents=True)
    for name, (rate_bps, estimate_bps, _) in flows.items():
        write_flow(run.flows_dir, name, rate_bps, estimate_bps)
    run.capacity_csv.write_text(
        "t_s,link,rate_bps\n" + "".join(f"0,{link},{c}\n" for link, c in capacity.items()))
    run.write_meta(RunMeta(
        flow_starts_s={name: 0.0 for name in flows},
        flow_links={name: [{"link": l, "from": a, "to": b} for l, a, b in hops]
                    for name, (_, _, hops) in flows.items()},
        mss_bytes=1000, frame_bytes=1102))
    return run.path


def rows(run_dir: Path) -> dict[str, dict]:
    return {r["flow"]: r for r in summarize(load_scheme_run(run_dir))}


def test_two_way_estimate_error_ignores_the_reverse_flows(tmp_path):
    # 5 Mb/s of frames each way; two flows each way: the fair share is 2.5 Mb/s of
    # frames = 2.5 * K of payload. Each forward flow estimates exactly that.
    share = 2.5e6 * K
    fwd = [("bottleneck", "s1", "s2")]
    rev = [("bottleneck", "s2", "s1")]
    run_dir = make_run(tmp_path, "westwood", {"bottleneck": 5e6}, {
        "fwd1": (share, share, fwd), "fwd2": (share, share, fwd),
        "rev1": (share, 1e6, rev), "rev2": (share, 1e6, rev)})
    r = rows(run_dir)
    assert float(r["fwd1"]["estimate_error_share"]) == pytest.approx(0.0, abs=1e-9)
    assert float(r["fwd1"]["estimate_error_rate"]) == pytest.approx(0.0, abs=1e-9)
    assert int(r["fwd1"]["estimate_samples"]) == 101
    assert float(r["rev1"]["estimate_error_share"]) == pytest.approx(abs(1e6 - share) / share)


def test_parking_lot_estimate_error_ignores_other_links_flows(tmp_path):
    # long crosses b1..b3 with one cross flow each: share C/2 (C/4 if all were counted).
    share = 5e6 * K
    hop = {i: (f"b{i}", f"s{i}", f"s{i + 1}") for i in (1, 2, 3)}
    run_dir = make_run(tmp_path, "westwood", {"b1": 10e6, "b2": 10e6, "b3": 10e6}, {
        "long": (share, share, [hop[1], hop[2], hop[3]]),
        "cross1": (share, share, [hop[1]]), "cross2": (share, share, [hop[2]]),
        "cross3": (share, share, [hop[3]])})
    r = rows(run_dir)
    for name in ("long", "cross1", "cross2", "cross3"):
        assert float(r[name]["estimate_error_share"]) == pytest.approx(0.0, abs=1e-9), name


def test_estimate_error_against_own_rate_when_link_is_underused(tmp_path):
    # One flow alone on 10 Mb/s sends 3 Mb/s and estimates 6: 100 % off its own rate,
    # 6 / (10 K) - 1 off its fair share.
    run_dir = make_run(tmp_path, "westwood", {"b": 10e6},
                       {"solo": (3e6, 6e6, [("b", "s1", "s2")])})
    r = rows(run_dir)["solo"]
    assert float(r["estimate_error_rate"]) == pytest.approx(1.0)
    assert float(r["estimate_error_share"]) == pytest.approx(abs(6e6 - 10e6 * K) / (10e6 * K))


def test_without_flow_links_every_flow_shares_the_bottleneck(tmp_path):
    run_dir = make_run(tmp_path, "westwood", {"b": 10e6},
                       {"a": (1e6, 2.5e6 * K, []), "b": (1e6, 2.5e6 * K, [])})
    run = RunDir(run_dir)
    meta = run.meta()
    meta.flow_links = None                           # not recorded
    run.write_meta(meta)
    # C / N = 5 Mb/s of frames each.
    assert float(rows(run_dir)["a"]["estimate_error_share"]) == pytest.approx(0.5)
