"""benchmarks/served_vs_schedule.py: packets a BMv2 queue sent against the rate
written to it and against the schedule, from a run's files."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bwn.rundir import RunDir, RunMeta

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("served_vs_schedule", REPO / "benchmarks" / "served_vs_schedule.py")
svs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(svs)

FRAME = 1000          # bytes: 8 000 bit per packet


def make_run(d: Path, written_pps: list[float]) -> Path:
    """A run of 20 s from t = 2 s: the schedule is 80 kb/s (10 pps) then 160 kb/s
    (20 pps) from t = 12 s; the queue was written `written_pps` at the same times."""
    d.mkdir(parents=True)
    rows = ["t_s,link,switch,port,rate_bps,queue_pps",
            f"0.000,bottleneck,C,3,80000,{written_pps[0]}",
            f"12.000,bottleneck,C,3,160000,{written_pps[1]}",
            "0.000,access,A,1,1000000,125"]
    run = RunDir(d)
    run.capacity_csv.write_text("\n".join(rows) + "\n")
    written_due = 10 * written_pps[0] + 10 * written_pps[1]
    run.write_meta(RunMeta(
        flow_starts_s={"f1": 2.0, "f2": 2.5},
        fidelity={"measurements": {"wall_s": 20.0, "ports": {
            "C:3": {"tx_pkts": 285, "due_pkts": written_due, "utilization": round(285 / written_due, 4)},
            "A:1": {"tx_pkts": 2400, "due_pkts": 2500.0, "utilization": 0.96}}}}))
    return d


def test_without_a_look_ahead_both_ratios_agree(tmp_path):
    (row,) = svs.served(make_run(tmp_path / "r", [10, 20]), FRAME, "C:3")
    assert row["per_schedule"] == row["per_written_rate"] == 0.95          # 285 of 300 due


def test_a_written_rate_above_the_schedule_is_not_the_links_shortfall(tmp_path):
    # the queue was written 5 % more than the schedule: per written rate 285 / 315,
    # against the schedule 285 / 300
    (row,) = svs.served(make_run(tmp_path / "r", [10.5, 21]), FRAME, "C:3")
    assert row["per_written_rate"] == pytest.approx(285 / 315, abs=1e-4)
    assert row["per_schedule"] == pytest.approx(0.95, abs=1e-4)


def test_a_run_whose_due_counts_the_schedule_gives_the_written_ratio_the_other_way(tmp_path):
    # since capacity.csv has schedule_pps, run.json's due_pkts is the schedule's (300)
    run = make_run(tmp_path / "r", [10.5, 21])
    rows = RunDir(run).capacity_csv.read_text().splitlines()
    rows = [rows[0] + ",schedule_pps"] + [r + ("," + ("10" if ",C,3,80000," in r else "20" if ",C,3," in r
                                                      else "125")) for r in rows[1:]]
    RunDir(run).capacity_csv.write_text("\n".join(rows) + "\n")
    meta = RunDir(run).meta()
    meta.fidelity["measurements"]["ports"]["C:3"].update(due_pkts=300.0, utilization=0.95)
    RunDir(run).write_meta(meta)
    (row,) = svs.served(run, FRAME, "C:3")
    assert row["per_schedule"] == pytest.approx(0.95, abs=1e-4)
    assert row["per_written_rate"] == pytest.approx(285 / 315, abs=1e-4)


def test_every_rate_limited_port_unless_one_is_asked(tmp_path, capsys):
    run = make_run(tmp_path / "r", [10, 20])
    rows = svs.served(run, FRAME)
    assert [r["port"] for r in rows] == ["A:1", "C:3"]
    assert rows[0]["per_schedule"] == pytest.approx(0.96, abs=1e-4)
    assert svs.main([str(run), "--port", "C:3", "--frame-bytes", str(FRAME)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"{run} | C:3 | 285 | 0.95 | 0.95"


def test_a_missing_run_is_an_error_that_names_it(tmp_path, capsys):
    assert svs.main([str(tmp_path / "nothing")]) == 1
    assert capsys.readouterr().err.startswith(f"{tmp_path / 'nothing'}: cannot read: ")


def test_frame_bytes_must_be_positive(capsys):
    with pytest.raises(SystemExit) as exc:
        svs.main(["x", "--frame-bytes", "0"])
    assert exc.value.code == 2 and "--frame-bytes must be positive" in capsys.readouterr().err
