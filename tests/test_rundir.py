"""The run folder's one definition (bwn/rundir.py): run.json typed, every path named."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bwn.rundir import ExperimentDir, RunDir, RunMeta, RunMetaError, dumps

REPO = Path(__file__).resolve().parents[1]


def full_meta() -> RunMeta:
    return RunMeta(
        scheme="ebn:variant=relative", duration_s=30.0, ok=True, seed=3, delay_emulator="bwn-link",
        linkem_rt_priority=10, queue_lookahead=False, netem_available=False, flow_ids={"main": 7},
        flow_links={"main": [{"link": "bottleneck", "from": "s1", "to": "s2"}]},
        flow_demand_bps={"bg": 2e6}, mss_bytes=1000, frame_bytes=1102, clock_offset_s=1.7e9,
        link_schedules_started=["bottleneck"], flow_starts_s={"main": 2.125},
        sender_exit_codes={"main": 0, "hung": None}, flows_without_summary=["hung"],
        receiver_cpu_s={"h2": 0.5},
        captures={"bottleneck": {"node": "s1", "interface": "s1-eth2", "file": "capture/bottleneck.pcap"}},
        capture_snap_bytes=198, capture_stats={"bottleneck": {"captured": 10, "dropped_by_kernel": 0}},
        bottleneck_link="bottleneck", bottleneck_port="s1:2",
        fidelity={"valid": False, "summary": "INVALID: cpu: BROKEN", "checks_version": 2,
                  "recorded": {"cpu": [[0.0, 100.0, 50.0], [0.1, 110.0, 50.0]]}})


def test_run_json_round_trips_every_field(tmp_path):
    meta = full_meta()
    run = RunDir(tmp_path / "ebn")
    run.write_meta(meta)
    assert run.run_json == tmp_path / "ebn" / "run.json"
    assert run.meta() == meta
    assert json.loads(run.run_json.read_text())["flow_starts_s"] == {"main": 2.125}    # plain JSON


def test_a_file_without_some_keys_gets_their_defaults_and_unknown_keys_are_kept(tmp_path):
    """Runs made before a key existed still load; keys of a later version survive a
    load and save by this one."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"ok": True, "duration_s": 60, "made_on": {"host": "x"}}))
    meta = RunMeta.load(path)
    assert (meta.ok, meta.duration_s, meta.flow_links, meta.flow_starts_s, meta.fidelity) == \
        (True, 60.0, None, {}, None)
    assert meta.extra == {"made_on": {"host": "x"}}
    meta.save(path)
    assert json.loads(path.read_text())["made_on"] == {"host": "x"}
    assert RunDir(tmp_path / "nothing").meta() == RunMeta()         # no run.json: every default


@pytest.mark.parametrize("text, message", [
    ("{", "not JSON: Expecting property name enclosed in double quotes (line 1)"),
    ("[1, 2]", "expected a JSON object, got an array"),
    ('{"ok": 1}', "ok: expected true or false, got number 1"),
    ('{"seed": true}', "seed: expected an integer, got boolean true"),
    ('{"seed": 1.5}', "seed: expected an integer, got number 1.5"),
    ('{"duration_s": "60"}', "duration_s: expected a number, got string '60'"),
    ('{"flow_starts_s": [1]}', "flow_starts_s: expected an object, got an array"),
    ('{"flow_starts_s": {"main": null}}', "flow_starts_s.main: expected a number, got null"),
    ('{"flow_links": {"main": [{"link": 3}]}}', "flow_links.main[0].link: expected a string, got number 3"),
    ('{"flows_without_summary": "main"}', "flows_without_summary: expected an array, got string 'main'"),
    ('{"fidelity": 1}', "fidelity: expected an object, got number 1"),
])
def test_a_malformed_run_json_is_named_with_its_key(tmp_path, text, message):
    path = tmp_path / "run.json"
    path.write_text(text)
    with pytest.raises(RunMetaError) as err:
        RunDir(tmp_path).meta()
    assert str(err.value) == f"{path}: {message}"


def test_validity_of_checked_unchecked_and_failed_runs():
    assert RunMeta().validity == (None, "not checked")                       # before the checks
    assert RunMeta(fidelity={"summary": "x"}).validity == (None, "not checked")
    assert RunMeta(fidelity={"valid": True}).validity == (True, "valid")
    assert RunMeta(fidelity={"valid": False}).validity == (False, "INVALID")
    assert full_meta().validity == (False, "INVALID: cpu: BROKEN")


