"""Experiment/topology configuration (bwn/scenario/config.py, docs/config.md)."""
from __future__ import annotations

import copy
import ipaddress
import re
from pathlib import Path
from typing import Any

import pytest

from bwn.scenario import config as cfg
from bwn.scenario.config import schedule_from_json
from bwn.scenario.model import DataplaneConfig
from bwn.scenario.schedule import ConstantSchedule, ScheduleError, SineSchedule, StepSchedule, TraceSchedule

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "topologies" / "configs" / "example-dumbbell.toml"


def minimal() -> dict:
    """The smallest valid config: h1 - s1 - h2."""
    return {
        "experiment": {"name": "t", "duration_s": 30},
        "switches": [{"name": "s1"}],
        "hosts": [{"name": "h1", "ip": "10.0.1.1/24"}, {"name": "h2", "ip": "10.0.2.1/24"}],
        "links": [
            {"a": "h1", "b": "s1", "schedule": {"kind": "constant", "rate_mbit": 100}},
            {"a": "s1", "b": "h2", "delay_ms": 10,
             "schedule": {"kind": "steps", "steps": [{"t_s": 0, "rate_mbit": 10},
                                                     {"t_s": 10, "rate_mbit": 5}]}},
        ],
        "flows": [{"src": "h1", "dst": "h2"}],
    }


def errors_of(data: dict, **kwargs) -> list[str]:
    with pytest.raises(cfg.ConfigError) as err:
        cfg.validate(data, **kwargs)
    return err.value.errors


def test_example_config_loads():
    c = cfg.load_config(EXAMPLE)
    assert c.name == "example-dumbbell"
    assert c.duration_s == 60
    assert c.schemes == ("ebn", "newreno", "westwood")
    assert [s.name for s in c.switches] == ["s1", "s2"]
    assert c.switches[0].grpc_port == 50001 and c.switches[1].grpc_port is None
    assert c.host("h1").ip == ipaddress.IPv4Interface("10.0.1.1/24")
    assert c.host("h1").address == "10.0.1.1"
    bottleneck = c.link("bottleneck")
    assert (bottleneck.a, bottleneck.b, bottleneck.a_port) == ("s1", "s2", 3)
    assert bottleneck.apply_at == ("s1", "s2")
    assert bottleneck.queue_packets == 50 and bottleneck.delay_ms == 10
    assert isinstance(bottleneck.capacity.schedule, SineSchedule)
    assert bottleneck.capacity.schedule.b_bps == 10e6
    assert c.link("h1-s1").apply_at == ("s1",)        # "both" = every switch end
    trace = c.link("s2-h2").capacity
    assert isinstance(trace.schedule, TraceSchedule)
    assert trace.trace_path == EXAMPLE.parent / "traces" / "12mbit.trace"
    assert trace.schedule.rate_bps(3.0) == pytest.approx(12e6)
    assert c.dataplane.window_us == 16384 and c.telemetry.interval_s == 0.1
    assert c.reservations[0].rate_bps == 2e6
    main, cross = c.flows
    assert (main.scheme, main.duration_s, main.bytes) == ("under-test", 60, None)
    assert main.algorithm("ebn") == "ebn" and cross.algorithm("ebn") == "gtcp"
    assert (cross.start_s, cross.bytes, cross.reserved_rate_mbit) == (10, 5_000_000, 2)
    assert [link.name for link in c.path_links("h1", "h2")] == ["h1-s1", "bottleneck", "s2-h2"]


def test_minimal_defaults():
    c = cfg.validate(minimal())
    assert c.dataplane == DataplaneConfig()
    assert c.switches[0].device_id == 0
    link = c.links[1]
    assert link.name == "s1-h2" and link.loss == 0 and link.queue_packets == 64
    assert isinstance(link.capacity.schedule, StepSchedule)
    assert link.capacity.updates(30) == [(0.0, 10e6), (10.0, 5e6)]
    assert isinstance(c.links[0].capacity.schedule, ConstantSchedule)
    flow = c.flows[0]
    assert (flow.name, flow.scheme, flow.start_s, flow.bytes, flow.duration_s) == \
        ("flow0", "under-test", 0.0, None, None)


def test_apply_at_one_end_and_loss():
    data = minimal()
    data["switches"].append({"name": "s2"})
    data["links"][1] = {"a": "s1", "b": "s2", "apply_at": "s2", "loss": 0.01,
                        "schedule": {"kind": "constant", "rate_mbit": 10}}
    data["links"].append({"a": "s2", "b": "h2", "schedule": {"kind": "constant", "rate_mbit": 10}})
    c = cfg.validate(data)
    assert c.links[1].apply_at == ("s2",) and c.links[1].loss == 0.01


