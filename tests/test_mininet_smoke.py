"""A short real experiment: Mininet + BMv2 + controller + agents + report
(`bwn run smoke`), and nothing left behind afterwards."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from needs import missing, stale_build

from bwn.requirements import bmv2_missing
from bwn.rundir import RunDir

REPO = Path(__file__).resolve().parents[1]


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if bmv2_missing():
        return bmv2_missing()
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet not importable"
    return stale_build()


def bwn_run(*args: str) -> None:
    """`bwn run ARGS` as a user types it; its output is printed. It must succeed: exit
    0, or 1 only for runs this loaded machine made INVALID (every flow completed)."""
    res = subprocess.run([sys.executable, "-m", "bwn.cli.main", "run", *args],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    print(res.stdout[-5000:], res.stderr[-5000:])
    invalid_only = "bwn run: INVALID" in res.stderr and "did not complete" not in res.stderr
    assert res.returncode == 0 or (res.returncode == 1 and invalid_only), res.returncode


@pytest.fixture(autouse=True)
def _needs_mininet_and_bmv2():
    missing(_missing(), "Mininet smoke test")


def _links() -> set[str]:
    """The root namespace's Mininet-made interfaces (`node-ethN`), read while holding
    the experiment lock: other engineers' PTF veths (s1p1, ...) come and go at any
    time, and their Mininet runs hold the lock while their interfaces exist."""
    from bwn.emulation.runlock import experiment_lock
    with experiment_lock(progress=lambda _m: None):
        out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    names = {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}
    return {n for n in names if "-eth" in n}


def test_smoke_experiment(tmp_path):
    before = _links()
    out = tmp_path / "run"
    bwn_run("smoke", "--schemes", "ebn,newreno", "--duration", "6", "--pcap", "--out", str(out))
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert {r["scheme"] for r in rows} == {"ebn", "newreno"}
    for r in rows:
        assert float(r["goodput_bps"]) > 0.3e6, r      # a 2-5 Mb/s link, 6 s
        assert float(r["goodput_bps"]) < 5.5e6, r
    assert (out / "summary.md").exists()
    assert list(out.glob("*.png"))
    # The switches stamped the flow: the EBN run's log saw switch feedback.
    log = (out / "ebn" / "flows" / "main.jsonl").read_text()
    assert '"echo_hop_count": 1' in log or '"echo_hop_count":1' in log
    for scheme in ("ebn", "newreno"):
        _capacity_stepped(out / scheme)
    _ebn_scaled_cwnd(out / "ebn" / "flows" / "main.jsonl", out / "newreno" / "flows" / "main.jsonl")
    # --pcap: a capture of the bottleneck per scheme that reads back, with the
    # switch's stamp on the flow's DATA, and the figure drawn from it.
    from bwn.analysis.pcaptrace import read_trace
    for scheme in ("ebn", "newreno"):
        trace = read_trace(out / scheme / "capture" / "bottleneck.pcap")
        flow = trace.flows[1]
        assert len(flow.data_seq) > 100 and len(flow.ack_no) > 100, scheme
        assert set(flow.hops) == {1}, scheme
        assert (out / f"seq-{scheme}.png").stat().st_size > 10_000
    # Nothing left: no new interfaces, no switch processes from this run.
    assert _links() - before == set()
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "--grpc-server-addr 127.0.0.1:501" not in ps


STEP_T_S = 4.0                 # smoke.toml: the bottleneck steps from 5 to 2 Mb/s at 4 s


def _capacity_stepped(run: Path) -> None:
    """The controller applied the bottleneck's step on time (capacity.csv), and the
    switch then stamped the new capacity (telemetry.csv, kb/s of frames)."""
    applied = [(float(r["t_s"]), float(r["rate_bps"])) for r in csv.DictReader(open(RunDir(run).capacity_csv))
               if r["link"] == "bottleneck"]
    # The first rate is written while the switch's state is installed, before the
    # controller's clock starts (t = 0 is when every switch is ready): its time is
    # the install time (0.3-0.5 s here, more on a loaded machine).
    assert applied[0][1] == 5e6 and applied[0][0] < STEP_T_S, applied
    steps = [(t, rate) for t, rate in applied if rate == 2e6]
    assert steps and STEP_T_S <= steps[0][0] <= STEP_T_S + 1.0, applied
    telemetry = [(float(r["t_s"]), float(r["capacity_kbps"])) for r in csv.DictReader(open(RunDir(run).telemetry_csv))
                 if r["capacity_kbps"] not in ("", "0")]
    assert any(t < STEP_T_S and abs(kbps - 5000) <= 250 for t, kbps in telemetry), telemetry[:20]
    assert any(t > STEP_T_S + 0.5 and abs(kbps - 2000) <= 100 for t, kbps in telemetry), telemetry[-20:]


def _ebn_scaled_cwnd(ebn_log: Path, newreno_log: Path) -> None:
    """TCP-EBN scaled its window down by the EBN ratio after the capacity step (its
    counter and ratio in the log's `extra`), and the echoed code fell with the
    capacity; NewReno never scales."""
    import json

    rows = [json.loads(line) for line in ebn_log.read_text().splitlines() if line.strip()]
    extras = [(r["time_s"], r.get("extra") or {}) for r in rows]
    scaled = [(t, e) for t, e in extras if e.get("ebn_scalings")]
    assert scaled, "TCP-EBN never scaled cwnd"
    assert any(e.get("ebn_ratio", 1.0) < 1.0 for _, e in scaled), "no downward EBN scaling"
    # The window itself: at the first logged downward scaling, cwnd fell by at least
    # half of what the ratio says (the log row may come a few ACKs after the cut).
    for before, row in zip(rows, rows[1:]):
        extra = row.get("extra") or {}
        if extra.get("ebn_scalings", 0) > ((before.get("extra") or {}).get("ebn_scalings", 0)) \
                and extra.get("ebn_ratio", 1.0) < 1.0:
            ratio = extra["ebn_ratio"]
            assert row["cwnd"] < before["cwnd"] * (1 + ratio) / 2, (before, row)
            break
    codes = [(r["time_s"], r["echo_ebn_code"]) for r in rows if r.get("echo_ebn_code") not in (None, 255)]
    assert codes and max(c for _, c in codes) - codes[-1][1] >= 8, codes   # at least halved
    newreno = [json.loads(line) for line in newreno_log.read_text().splitlines() if line.strip()]
    assert not any((r.get("extra") or {}).get("ebn_scalings") for r in newreno)


def test_sigterm_mid_run_tears_everything_down(tmp_path):
    """SIGTERM (as from Ctrl-C or a job runner) in the middle of a run: exit 130,
    no switch, agent or emulator process and no interface left, logs kept."""
    import signal
    import time

    before = _links()
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "bwn.cli.main", "run", "smoke", "--schemes", "newreno",
                             "--duration", "30", "--pcap", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    deadline = time.monotonic() + 60
    while not (out / "newreno" / "flows").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    print(output)
    assert proc.returncode == 130
    assert _links() - before == set()
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(out) not in ps, "a process of the interrupted run (agent, tcpdump) is still alive"
    assert (out / "newreno" / "switch-logs").exists()


SMOKE_STEPS = 'schedule = { kind = "steps", steps = [ { t_s = 0, rate_mbit = 5 }, { t_s = 4, rate_mbit = 2 } ] }'


def test_a_link_served_by_bwn_link_follows_its_steps_from_the_flows_start(tmp_path):
    """shaper = "link" with the smoke's own steps (5 Mb/s, 2 Mb/s from 4 s): bwn-link
    gets the schedule (--a-to-b-rate-schedule), the runner starts it with SIGUSR1
    when the flows are released (run.json, bwn-link's schedule_started_s, the
    linkem_schedule invariant held), and the flow gets no more than the schedule's
    mean over the run, 3.5 Mb/s: a schedule left at its 5 Mb/s would give ~4.5."""
    import json

    text = (REPO / "topologies" / "scenarios" / "smoke.toml").read_text()
    scenario = tmp_path / "stepped.toml"
    scenario.write_text(text.replace(SMOKE_STEPS, 'shaper = "link"\n' + SMOKE_STEPS))
    before = _links()
    out = tmp_path / "run"
    bwn_run(str(scenario), "--schemes", "newreno", "--out", str(out))
    run = RunDir(out / "newreno")
    meta = run.meta()
    assert meta.link_schedules_started == ["bottleneck"]
    assert meta.fidelity["checks"]["linkem_schedule"]["held"] is True
    stats = json.loads(run.linkem_stats("em1").read_text())
    assert stats["a_to_b"]["config"]["rate_schedule"] == {
        "kind": "steps", "steps": [{"t_s": 0.0, "rate_mbit": 5.0}, {"t_s": 4.0, "rate_mbit": 2.0}]}
    assert stats["schedule_started_s"] is not None
    (summary,) = csv.DictReader(open(out / "summary.csv"))
    mean_payload_bps = (5e6 * 4 + 2e6 * 4) / 8 * 1000 / 1102
    assert 0.4 * mean_payload_bps < float(summary["goodput_bps"]) <= 1.02 * mean_payload_bps, summary
    assert _links() - before == set()


def test_a_link_served_by_bwn_link_carries_its_rate(tmp_path):
    """shaper = "link" on the smoke's bottleneck (s1 -> h2, constant 5 Mb/s): the
    switch port stamps the capacity but is not rate-limited (capacity.csv: no
    queue_pps), bwn-link serializes the s1 -> h2 direction at 5 Mb/s behind the
    link's 50-frame queue (its stats), and the flow gets at most that rate: the
    20 Mb/s access link and an unshaped BMv2 port would give it far more."""
    import json

    text = (REPO / "topologies" / "scenarios" / "smoke.toml").read_text()
    assert SMOKE_STEPS in text
    scenario = tmp_path / "shaped.toml"
    scenario.write_text(text.replace(SMOKE_STEPS, 'shaper = "link"\nschedule = { kind = "constant", rate_mbit = 5 }'))
    before = _links()
    out = tmp_path / "run"
    bwn_run(str(scenario), "--schemes", "newreno", "--duration", "5", "--out", str(out))
    run = RunDir(out / "newreno")
    (row,) = [r for r in csv.DictReader(open(run.capacity_csv)) if r["link"] == "bottleneck"]
    assert (row["rate_bps"], row["queue_pps"]) == ("5000000", "")
    stats = json.loads(run.linkem_stats("em1").read_text())
    assert stats["iface_a"] == "em1-eth0"                                      # faces s1, end a
    assert (stats["a_to_b"]["config"]["rate_bps"], stats["a_to_b"]["config"]["queue_packets"]) == (5_000_000, 50)
    assert stats["b_to_a"]["config"]["rate_bps"] is None                       # h2 -> s1: a host's side
    assert stats["a_to_b"]["forwarded_frames"] > 500
    (summary,) = csv.DictReader(open(out / "summary.csv"))
    payload_bps = 5e6 * 1000 / 1102                                            # 1000-byte segments
    assert 0.5 * payload_bps < float(summary["goodput_bps"]) <= 1.02 * payload_bps, summary
    assert _links() - before == set()


def test_one_bwn_links_process_serves_every_delayed_link(tmp_path):
    """[experiment] linkem_shared: one bwn-links process serves the smoke's two delayed
    links (em0, em1) from the root namespace, each with its own options and stats file
    as a bwn-link per node would have; the bottleneck's rate steps it serves start with
    the flows (one SIGUSR1); its CPU is counted once; nothing is left afterwards."""
    import json

    text = (REPO / "topologies" / "scenarios" / "smoke.toml").read_text()
    scenario = tmp_path / "shared.toml"
    scenario.write_text(text.replace("[experiment]\n", "[experiment]\nlinkem_shared = true\n", 1)
                        .replace(SMOKE_STEPS, 'shaper = "link"\n' + SMOKE_STEPS))
    before = _links()
    out = tmp_path / "run"
    bwn_run(str(scenario), "--schemes", "newreno", "--duration", "6", "--out", str(out))
    run = RunDir(out / "newreno")
    meta = run.meta()
    assert meta.delay_emulator == "bwn-links"
    assert meta.link_schedules_started == ["bottleneck"]
    assert meta.fidelity["checks"]["linkem_schedule"]["held"] is True
    cpu = meta.fidelity["measurements"]["process_cpu_s"]
    assert "bwn-links" in cpu and not any(name.startswith("em") for name in cpu)
    em0 = json.loads(run.linkem_stats("em0").read_text())
    em1 = json.loads(run.linkem_stats("em1").read_text())
    assert em0["group"]["links"] == 2 and em0["group"] == em1["group"] and em0["realtime"] is True
    assert em0["a_to_b"]["config"]["delay_us"] == em1["a_to_b"]["config"]["delay_us"] == 10_000
    assert em0["a_to_b"]["forwarded_frames"] > 100 and em1["a_to_b"]["forwarded_frames"] > 100
    assert em1["a_to_b"]["config"]["rate_schedule"]["kind"] == "steps" and em1["schedule_started_s"] is not None
    assert em0["a_to_b"]["config"]["rate_schedule"] is None
    assert "bwn-link: ready: 2 links in one process" in run.linkem_group_log.read_text()
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(run.linkem_group_stats) not in ps, "bwn-links outlived its run"
    assert _links() - before == set()
