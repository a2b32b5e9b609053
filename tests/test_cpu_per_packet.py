"""benchmarks/cpu_per_packet.py: CPU per packet per component, from a run's files."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from bwn.rundir import RunDir, RunMeta

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("cpu_per_packet", REPO / "benchmarks" / "cpu_per_packet.py")
cpp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cpp)


def make_run(d: Path, switch_cpu_s: float = 2.0) -> Path:
    run = RunDir(d)
    run.flows_dir.mkdir(parents=True)
    run.write_meta(RunMeta(
        receiver_cpu_s={"h2": 0.5},
        fidelity={"measurements": {"wall_s": 10.0, "process_cpu_s": {"s1": switch_cpu_s, "em0": 1.0, "runner": 0.4}},
                  "checks": {"switch_rx_drops": {"items": [{"switch": "s1", "out_pkts": 20_000}]}}}))
    run.linkem_stats("em0").write_text(json.dumps({"a_to_b": {"forwarded_frames": 10_000},
                                                   "b_to_a": {"forwarded_frames": 10_000}}))
    run.flow_summary("f1").write_text(json.dumps({"packets_sent": 10_000, "acks_received": 10_000,
                                                  "cpu_s": 0.8}))
    run.receiver_summary("h2").write_text(json.dumps([{"segments": 10_000, "acks_sent": 10_000}]))
    return d


def test_cpu_per_packet_of_each_component(tmp_path):
    rows = {r["component"]: r for r in cpp.table([make_run(tmp_path / "a")])}
    # 20 000 end-to-end packets (10 000 DATA sent + 10 000 ACKs sent)
    assert rows["switch s1"]["us_per_own_packet"] == pytest.approx(100.0)     # 2 s / 20 000 frames
    assert rows["switch s1"]["core_pct"] == pytest.approx(20.0)
    assert rows["bwn-link em0"]["us_per_e2e_packet"] == pytest.approx(50.0)
    assert rows["senders (all)"]["us_per_own_packet"] == pytest.approx(40.0)
    assert rows["receivers (all)"]["us_per_e2e_packet"] == pytest.approx(25.0)
    assert rows["runner"]["us_per_e2e_packet"] == pytest.approx(20.0)
    assert rows["total"]["us_per_e2e_packet"] == pytest.approx(100 + 50 + 40 + 25 + 20)


def test_cpu_per_packet_means_over_runs_and_rejects_a_folder_without_a_run(tmp_path, capsys):
    rows = {r["component"]: r for r in cpp.table([make_run(tmp_path / "a", 2.0), make_run(tmp_path / "b", 4.0)])}
    assert rows["switch s1"]["us_per_own_packet"] == pytest.approx(150.0)
    with pytest.raises(SystemExit, match="no run.json"):
        cpp.main([str(tmp_path)])
    assert cpp.main([str(tmp_path / "a"), "--markdown"]) == 0
    assert "| switch s1 | 2.0 | 20.0 | 100.0 | 100.0 |" in capsys.readouterr().out