@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d["links"][1]["schedule"].update(kind="sin"),
     "links[1].schedule.kind: unknown kind 'sin' (expected one of: constant, steps, sine, trace)"),
    (lambda d: d["links"][0].update(a="h9"),
     "links[0].a: unknown node 'h9' (known: h1, h2, s1)"),
    (lambda d: d["links"][0].update(delay=3),
     "links[0].delay: unknown key (expected one of: name, a, b, a_port, b_port, schedule, "
     "delay_ms, loss, queue_packets, af_threshold_packets, apply_at, shaper, aqm, service)"),
    (lambda d: d["links"][0].update(loss=1.5), "links[0].loss: must be at most 1, got 1.5"),
    (lambda d: d["links"][0].update(delay_ms="ten"),
     "links[0].delay_ms: expected a number, got string 'ten'"),
    (lambda d: d["links"][0].update(queue_packets=2.5),
     "links[0].queue_packets: expected an integer, got float 2.5"),
    (lambda d: d["links"][0].pop("schedule"), "links[0].schedule: missing (required)"),
    (lambda d: d["links"][0].update(apply_at="h1"),
     "links[0].apply_at: 'h1' is a host: only a switch's egress port can apply the schedule"),
    (lambda d: d["links"][0].update(a_port=64), "links[0].a_port: must be at most 63, got 64"),
    (lambda d: d["links"][0]["schedule"].update(kind="sine", b_mbit=1, alpha=0.5, w_rad_s=1),
     "links[0].schedule.rate_mbit: unknown key for kind 'sine'"),
    (lambda d: d["links"][0]["schedule"].update(rate_mbit=0),
     "links[0].schedule.rate_mbit: must be greater than 0, got 0"),
    (lambda d: d["links"][1]["schedule"]["steps"][1].update(t_s=0),
     "links[1].schedule.steps[1].t_s: 0 is not after the previous step's 0"),
    (lambda d: d["links"][1]["schedule"]["steps"][0].update(t_s=2),
     "links[1].schedule.steps[0].t_s: the first step must be at t_s = 0, got 2"),
    (lambda d: d["hosts"][0].update(ip="10.0.1.1"),
     "hosts[0].ip: expected an IPv4 address with its prefix length, like 10.0.1.1/24, "
     "got '10.0.1.1'"),
    (lambda d: d["hosts"][1].update(ip="10.0.1.1/24"),
     "hosts[1].ip: address 10.0.1.1 is already used by hosts[0]"),
    (lambda d: d["hosts"][1].update(name="s1"),
     "hosts[1].name: name 's1' is already used by switches[0].name"),
    (lambda d: d["dataplane"] if d.update(dataplane={"window_us": 1000}) else None,
     "dataplane.window_us: the window must be a power of two between 64 and 16777216 us, "
     "got 1000"),
    (lambda d: d.update(telemetry={"interval_s": 0}),
     "telemetry.interval_s: must be greater than 0, got 0"),
    (lambda d: d["flows"][0].update(scheme="cubic"),
     "flows[0].scheme: unknown scheme 'cubic' (expected one of: under-test, newreno"),
    (lambda d: d["flows"][0].update(dst="s1"),
     "flows[0].dst: 's1' is a switch, expected a host (hosts: h1, h2)"),
    (lambda d: d["flows"][0].update(bytes=10, duration_s=3),
     "flows[0]: give bytes or duration_s, not both"),
    (lambda d: d["flows"][0].update(start_s=20, duration_s=20),
     "flows[0].duration_s: the flow would end at 40 s, after the experiment (30 s)"),
    (lambda d: d["flows"][0].update(reserved_rate_mbit=2),
     "flows[0].reserved_rate_mbit: no reservation from h1 to h2 (add one under [[reservations]])"),
    (lambda d: d["flows"][0].update(scheme="ebn", reserved_rate_mbit=2),
     "flows[0].reserved_rate_mbit: scheme 'ebn' takes no reserved rate"),
    (lambda d: d.update(reservations=[{"src": "h1", "dst": "h2", "rate_mbit": -1}]),
     "reservations[0].rate_mbit: must be greater than 0, got -1"),
    (lambda d: d["links"].pop(1), "hosts[1]: host 'h2' is not connected by any link"),
    (lambda d: d.pop("switches"), "switches: missing (required)"),
    (lambda d: d.update(extra=1), "extra: unknown key (expected one of: experiment"),
    # Messages of the declared format (bwn/scenario/model.py) for each kind of mistake.
    (lambda d: d.update(switches=[]),
     "switches: expected a non-empty array of tables ([[switches]]), got an array"),
    (lambda d: d.update(flows={"src": "h1"}),
     "flows: expected an array of tables ([[flows]]), got a table"),
    (lambda d: d["experiment"].update(schemes="ebn"),
     "experiment.schemes: expected an array of algorithm names, got string 'ebn'"),
    (lambda d: d["experiment"].update(schemes=["ebn", "cubic"]),
     "experiment.schemes[1]: unknown algorithm 'cubic' (expected one of: newreno, reno"),
    (lambda d: d["experiment"].update(duration_s=True),
     "experiment.duration_s: expected a number, got boolean true"),
    (lambda d: d["experiment"].update(duration_s=float("nan")),
     "experiment.duration_s: must be finite, got nan"),
    (lambda d: d["experiment"].update(name=""),
     "experiment.name: expected a non-empty string, got string ''"),
    (lambda d: d["links"][0].update(schedule={"rate_mbit": 3}),
     "links[0].schedule.kind: missing (required; one of: constant, steps, sine, trace)"),
    (lambda d: d["links"][0].update(schedule=3), "links[0].schedule: expected a table, got int 3"),
    (lambda d: d["links"][0]["schedule"].update(rate_mbit=1e9),
     "links[0].schedule.rate_mbit: link capacity 1e+15 b/s exceeds the dataplane's 2.15e+12 b/s"),
    # Within the dataplane's kb/s range, but not in bytes per (default 16.4 ms) window.
    (lambda d: d["links"][0]["schedule"].update(rate_mbit=6e5),
     "links[0].schedule: link capacity 6e+11 b/s is too large for a 16384 us window"),
    (lambda d: d["links"][1]["schedule"].update(steps=[]),
     "links[1].schedule.steps: expected a non-empty array of {t_s = ..., rate_mbit = ...}, "
     "got an array"),
    (lambda d: d["links"][1]["schedule"]["steps"][1].update(x=1),
     "links[1].schedule.steps[1].x: unknown key (expected one of: t_s, rate_mbit)"),
    (lambda d: d["switches"].append({"name": "s1"}),
     "switches[1].name: name 's1' is already used by switches[0].name"),
    (lambda d: d["switches"].append({"name": "abcdefghijk"}),
     "switches[1].name: 'abcdefghijk' is not a valid node name (a letter, then letters, digits "
     "or '_', at most 10 characters"),
    (lambda d: d["hosts"][0].update(ip="10.0.1.255/24"),
     "hosts[0].ip: 10.0.1.255 is the network or broadcast address of 10.0.1.0/24"),
    (lambda d: d["flows"][0].update(params={"a": 1, "b": {"c": 1}}),
     "flows[0].params.b: expected a string, number or boolean, got a table"),
    (lambda d: d["flows"][0].update(start_s=30),
     "flows[0].start_s: 30 s is not before the end of the experiment (30 s)"),
    (lambda d: d["links"][0].update(a_port=1),
     "links[0].a_port: 'h1' is a host; ports are numbered on switches only"),
])
def test_each_error_is_reported_with_its_location(mutate, expected):
    data = copy.deepcopy(minimal())
    mutate(data)
    errors = errors_of(data)
    assert any(e.startswith(expected) for e in errors), errors


