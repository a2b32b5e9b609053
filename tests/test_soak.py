"""The soak's arithmetic (bwn/analysis/soak.py): memory growth per hour, lost-bytes
accounting, process sampling; and benchmarks/soak.py's refusal of bad arguments.
The real soak is tests/test_soak_mininet.py."""
from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bwn.analysis import soak
from bwn.analysis.soak import FlowBytes, Sample, Watched
from bwn.emulation import probes

REPO = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024


# -- growth per hour -----------------------------------------------------------------

def ols(points):
    """Ordinary least squares by the textbook formulas (independent of scipy)."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((t - mt) ** 2 for t, _ in points)
    sxy = sum((t - mt) * (y - my) for t, y in points)
    slope = sxy / sxx
    sse = sum((y - my - slope * (t - mt)) ** 2 for t, y in points)
    return slope, math.sqrt(sse / (n - 2) / sxx)


def test_growth_of_a_steady_leak_is_its_rate_per_hour():
    # 1 MiB every 10 minutes, sampled every 10 s for 30 minutes: 6 MiB/h, exactly.
    points = [(t, 50 * MIB + t * MIB / 600) for t in range(0, 1801, 10)]
    g = soak.growth_per_hour(points)
    assert g.per_hour_bytes == pytest.approx(6 * MIB)
    assert g.stderr_per_hour_bytes < 1.0             # bytes per hour: float rounding only
    assert g.samples == 181 and g.span_s == 1800


def test_growth_and_its_standard_error_match_least_squares():
    # Noisy samples (a sawtooth of +-300 kB around 2 MiB/h).
    points = [(10.0 * i, 40e6 + 2 * MIB * 10 * i / 3600 + (300e3 if i % 3 == 0 else -150e3))
              for i in range(60)]
    slope, se = ols(points)
    g = soak.growth_per_hour(points)
    assert g.per_hour_bytes == pytest.approx(slope * 3600)
    assert g.stderr_per_hour_bytes == pytest.approx(se * 3600)
    assert g.stderr_per_hour_bytes > 0
    assert abs(g.per_hour_bytes - 2 * MIB) < 3 * g.stderr_per_hour_bytes


def test_flat_memory_has_no_growth_and_shrinking_memory_is_negative():
    assert soak.growth_per_hour([(t, 1e6) for t in range(0, 100, 10)]).per_hour_bytes == 0
    assert soak.growth_per_hour([(0, 3e6), (10, 2e6), (20, 1e6)]).per_hour_bytes == pytest.approx(-360e6)


def test_growth_needs_three_samples_spread_in_time():
    assert soak.growth_per_hour([]) is None
    assert soak.growth_per_hour([(0, 1), (10, 2)]) is None          # no standard error from two points
    assert soak.growth_per_hour([(5, 1), (5, 2), (5, 3)]) is None    # no time between them


def samples(rss_by_t, anon=None, cpu_per_s=0.5):
    return [Sample(t, rss, (anon or {}).get(t, rss // 2), cpu_per_s * t) for t, rss in rss_by_t]


def test_process_summary_leaves_the_warm_up_out_of_the_fit():
    # Start-up: 10 -> 30 MiB in the first 20 s, then flat: no growth once warm.
    series = samples([(0, 10 * MIB), (10, 25 * MIB), (20, 30 * MIB)] +
                     [(t, 30 * MIB) for t in range(30, 301, 10)])
    s = soak.summarize_process(Watched("s1", "switch", 42), series, warmup_s=30)
    assert s.rss_first_bytes == 10 * MIB
    assert s.rss_start_bytes == 30 * MIB and s.rss_end_bytes == 30 * MIB
    assert s.growth.per_hour_bytes == pytest.approx(0, abs=1)
    assert s.growth.samples == 28
    assert s.cpu_s == pytest.approx(150.0)            # 0.5 CPU s per s over 300 s
    assert s.samples == len(series) and s.first_t_s == 0 and s.last_t_s == 300
    # With the warm-up in the fit the same process looks like it grows.
    assert soak.summarize_process(Watched("s1", "switch", 42), series, warmup_s=0).growth.per_hour_bytes > 10 * MIB


def test_process_summary_fits_anonymous_memory_separately():
    series = [Sample(t, 20 * MIB, 5 * MIB + t * 1000, 0.0) for t in range(0, 200, 10)]
    s = soak.summarize_process(Watched("em0", "bwn-link", 7), series, warmup_s=0)
    assert s.growth.per_hour_bytes == pytest.approx(0, abs=1)
    assert s.anon_growth.per_hour_bytes == pytest.approx(3.6e6)


def test_process_without_samples():
    s = soak.summarize_process(Watched("x", "bwn-send", 1), [], warmup_s=0, exited="exit status 1 at t=3 s")
    assert s.growth is None and s.cpu_s is None and s.rss_end_bytes is None and s.exited


# -- bytes handed over, acknowledged, delivered, lost ---------------------------------

def sender(flow_id, stream, acked, status="complete", algo="newreno"):
    return {"flow_id": flow_id, "algo": algo, "status": status, "stream_bytes": stream, "bytes": acked}


def recv(flow_id, delivered, status="complete"):
    return {"flow_id": flow_id, "peer": "10.0.1.1:40000", "status": status, "bytes": delivered}


def account(senders, receivers, flows=None):
    flows = flows or [(name, s["flow_id"] if s else None, "h2") for name, s in senders.items()]
    return {f.flow: f for f in soak.account_flows(flows, senders, {"h2": receivers})}


def test_a_complete_flow_loses_nothing():
    f = account({"a": sender(1, 5000, 5000)}, [recv(1, 5000)])["a"]
    assert (f.lost_bytes, f.excess_bytes, f.unconfirmed_bytes, f.problems) == (0, 0, 0, [])


def test_bytes_acknowledged_but_not_delivered_are_lost():
    f = account({"a": sender(1, 5000, 5000)}, [recv(1, 3000, "incomplete")])["a"]
    assert f.lost_bytes == 2000
    assert "2000 bytes lost" in f.problems


def test_unacknowledged_bytes_of_an_ended_flow_are_unconfirmed_not_lost():
    # The soak ended the flow with 3000 of its 5000 bytes acknowledged; the
    # receiver had 3500 in order (the ACK for the last 500 was still on its way).
    f = account({"a": sender(1, 5000, 3000, status="incomplete")}, [recv(1, 3500, "incomplete")])["a"]
    assert (f.lost_bytes, f.unconfirmed_bytes, f.excess_bytes) == (0, 2000, 0)
    assert f.problems == []


def test_a_flow_without_a_receiver_record_lost_what_was_acknowledged():
    f = account({"a": sender(1, 5000, 5000)}, [recv(2, 5000)])["a"]   # only another flow's record
    assert f.delivered_bytes is None and f.lost_bytes == 5000
    assert "no receiver record" in f.problems


def test_delivered_beyond_the_stream_is_flagged():
    f = account({"a": sender(1, 5000, 5000)}, [recv(1, 5000), recv(1, 1000)])["a"]
    assert f.receiver_records == 2 and f.delivered_bytes == 6000
    assert f.excess_bytes == 1000 and f.lost_bytes == 0
    assert "1000 bytes delivered beyond the stream" in f.problems


def test_flows_are_matched_by_id_at_their_own_receiver():
    senders = {"a": sender(1, 100, 100), "b": sender(2, 200, 200)}
    receivers = {"h2": [recv(1, 100)], "h3": [recv(2, 200), recv(1, 999)]}
    flows = soak.account_flows([("a", 1, "h2"), ("b", 2, "h3")], senders, receivers)
    assert [(f.flow, f.delivered_bytes, f.lost_bytes) for f in flows] == [("a", 100, 0), ("b", 200, 0)]


def test_a_missing_sender_summary_is_unknown_not_zero():
    f = account({"a": None}, [recv(1, 5000)], flows=[("a", 1, "h2")])["a"]
    assert f.lost_bytes is None and f.problems == ["no sender summary"]
    report = soak.Report([], [f], 60.0, 10.0, "valid", "complete")
    assert report.lost_bytes is None


def test_a_failed_sender_is_a_problem_even_without_loss():
    f = account({"a": sender(1, 5000, 2000, status="failed: too many timeouts")}, [recv(1, 2000)])["a"]
    assert f.lost_bytes == 0 and f.problems == ["sender failed: too many timeouts"]


def test_report_sums_lost_bytes_per_flow_sender_and_receiver():
    flows = soak.account_flows(
        [("a", 1, "h2"), ("b", 2, "h2"), ("c", 3, "h3")],
        {"a": sender(1, 100, 100), "b": sender(2, 300, 300), "c": sender(3, 50, 50)},
        {"h2": [recv(1, 90), recv(2, 200)], "h3": [recv(3, 50)]})
    report = soak.Report([], flows, 60.0, 10.0, "valid", "complete")
    assert report.lost_bytes == 110
    assert report.lost_by_process() == {"send-a": 10, "send-b": 100, "send-c": 0, "recv-h2": 110, "recv-h3": 0}
    table = report.table()
    assert "bytes lost: 110 of 450 handed over" in table


def test_flow_json_carries_the_derived_figures():
    f = FlowBytes("a", 1, "ebn", "complete", 10, 10, 8)
    j = f.to_json()
    assert j["lost_bytes"] == 2 and j["unconfirmed_bytes"] == 0 and j["problems"] == ["2 bytes lost"]


# -- sampling processes ----------------------------------------------------------------

def test_read_process_sees_memory_this_process_touches():
    import mmap
    before = probes.read_process(os.getpid())
    # A fresh anonymous mapping, every page written: resident and anonymous for
    # sure (a Python bytes object may reuse heap pages that are resident already).
    block = mmap.mmap(-1, 64 * MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for off in range(0, 64 * MIB, mmap.PAGESIZE):
        block[off] = 1
    after = probes.read_process(os.getpid())
    assert block[64 * MIB - mmap.PAGESIZE] == 1
    rss0, anon0, cpu0 = before
    rss1, anon1, cpu1 = after
    assert rss1 - rss0 > 56 * MIB and anon1 - anon0 > 56 * MIB
    assert 0 < anon1 <= rss1 and cpu1 >= cpu0 > 0
    # The same figures as the kernel's own account (VmRSS, RssAnon in /proc/PID/status).
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    kib = {k: int(status[k].split()[0]) * 1024 for k in ("VmRSS", "RssAnon")}
    assert abs(rss1 - kib["VmRSS"]) < 4 * MIB and abs(anon1 - kib["RssAnon"]) < 4 * MIB


def test_recorder_writes_every_live_process_and_notices_ends(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        rec = probes.Recorder(tmp_path / "soak.csv")
        rec.watch([Watched("runner", "runner", os.getpid()),
                   Watched("child", "bwn-send", child.pid, child.poll)])
        with pytest.raises(ValueError):
            rec.watch([Watched("child", "bwn-send", 1)])
        rec.sample(0.0)
        assert rec.ended() == []
        child.kill()
        child.wait()
        rec.sample(10.0)
        assert [(p.name, code) for p, code in rec.ended()] == [("child", -9)]
        rec.close()
    finally:
        child.kill()
        child.wait()
    rows = list(csv.DictReader(open(tmp_path / "soak.csv")))
    assert [(r["t_s"], r["process"]) for r in rows] == [("0.000", "runner"), ("0.000", "child"), ("10.000", "runner")]
    assert int(rows[0]["rss_bytes"]) >= int(rows[0]["anon_bytes"]) > 0
    assert len(rec.series["runner"]) == 2 and len(rec.series["child"]) == 1


def test_deep_size_counts_the_samples():
    one = soak.deep_size_bytes([(0.1, 2.0, 3.0)])
    thousand = soak.deep_size_bytes([(0.1 * i, 2.0 * i, 3.0 * i) for i in range(1000)])
    assert thousand > 900 * (one - sys.getsizeof([]))
    assert soak.deep_size_bytes({"s1:2": [(1.0, 5)]}) > soak.deep_size_bytes([(1.0, 5)])


# -- benchmarks/soak.py: bad arguments get one clear line, before anything runs --------

@pytest.mark.parametrize("args, message", [
    (["--minutes", "0"], "--minutes: must be positive"),
    (["--minutes", "1", "--warmup-s", "90"], "--warmup-s 90 leaves no sample to fit in 60 s"),
    (["--minutes", "1", "--linkem-args", "wan:--loss 2"], "bwn-link rejects '--loss 2'"),
    (["--minutes", "1", "--linkem-args", "h1-s1:--loss 0.1"], "link 'h1-s1' has no bwn-link"),
    (["--minutes", "1", "--linkem-args", "wan:--delay-ms 3"], "--delay-ms is set by the scenario"),
    (["--minutes", "1", "--scenario", "/nonexistent.toml"], "cannot read the file"),
])
def test_soak_rejects_bad_arguments(args, message):
    res = subprocess.run([sys.executable, str(REPO / "benchmarks" / "soak.py"), *args],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr
    assert len(res.stderr.strip().splitlines()) <= 2


def test_soak_help_documents_every_option():
    res = subprocess.run([sys.executable, str(REPO / "benchmarks" / "soak.py"), "--help"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert res.returncode == 0
    for option in ("--minutes", "--interval-s", "--warmup-s", "--drain-s", "--scenario", "--linkem-args",
                   "--flow-log-interval-ms", "--out", "Exit status"):
        assert option in res.stdout