def test_dumps_is_json_with_arrays_of_numbers_on_one_line():
    value = {"a": [[0.0, 1, 2], [0.5, 3, 4]], "b": [{"x": [1, 2]}, {}], 3: None, "c": {}, "d": [],
             "e": float("inf")}
    text = dumps(value)
    assert json.loads(text) == {"a": [[0.0, 1, 2], [0.5, 3, 4]], "b": [{"x": [1, 2]}, {}], "3": None,
                                "c": {}, "d": [], "e": float("inf")}
    assert '  "a": [[0.0, 1, 2], [0.5, 3, 4]],\n' in text          # one line however long
    assert '      "x": [1, 2]\n' in text                            # objects indented, in arrays too


def test_the_contracts_paths(tmp_path):
    run = RunDir(tmp_path / "newreno")
    assert run.name == "newreno" and Path(run) == tmp_path / "newreno"
    rel = {name: str(getattr(run, name).relative_to(run.path)) for name in (
        "run_json", "scenario_toml", "flows_dir", "telemetry_csv", "capacity_csv", "switch_logs",
        "ready_dir", "capture_dir", "linkem_group_stats", "linkem_group_log")}
    assert rel == {"run_json": "run.json", "scenario_toml": "scenario.toml", "flows_dir": "flows",
                   "telemetry_csv": "telemetry.csv", "capacity_csv": "capacity.csv",
                   "switch_logs": "switch-logs", "ready_dir": "ready", "capture_dir": "capture",
                   "linkem_group_stats": "linkem-links.json", "linkem_group_log": "linkem.log"}
    assert [str(p.relative_to(run.path)) for p in (
        run.flow_log("main"), run.flow_log("main", ".csv"), run.flow_summary("main"), run.sender_log("main"),
        run.receiver_log("h2"), run.receiver_summary("h2"), run.linkem_stats("em0"), run.linkem_log("em0"),
        run.capture_file("s1 to s2/a"))] == [
        "flows/main.jsonl", "flows/main.csv", "flows/main.summary.json", "send-main.log", "recv-h2.log",
        "recv-h2.summary.json", "em0-linkem.json", "em0-linkem.log", "capture/s1_to_s2_a.pcap"]


def test_what_is_there(tmp_path):
    exp = ExperimentDir(tmp_path)
    assert exp.scenario_toml == tmp_path / "scenario.toml" and exp.summary_md == tmp_path / "summary.md"
    ebn, obp, other = exp.run("ebn"), exp.run("obp"), exp.run("notes")
    ebn.flows_dir.mkdir(parents=True)
    for flow in ("b", "a"):
        ebn.flow_summary(flow).write_text("{}")
    ebn.flow_log("a").write_text("")
    for host in ("h3", "h2"):
        ebn.receiver_summary(host).write_text("[]")
    ebn.linkem_stats("em1").write_text("{}")
    obp.path.mkdir()
    obp.capacity_csv.write_text("t_s,link,rate_bps\n")
    other.path.mkdir()
    (other.path / "x.txt").write_text("")
    assert [r.name for r in exp.runs()] == ["ebn", "obp"]
    assert ebn.holds_run() and obp.holds_run() and not other.holds_run()
    assert ebn.flow_summaries() == [ebn.flow_summary("a"), ebn.flow_summary("b")]
    assert ebn.receiver_summaries() == [ebn.receiver_summary("h2"), ebn.receiver_summary("h3")]
    assert ebn.linkem_stats_files() == {"em1": ebn.linkem_stats("em1")}
    assert not ebn.has_meta()


def test_the_documented_run_json_keys_are_the_fields(tmp_path):
    """docs/config.md's run directory names run.json's keys: each is a RunMeta field."""
    text = (REPO / "docs" / "config.md").read_text()
    block = text[text.index("run.json "):text.index("capture/<link>.pcap")]
    keys = set(re.findall(r'"([a-z_]+)": ', block)) - {"link", "from", "to", "node",
                                                                      "interface", "file", "captured",
                                                                      "dropped_by_kernel", "main",
                                                                      "cross", "bg", "bottleneck"}
    assert keys and keys <= set(RunMeta().to_json()), keys - set(RunMeta().to_json())


def test_make_run_dir_builds_the_folder_through_the_contract(make_run_dir):
    run = make_run_dir("obp", meta=RunMeta(ok=True, flow_starts_s={"f1": 2.0}),
                       summaries={"f1": {"flow_id": 1, "algo": "obp"}},
                       capacity=[(0.0, "bottleneck", 10e6)], receivers={"h2": [{"flow_id": 1}]})
    assert run.meta().flow_starts_s == {"f1": 2.0}
    assert json.loads(run.flow_summary("f1").read_text()) == {"flow_id": 1, "algo": "obp"}
    assert run.capacity_csv.read_text() == "t_s,link,rate_bps\n0.0,bottleneck,10000000.0\n"
    assert json.loads(run.receiver_summary("h2").read_text()) == [{"flow_id": 1}]
    assert not make_run_dir("bare").has_meta()