def test_no_path_between_hosts():
    data = minimal()
    data["switches"].append({"name": "s2"})
    data["links"][1]["a"] = "s2"
    errors = errors_of(data)
    assert "flows[0]: no path from h1 to h2 over the links" in errors


def test_trace_errors_name_file_and_line(tmp_path):
    (tmp_path / "bad.trace").write_text("10\n20\n130\n120\n")
    data = minimal()
    data["links"][1]["schedule"] = {"kind": "trace", "path": "bad.trace"}
    errors = errors_of(data, base_dir=tmp_path)
    assert errors == ["links[1].schedule.path: bad.trace:4: timestamp 120 is smaller than "
                      "the previous 130"]


def test_all_errors_collected_in_one_exception():
    data = minimal()
    data["links"][1]["schedule"]["kind"] = "sin"
    data["links"][0]["loss"] = 2
    data["hosts"][0]["ip"] = "300.1.1.1/24"
    data["flows"][0]["start_s"] = -1
    with pytest.raises(cfg.ConfigError) as err:
        cfg.validate(data, source="exp.toml")
    errors = err.value.errors
    assert len(errors) == 4, errors
    assert errors[0].startswith("hosts[0].ip: not an IPv4 address/prefix")
    assert errors[1] == "links[0].loss: must be at most 1, got 2"
    assert errors[2].startswith("links[1].schedule.kind: unknown kind 'sin'")
    assert errors[3] == "flows[0].start_s: must be at least 0, got -1"
    text = str(err.value)
    assert text.startswith("exp.toml: 4 errors:")
    assert all(e in text for e in errors)


def test_load_config_reports_toml_syntax(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("[experiment\nname = 1\n")
    with pytest.raises(cfg.ConfigError, match="broken.toml: 1 error:\n  not valid TOML"):
        cfg.load_config(path)


def test_load_config_resolves_trace_relative_to_file(tmp_path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "t.trace").write_text("2\n")   # 1 opportunity / 2 ms = 6 Mb/s
    text = EXAMPLE.read_text().replace('path = "traces/12mbit.trace"', 'path = "traces/t.trace"')
    (tmp_path / "exp.toml").write_text(text)
    c = cfg.load_config(tmp_path / "exp.toml")
    assert c.link("s2-h2").capacity.schedule.rate_bps(1.0) == pytest.approx(6e6)
    assert c.source == tmp_path / "exp.toml"


def test_format_errors_first_then_references():
    # Step 1 (the declared format) reports every format error; the checks across
    # tables (step 2) run once the format is right, so they never report
    # consequences of a format error.
    data = minimal()
    data["links"][0]["loss"] = 2
    data["links"][1]["b"] = "h9"
    assert errors_of(data) == ["links[0].loss: must be at most 1, got 2"]
    data["links"][0]["loss"] = 0
    assert errors_of(data) == ["links[1].b: unknown node 'h9' (known: h1, h2, s1)",
                               "hosts[1]: host 'h2' is not connected by any link",
                               "flows[0]: no path from h1 to h2 over the links"]


@pytest.mark.parametrize("mutate, expected", [
    # Exact lines (the list above matches prefixes): one per kind of pydantic error.
    (lambda d: d["flows"][0].update(bytes=10, duration_s=3), "flows[0]: give bytes or duration_s, not both"),
    (lambda d: d["experiment"].update(name=3), "experiment.name: expected a non-empty string, got int 3"),
    (lambda d: d.update(dataplane=[1]), "dataplane: expected a table, got an array"),
    (lambda d: d["links"][0].update(queue_packets="5"),
     "links[0].queue_packets: expected an integer, got string '5'"),
    (lambda d: d["links"][0].update(queue_packets=0), "links[0].queue_packets: must be at least 1, got 0"),
    (lambda d: d["links"][0]["schedule"].update(kind=3),
     "links[0].schedule.kind: expected a non-empty string, got int 3"),
    (lambda d: d["links"][0]["schedule"].update(kind="warp"),
     "links[0].schedule.kind: unknown kind 'warp' (expected one of: constant, steps, sine, trace)"),
    (lambda d: d["experiment"].update(duration_s="30"),
     "experiment.duration_s: expected a number, got string '30'"),
    (lambda d: d["experiment"].update(duration_s=float("inf")),
     "experiment.duration_s: must be finite, got inf"),
])
def test_error_lines_are_exact(mutate, expected):
    data = copy.deepcopy(minimal())
    mutate(data)
    assert expected in errors_of(data)


# -- shaper: where a link's rate is applied -----------------------------------------------

def shaped(**experiment: Any) -> dict:
    """minimal() with its delayed link s1-h2 at a constant 10 Mb/s served by bwn-link."""
    data = minimal()
    data["experiment"].update(experiment)
    data["links"][1].update(shaper="link", schedule={"kind": "constant", "rate_mbit": 10})
    return data


def test_shaper_defaults_to_the_switch_and_link_is_kept():
    plain = cfg.validate(minimal())
    assert [link.shaper for link in plain.links] == ["switch", "switch"]
    assert not plain.links[1].shaped_by_link
    assert [link.needs_emulator() for link in plain.links] == [False, True]   # a delay needs one
    c = cfg.validate(shaped())
    assert c.links[1].shaper == "link" and c.links[1].shaped_by_link
    assert c.links[1].served_schedule.rate_bps(0.0) == 10e6 and plain.links[1].served_schedule is None
    data = shaped()
    data["links"][1]["delay_ms"] = 0
    undelayed = cfg.validate(data).links[1]
    assert undelayed.delay_ms == 0 and undelayed.needs_emulator()      # the rate needs one too
    assert c.shaper_conflicts(["dft", "westwood", "ebn:variant=relative"]) == []
    assert plain.shaper_conflicts(["obp", "gtcp"]) == []                 # nothing served by a link


def test_shaper_link_takes_constant_steps_and_sine_but_not_a_trace(tmp_path):
    data = minimal()
    data["links"][1]["shaper"] = "link"                                  # its schedule has steps
    steps = cfg.validate(data).links[1]
    assert steps.served_schedule is steps.capacity.schedule and steps.capacity.kind == "steps"
    data["links"][1]["schedule"] = {"kind": "sine", "b_mbit": 0.1102, "w_rad_s": 1.0}
    assert cfg.validate(data).links[1].served_schedule.rate_bps(0.0) == pytest.approx(110_200)
    (tmp_path / "t.trace").write_text("1\n2\n")
    data["links"][1]["schedule"] = {"kind": "trace", "path": str(tmp_path / "t.trace")}
    assert errors_of(data) == ['links[1].shaper: shaper = "link" needs a constant, steps or sine '
                               'schedule (bwn-link computes the rate of each frame from it), got '
                               'kind = "trace"']
    data["links"][1]["shaper"] = "bytes"
    assert errors_of(data) == ["links[1].shaper: expected 'switch' or 'link', got string 'bytes'"]


def test_af_threshold_defaults_to_half_the_queue_and_must_fit_in_it():
    data = minimal()
    assert cfg.validate(data).links[1].af_queue_packets == data["links"][1].get("queue_packets", 64) // 2
    data["links"][1]["queue_packets"] = 60
    data["links"][1]["af_threshold_packets"] = 12
    assert cfg.validate(data).links[1].af_queue_packets == 12
    data["links"][1]["af_threshold_packets"] = 61
    assert errors_of(data) == ["links[1].af_threshold_packets: 61 is more than the queue's 60 "
                               "packets (queue_packets)"]
    data["links"][1]["af_threshold_packets"] = 0
    (message,) = errors_of(data)
    assert message.startswith("links[1].af_threshold_packets:")


def test_shaper_link_refuses_the_schemes_that_read_the_switchs_queue():
    (message,) = errors_of(shaped(schemes=["dft", "obp:window_us=65536"]))
    assert message == ('links: link s1-h2 (shaper = "link"): the switch\'s egress queue stays empty '
                       'there, and obp reads it (OBP\'s queued bytes BI, GTCP\'s Assured '
                       'Forwarding): use shaper = "switch" for this scheme')
    data = shaped()
    data["flows"].append({"src": "h1", "dst": "h2", "scheme": "gtcp"})
    (message,) = errors_of(data)
    assert "gtcp reads it" in message
    c = cfg.validate(shaped(schemes=["westwood"]))
    (both,) = c.shaper_conflicts(["obp", "gtcp", "dft"])
    assert "gtcp, obp read it" in both and both.endswith("for these schemes")


def test_shaper_link_refuses_reservations():
    data = shaped()
    data["reservations"] = [{"src": "h1", "dst": "h2", "rate_mbit": 2}]
    assert errors_of(data) == ['links: link s1-h2 (shaper = "link"): reservations are protected by '
                               'the switch\'s queue (Assured Forwarding), which stays empty there: '
                               'use shaper = "switch"']


# -- bwn-link's --rate-schedule: a [links.schedule] table as JSON -> its Schedule --------

@pytest.mark.parametrize("text, schedule", [
    ('{"kind": "constant", "rate_mbit": 5}', ConstantSchedule(5e6)),
    ('{"kind": "sine", "b_mbit": 0.15, "alpha": 3, "w_rad_s": 0.1, "phi_rad": 1}',
     SineSchedule(150e3, 3.0, 0.1, 1.0)),
    ('{"kind": "sine", "b_mbit": 2, "w_rad_s": 0.5}', SineSchedule(2e6, 3.0, 0.5, 0.0)),
    ('{"kind": "steps", "steps": [{"t_s": 0, "rate_mbit": 5}, {"t_s": 4.5, "rate_mbit": 2}]}',
     StepSchedule([(0.0, 5e6), (4.5, 2e6)])),
])
def test_a_link_schedule_from_json_is_the_scenarios_schedule(text, schedule):
    got = schedule_from_json(text)
    assert got == schedule and type(got) is type(schedule)
    assert [got.rate_bps(t) for t in (0.0, 3.0, 7.0)] == [schedule.rate_bps(t) for t in (0.0, 3.0, 7.0)]


@pytest.mark.parametrize("text, says", [
    ('{"kind": "trace", "file": "x.trace"}', "a trace is a file of delivery opportunities"),
    ('{"kind": "square", "rate_mbit": 1}', "expected one of: constant, steps, sine"),
    ('{"kind": "sine", "alpha": 3}', "b_mbit: missing (required); w_rad_s: missing (required)"),
    ('{"kind": "steps", "steps": [{"t_s": 4, "rate_mbit": 5}]}', "the first step must be at t_s = 0"),
    ('{"kind": "constant"', "Invalid JSON"),
    ('[1]', "expected a table"),
])
def test_a_bad_link_schedule_says_what_is_wrong_in_one_line(text, says):
    with pytest.raises(ScheduleError, match=re.escape(says)) as err:
        schedule_from_json(text)
    assert "\n" not in str(err.value)


# -- checks across tables: every error exactly, and nothing more -----------------------

def _two_switches() -> dict:
    """minimal() with a second switch: h1 - s1 - s2 - h2."""
    data = minimal()
    data["switches"].append({"name": "s2"})
    data["links"][1]["a"] = "s2"
    data["links"].append({"a": "s1", "b": "s2", "schedule": {"kind": "constant", "rate_mbit": 10}})
    return data


@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d["links"][0].update(a="s1"), ["links[0]: both ends are 's1'",
                                              "hosts[0]: host 'h1' is not connected by any link",
                                              "flows[0]: no path from h1 to h2 over the links"]),
    (lambda d: d["links"].append({"a": "h1", "b": "h2", "schedule": {"kind": "constant", "rate_mbit": 1}}),
     ["links[3]: a link between two hosts (h1, h2) has no switch"]),
    # a named duplicate is reported at .name; an unnamed one (a-b) at the link
    (lambda d: d["links"][2].update(name="h1-s1"),
     ["links[2].name: link name 'h1-s1' is already used by links[0] (set a distinct name = ...)"]),
    (lambda d: d["links"].append({"a": "s1", "b": "s2", "schedule": {"kind": "constant", "rate_mbit": 1}}),
     ["links[3]: link name 's1-s2' is already used by links[2] (set a distinct name = ...)"]),
    (lambda d: (d["links"][0].update(b_port=3), d["links"][2].update(a_port=3)),
     ["links[2].a_port: port 3 of s1 is already used by links[0]"]),
    (lambda d: d["links"][2].update(queue_packets=20, af_threshold_packets=21),
     ["links[2].af_threshold_packets: 21 is more than the queue's 20 packets (queue_packets)"]),
    (lambda d: d["switches"][1].update(device_id=0),
     ["switches[1].device_id: device id 0 is already used by switches[0]"]),
    (lambda d: (d["switches"][0].update(grpc_port=50001), d["switches"][1].update(thrift_port=50001)),
     ["switches[1].thrift_port: TCP port 50001 is already used by switches[0].grpc_port"]),
    (lambda d: d["flows"].append({"src": "h1", "dst": "h2", "name": "flow0"}),
     ["flows[1].name: flow name 'flow0' is already used by flows[0]"]),
    (lambda d: d["flows"][0].update(dst="h1"), ["flows[0]: src and dst are both 'h1'"]),
    (lambda d: d["flows"][0].update(start_s=10, duration_s=20.5),
     ["flows[0].duration_s: the flow would end at 30.5 s, after the experiment (30 s)"]),
    (lambda d: d.update(reservations=[{"src": "h2", "dst": "h2", "rate_mbit": 1}]),
     ["reservations[0]: src and dst are both 'h2'"]),
    # IC must fit the window at the sine's peak, b * (1 + 1/alpha): 6e11 b/s here
    (lambda d: d["links"][2].update(schedule={"kind": "sine", "b_mbit": 3e5, "alpha": 1, "w_rad_s": 1}),
     ["links[2].schedule: link capacity 6e+11 b/s is too large for a 16384 us window (at most "
      "5.24e+11 b/s): the dataplane holds IC - BR - BI in int32 bytes per window; use a shorter window"]),
])
def test_cross_table_errors_are_exact_and_alone(mutate, expected):
    data = _two_switches()
    mutate(data)
    errors = errors_of(data)
    assert errors == expected


def test_what_the_cross_table_checks_accept_at_their_bounds():
    data = _two_switches()
    data["links"][2].update(queue_packets=20, af_threshold_packets=20,      # AF threshold = the queue
                            schedule={"kind": "sine", "b_mbit": 3e5, "alpha": 2, "w_rad_s": 1})  # peak 4.5e11
    data["flows"][0].update(start_s=10, duration_s=20)                      # ends with the experiment
    data["switches"][0].update(grpc_port=50001, thrift_port=9090)
    c = cfg.validate(data)
    assert (c.switches[0].grpc_port, c.switches[0].thrift_port) == (50001, 9090)
    assert [s.device_id for s in c.switches] == [0, 1]
    assert c.link("s1-s2").af_threshold_packets == 20
    assert c.flows[0].duration_s == 20


@pytest.mark.parametrize("mutate, expected", [
    # the kinds of pydantic error the format step maps, each as the user reads it
    (lambda d: d["links"][0].update(queue_packets=2.5), "links[0].queue_packets: expected an integer, got float 2.5"),
    (lambda d: d["links"][0].update(queue_packets="abc"),
     "links[0].queue_packets: expected an integer, got string 'abc'"),
    (lambda d: d.update(bogus=1), "bogus: unknown key (expected one of: experiment, dataplane, telemetry, capture, "
                                  "switches, hosts, links, reservations, flows)"),
    (lambda d: d["experiment"].update(colour=1),
     "experiment.colour: unknown key (expected one of: name, duration_s, schemes, seed, receive_window_bytes, "
     "sack, ecn, linkem_rt_priority, linkem_shared, queue_lookahead)"),
    (lambda d: d["links"][0]["schedule"].update(b_mbit=1),
     "links[0].schedule.b_mbit: unknown key for kind 'constant' (expected one of: update_interval_s, "
     "update_threshold, kind, rate_mbit)"),
    (lambda d: d["links"][0].update(shaper="bogus"), "links[0].shaper: expected 'switch' or 'link', got string 'bogus'"),
    (lambda d: d["experiment"].update(duration_s=-1), "experiment.duration_s: must be greater than 0, got -1"),
])
def test_each_kind_of_format_error_reads_as_one_line(mutate, expected):
    data = copy.deepcopy(minimal())
    mutate(data)
    assert errors_of(data) == [expected]


@pytest.mark.parametrize("text, says", [
    # bwn-link --rate-schedule: keys are the table's own, and a trace is not offered
    ('{"rate_mbit": 1}', "kind: missing (required; one of: constant, steps, sine)"),
    ('{"kind": "constant", "rate_mbit": -1, "x": 1}',
     "rate_mbit: must be greater than 0, got -1; x: unknown key for kind 'constant' (expected one of: "
     "update_interval_s, update_threshold, kind, rate_mbit)"),
    ('{"kind": "steps", "steps": [{"t_s": 0}]}', "steps[0].rate_mbit: missing (required)"),
    ('{"kind": 3}', "kind: expected one of: constant, steps, sine (a trace is a file of delivery "
                    "opportunities, not a rate bwn-link serves), got int 3"),
    ('[1]', "expected a table, got an array"),                         # the whole value: no key to name
])
def test_a_link_schedules_errors_name_the_keys_of_the_table_given(text, says):
    with pytest.raises(ScheduleError) as err:
        schedule_from_json(text)
    assert str(err.value) == says


def test_two_links_served_by_bwn_link_are_named_together():
    data = shaped()
    data["links"][0].update(shaper="link")
    data["flows"][0]["scheme"] = "obp"                            # a flow run with OBP whatever is under test
    (message,) = errors_of(data)
    assert message.startswith('links: links h1-s1, s1-h2 (shaper = "link"): the switch\'s egress queue '
                              'stays empty there, and obp reads it')


def test_a_scenario_without_a_name_is_named_after_its_file(tmp_path):
    data = minimal()
    del data["experiment"]["name"]
    assert cfg.validate(data, source=tmp_path / "my-exp.toml").name == "my-exp"
    assert cfg.validate(data).name == "experiment"


def test_a_scenario_file_that_cannot_be_read_says_so(tmp_path):
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load_config(tmp_path / "missing.toml")
    assert err.value.errors == ["cannot read the file: No such file or directory"]
    assert err.value.source == str(tmp_path / "missing.toml")


# -- the network's models: RED with ECN, the guaranteed service, ECN senders ---------------

def test_aqm_service_and_ecn_default_to_drop_tail_assured_and_off():
    c = cfg.validate(minimal())
    assert [(link.aqm, link.red_ecn, link.service, link.guaranteed) for link in c.links] == \
        [("drop-tail", False, "assured", False)] * 2
    assert c.ecn is False


def test_aqm_service_and_ecn_are_kept():
    data = minimal()
    data["experiment"]["ecn"] = True
    data["links"][1].update(aqm="red-ecn", service="guaranteed", queue_packets=40, af_threshold_packets=40)
    c = cfg.validate(data)
    assert c.ecn is True
    assert (c.links[1].aqm, c.links[1].red_ecn, c.links[1].service, c.links[1].guaranteed) == \
        ("red-ecn", True, "guaranteed", True)
    assert (c.links[0].red_ecn, c.links[0].guaranteed) == (False, False)


@pytest.mark.parametrize("edit, expected", [
    (lambda link: link.update(aqm="red"),
     "links[1].aqm: expected 'drop-tail' or 'red-ecn', got string 'red'"),
    (lambda link: link.update(service="premium"),
     "links[1].service: expected 'assured' or 'guaranteed', got string 'premium'"),
    (lambda link: link.update(aqm="red-ecn", shaper="link", schedule={"kind": "constant", "rate_mbit": 10}),
     'links[1].aqm: aqm = "red-ecn" needs the switch\'s queue to serve the link (shaper = "switch"): '
     'with shaper = "link" that queue stays empty'),
    (lambda link: link.update(service="guaranteed", shaper="link", schedule={"kind": "constant", "rate_mbit": 10}),
     'links[1].service: service = "guaranteed" needs the switch\'s queue to serve the link (shaper = '
     '"switch"): with shaper = "link" that queue stays empty'),
    (lambda link: link.update(service="guaranteed", queue_packets=40, af_threshold_packets=20),
     'links[1].af_threshold_packets: service = "guaranteed" has no Assured Forwarding threshold '
     '(out-of-profile and best-effort packets share a FIFO with tail drop): leave it out or set it to '
     'queue_packets (40), got 20'),
])
def test_bad_aqm_or_service_is_refused_with_the_reason(edit, expected):
    data = minimal()
    edit(data["links"][1])
    assert errors_of(data) == [expected]


def test_ecn_must_be_a_boolean():
    data = minimal()
    data["experiment"]["ecn"] = "yes"
    assert errors_of(data) == ["experiment.ecn: Input should be a valid boolean, got string 'yes'"]


def test_a_constant_rate_flow_is_the_cbr_sender_at_its_rate_and_its_rate_is_its_demand():
    from bwn.scenario.flowpaths import run_meta
    data = minimal()
    data["flows"].append({"name": "udp", "kind": "cbr", "rate_mbit": 4.408, "src": "h1", "dst": "h2",
                          "start_s": 5, "duration_s": 10})
    c = cfg.validate(data)
    main, udp = c.flows
    assert (main.algorithm("dft"), main.constant_rate_mbit) == ("dft", None)
    assert udp.algorithm("dft") == "cbr" and dict(udp.params) == {"rate_mbit": 4.408}
    assert (udp.start_s, udp.duration_s, udp.constant_rate_mbit) == (5.0, 10.0, 4.408)
    # the report's fair shares take it at its rate, as payload: 4.408 Mb/s of 1102-byte frames
    meta = run_meta(c, mss_bytes=1000, frame_bytes=1102)
    assert meta["flow_demand_bps"] == {"udp": pytest.approx(4.0e6)}


@pytest.mark.parametrize("flow, says", [
    ({"kind": "cbr"}, 'a kind = "cbr" flow needs rate_mbit'),
    ({"rate_mbit": 2}, 'rate_mbit is a constant-rate flow\'s: add kind = "cbr"'),
    ({"kind": "cbr", "rate_mbit": 2, "bytes": 1000, "scheme": "reno"}, "remove bytes, scheme"),
    ({"kind": "cbr", "rate_mbit": 2, "params": {"x": 1}}, "remove params"),
    ({"kind": "udp", "rate_mbit": 2}, "kind"),
    ({"kind": "cbr", "rate_mbit": 0}, "rate_mbit"),
])
def test_a_constant_rate_flow_that_is_not_one_says_what_to_fix(flow, says):
    data = minimal()
    data["flows"] = [{"src": "h1", "dst": "h2", **flow}]
    errors = errors_of(data)
    assert len(errors) == 1 and says in errors[0], errors
