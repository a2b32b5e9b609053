"""The runner's switch plans and agent command lines (bwn/experiment.py), without Mininet.

`_switch_plans` is what the controller programs into every switch: routes, each
egress port's capacity schedule (and where it applies), queue, the frame size that
turns its bit rate into BMv2's packets/s, the Assured Forwarding threshold of ports
that reserved flows leave by, and the reservation meters. A fake Mininet network
stands in for the real one (same port numbering rule: each node's interfaces in
link order)."""
from __future__ import annotations

import asyncio
import copy
import signal
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bwn import experiment as ex
from bwn.controller.config import ExperimentConfig, load_config, validate
from bwn.controller.entries import Reservation
from bwn.wire import BWN_UDP_PORT

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "topologies" / "scenarios"
TRANSPORT_HEADER_LEN = 36           # docs/transport.md
DATA_FRAME = 1000 + 14 + 20 + 8 + 24 + TRANSPORT_HEADER_LEN   # 1102: the agents' 1000-byte segments
ACK_FRAME = 14 + 20 + 8 + 24 + TRANSPORT_HEADER_LEN           # 102


@dataclass
class FakeIntf:
    name: str
    node: "FakeNode"

    def MAC(self) -> str:
        return f"mac:{self.name}"


@dataclass
class FakeNode:
    name: str
    index: int
    intfs: list[FakeIntf] = field(default_factory=list)
    popened: list[list[str]] = field(default_factory=list)

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{50100 + self.index}"

    @property
    def thrift_port(self) -> int:
        return 9190 + self.index

    @property
    def device_id(self) -> int:
        return self.index + 1

    def add_intf(self) -> FakeIntf:
        intf = FakeIntf(f"{self.name}-eth{len(self.intfs) + 1}", self)
        self.intfs.append(intf)
        return intf

    def port_of(self, intf_name: str) -> int:
        return [i.name for i in self.intfs].index(intf_name) + 1

    def MAC(self) -> str:
        return self.intfs[0].MAC()

    def popen(self, cmd: list[str], **_: Any) -> subprocess.Popen:
        self.popened.append(cmd)
        return subprocess.Popen(["true"])


class FakeNet:
    def __init__(self, cfg: ExperimentConfig) -> None:
        self.nodes = {n: FakeNode(n, i) for i, n in enumerate(cfg.node_names())}
        self.ends = {link.name: (self.nodes[link.a].add_intf(), self.nodes[link.b].add_intf())
                     for link in cfg.links}

    def get(self, name: str) -> FakeNode:
        return self.nodes[name]


def plans(cfg: ExperimentConfig, frame_bytes: int | None = None) -> tuple[dict[str, ex.SwitchPlan], FakeNet]:
    net = FakeNet(cfg)
    return {p.name: p for p in ex._switch_plans(cfg, net, net.ends, frame_bytes)}, net


def port(plan: ex.SwitchPlan, link: str) -> ex.PortPlan:
    (found,) = [p for p in plan.ports if p.link == link]
    return found


def scenario(name: str, edit: Any = None) -> ExperimentConfig:
    path = SCENARIOS / f"{name}.toml"
    if edit is None:
        return load_config(path)
    data = tomllib.loads(path.read_text())
    edit(data)
    return validate(copy.deepcopy(data), base_dir=SCENARIOS, source=path)


def link_name(cfg: ExperimentConfig, a: str, b: str) -> str:
    (found,) = [link.name for link in cfg.links if {link.a, link.b} == {a, b}]
    return found


def test_frame_sizes_are_the_agents_frames():
    assert ex._frame_bytes(1000) == DATA_FRAME
    assert ex._frame_bytes(0) == ACK_FRAME


def test_parking_lot_routes_every_host_from_every_switch():
    cfg = scenario("obp-parking-lot")
    by_name, net = plans(cfg)
    assert [p.name for p in ex._switch_plans(cfg, net, net.ends)] == ["s1", "s2", "s3", "s4"]
    ips = {h.name: f"{h.ip.ip}/32" for h in cfg.hosts}
    for plan in by_name.values():
        sw = net.get(plan.name)
        assert (plan.grpc_addr, plan.thrift_port, plan.device_id) == (sw.grpc_addr, sw.thrift_port, sw.device_id)
        assert sorted(r[0] for r in plan.routes) == sorted(ips.values())
    s2 = {r[0]: r for r in by_name["s2"].routes}
    b1, b2, x2 = (net.ends[link_name(cfg, *ends)] for ends in (("s1", "s2"), ("s2", "s3"), ("x2", "s2")))
    # Towards h9: out of s2's b2 port to the next switch, whose destination MAC it ignores.
    assert s2[ips["h9"]] == (ips["h9"], net.get("s2").port_of(b2[0].name), ex.GATEWAY_MAC, b2[0].MAC())
    # Back towards h0: out of s2's b1 port (the b end of b1).
    assert s2[ips["h0"]] == (ips["h0"], net.get("s2").port_of(b1[1].name), ex.GATEWAY_MAC, b1[1].MAC())
    # To its own host: that host's MAC.
    assert s2[ips["x2"]] == (ips["x2"], net.get("s2").port_of(x2[1].name), net.get("x2").MAC(), x2[1].MAC())


def test_parking_lot_port_capacities_queues_and_frame_sizes():
    """Each switch drives every link it touches. Ports that a flow's data leaves by
    convert their rate with the data frame; ports that carry only ACKs with the ACK
    frame (else ACKs would fill a 10x smaller packet budget)."""
    cfg = scenario("obp-parking-lot")
    by_name, net = plans(cfg)
    assert sorted(p.link for p in by_name["s2"].ports) == sorted(
        link_name(cfg, *e) for e in (("s1", "s2"), ("s2", "s3"), ("x2", "s2")))
    b1, b2, b3 = (link_name(cfg, *e) for e in (("s1", "s2"), ("s2", "s3"), ("s3", "s4")))
    for sw, link, frame in (("s1", b1, DATA_FRAME),     # long and cross1 leave s1 by b1
                            ("s2", b1, ACK_FRAME),      # only ACKs go back to s1
                            ("s2", b2, DATA_FRAME), ("s3", b2, ACK_FRAME),
                            ("s3", b3, DATA_FRAME), ("s4", b3, ACK_FRAME),
                            ("s1", link_name(cfg, "h0", "s1"), ACK_FRAME),
                            ("s4", link_name(cfg, "h9", "s4"), DATA_FRAME),
                            ("s2", link_name(cfg, "x2", "s2"), DATA_FRAME),   # cross1's data to x2
                            ("s1", link_name(cfg, "x1", "s1"), ACK_FRAME)):
        p = port(by_name[sw], link)
        assert p.frame_bytes == frame, (sw, link)
        assert p.port == net.get(sw).port_of(
            net.ends[link][0 if cfg.link(link).a == sw else 1].name)
        assert p.schedule is cfg.link(link).capacity.schedule   # "both" ends apply it
        assert p.af_queue_packets == 0                          # no reservations here
    bottleneck = port(by_name["s1"], b1)
    assert bottleneck.schedule.rate_bps(0.0) == 10e6 and bottleneck.queue_packets == 100
    assert port(by_name["s1"], link_name(cfg, "h0", "s1")).schedule.rate_bps(0.0) == 100e6
    # One frame size for every port when the caller fixes it.
    fixed, _ = plans(cfg, frame_bytes=1500)
    assert {p.frame_bytes for plan in fixed.values() for p in plan.ports} == {1500}


def test_apply_at_limits_the_schedule_to_one_end():
    def one_end(data: dict[str, Any]) -> None:
        for link in data["links"]:
            if link.get("name") == "b2":
                link["apply_at"] = "s3"
                link["loss"] = 0.01
    cfg = scenario("obp-parking-lot", one_end)
    by_name, _ = plans(cfg)
    assert port(by_name["s3"], "b2").schedule is cfg.link("b2").capacity.schedule
    assert port(by_name["s2"], "b2").schedule is None    # s2's egress onto b2: no limit, no stamping
    assert port(by_name["s2"], "b2").loss == 0.01 and port(by_name["s3"], "b2").loss == 0.01
    assert port(by_name["s2"], "b1").schedule is not None and port(by_name["s2"], "b1").loss == 0.0


def test_smoke_capacity_step_is_in_the_plan():
    cfg = scenario("smoke")
    by_name, _ = plans(cfg)
    schedule = port(by_name["s1"], "bottleneck").schedule
    assert (schedule.rate_bps(0.0), schedule.rate_bps(3.9), schedule.rate_bps(4.0)) == (5e6, 5e6, 2e6)


def test_gtcp_reservations_af_threshold_and_meters():
    cfg = scenario("gtcp-reservations")
    by_name, _ = plans(cfg)
    h1s1, s2h2 = link_name(cfg, "h1", "s1"), link_name(cfg, "s2", "h2")
    # Reserved flows leave s1 by the bottleneck: AF drops begin at half its 60-packet queue.
    assert port(by_name["s1"], "bottleneck").af_queue_packets == 30
    assert port(by_name["s2"], "bottleneck").af_queue_packets == 0    # ACKs' way back
    assert port(by_name["s1"], h1s1).af_queue_packets == 0
    assert port(by_name["s2"], s2h2).af_queue_packets == 32          # and s2 towards h2 (64 packets)
    # The meters sit at the edge switch where the reserved traffic enters, only there.
    assert by_name["s2"].reservations == []
    assert by_name["s1"].reservations == [
        Reservation(src="10.0.1.1", dst="10.0.2.1", rate_bps=rate * 1e6, src_port=sport, dst_port=BWN_UDP_PORT)
        for rate, sport in ((4, 40001), (2, 40002), (1, 40003))]


def test_af_threshold_is_at_least_one_packet_and_dst_port_kept():
    def small(data: dict[str, Any]) -> None:
        for link in data["links"]:
            if link.get("name") == "bottleneck":
                link["queue_packets"] = 3
        data["reservations"][0]["dst_port"] = 5001
        data["links"][2]["queue_packets"] = 1
    cfg = scenario("gtcp-reservations", small)
    by_name, _ = plans(cfg)
    assert port(by_name["s1"], "bottleneck").af_queue_packets == 1
    assert port(by_name["s2"], link_name(cfg, "s2", "h2")).af_queue_packets == 1
    assert by_name["s1"].reservations[0].dst_port == 5001


def test_first_switch_and_on_path():
    cfg = scenario("obp-parking-lot")
    assert ex._first_switch(cfg, "h0", "h9") == "s1"
    assert ex._first_switch(cfg, "h9", "h0") == "s4"
    assert ex._first_switch(cfg, "h0", "nowhere") is None
    b2 = cfg.link("b2")
    assert ex._on_path(cfg, "h0", "h9", b2, "s2") and not ex._on_path(cfg, "h0", "h9", b2, "s3")
    assert ex._on_path(cfg, "h9", "h0", b2, "s3") and not ex._on_path(cfg, "x1", "x2", b2, "s2")


def test_parse_scheme():
    assert ex.parse_scheme("obp") == ("obp", [])
    assert ex.parse_scheme("ebn:variant=relative;k=2;") == ("ebn", ["variant=relative", "k=2"])
    with pytest.raises(ValueError) as err:
        ex.parse_scheme("ebn:variant")
    assert str(err.value) == "scheme 'ebn:variant': parameter 'variant' is not key=value"


def test_agent_command_lines(tmp_path):
    """bwn-recv per destination and bwn-send per flow with every option the flow sets."""
    def flows(data: dict[str, Any]) -> None:
        data["experiment"]["receive_window_bytes"] = 65536
        data["flows"] = [
            {"name": "g4", "src": "h1", "dst": "h2", "scheme": "gtcp", "reserved_rate_mbit": 4,
             "src_port": 40001, "bytes": 5000, "params": {"alpha": 0.5}},
            {"name": "late", "src": "h1", "dst": "h2", "start_s": 2.5, "app_rate_mbit": 3},
            {"name": "short", "src": "h1", "dst": "h2", "duration_s": 4},
        ]
    cfg = scenario("gtcp-reservations", flows)
    net = FakeNet(cfg)
    senders, receivers = ex.start_agents(cfg, net, "ebn:variant=relative", tmp_path, duration_s=10.0)
    for agent in senders + receivers:
        agent.proc.wait(5)
    assert [a.name for a in receivers] == ["h2"] and [a.name for a in senders] == ["g4", "late", "short"]
    (recv,) = net.get("h2").popened
    assert recv == [str(ex.VENV_BIN / "bwn-recv"), "--listen", f"10.0.2.1:{BWN_UDP_PORT}",
                    "--summary-json", str(tmp_path / "recv-h2.summary.json"), "--window-bytes", "65536"]
    g4, late, short = net.get("h1").popened
    flows_dir = tmp_path / "flows"
    from bwn import seeding
    assert g4 == [str(ex.VENV_BIN / "bwn-send"), "--algo", "gtcp", "--dst", f"10.0.2.1:{BWN_UDP_PORT}",
                  "--mss", "1000", "--flow-id", str(seeding.flow_id(cfg.seed, 0)),
                  "--log", str(flows_dir / "g4.jsonl"), "--summary-json", str(flows_dir / "g4.summary.json"),
                  "--bytes", "5000", "--reserved-rate-mbit", "4.0", "--bind", "0.0.0.0:40001",
                  "--param", "alpha=0.5"]
    # The flow under test gets the scheme's parameters; a delayed flow starts through bash.
    assert late[:4] == ["bash", "-c", 'sleep 2.500 && exec "$@"', "delayed-start"]
    assert late[5:7] == ["--algo", "ebn"]
    assert late[-6:] == ["--duration", "7.500", "--app-rate-mbit", "3.0", "--param", "variant=relative"]
    assert short[short.index("--duration") + 1] == "4.000"
    assert (tmp_path / "send-g4.log").exists() and (tmp_path / "recv-h2.log").exists()
    assert not any("--no-sack" in cmd or "--log-interval-ms" in cmd for cmd in (g4, late, short))


def test_agent_command_lines_without_sack_and_with_a_log_interval(tmp_path):
    def no_sack(data: dict[str, Any]) -> None:
        data["experiment"]["sack"] = False
        data["flows"] = [{"name": "f", "src": "h1", "dst": "h2"}]
    cfg = scenario("gtcp-reservations", no_sack)
    net = FakeNet(cfg)
    senders, receivers = ex.start_agents(cfg, net, "newreno", tmp_path, duration_s=5.0, log_interval_ms=250)
    for agent in senders + receivers:
        agent.proc.wait(5)
    (cmd,) = net.get("h1").popened
    assert cmd[cmd.index("--log-interval-ms") + 1] == "250"
    assert cmd[-1] == "--no-sack" and cmd[cmd.index("--duration") + 1] == "5.000"


def test_end_sender_interrupts_then_kills():
    """A sender that ignores SIGINT is killed; one that exits on it is left at that."""
    code = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "up\n"
        ex.end_sender(proc, grace_s=0.2)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # (Its own handler: a test runner may start children with SIGINT ignored.)
    code = ("import signal, sys, time; signal.signal(signal.SIGINT, lambda *_: sys.exit(3)); "
            "print('up', flush=True); time.sleep(60)")
    polite = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert polite.stdout.readline() == "up\n"
    ex.end_sender(polite, grace_s=30.0)
    assert polite.returncode == 3     # ended by the first SIGINT, not killed
    ex.end_sender(polite)             # already ended: nothing to do


def test_stop_process_escalates_to_kill():
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "up\n"
    ex.stop_process(proc, signal.SIGTERM, timeout_s=0.3)
    assert proc.returncode == -signal.SIGKILL


class _FakeController:
    def __init__(self, fail: BaseException | None = None, ready: bool = True) -> None:
        self.fail, self.ready_flag = fail, ready
        self.stopped = False

    async def run(self, ready: asyncio.Event) -> None:
        if self.fail is not None:
            raise self.fail
        if self.ready_flag:
            ready.set()
        try:
            await asyncio.sleep(3600)
        finally:
            self.stopped = True

    async def answer(self, value: int) -> int:
        return value * 2

    async def slow(self) -> None:
        await asyncio.sleep(3600)


def test_controller_thread_runs_calls_and_stops():
    ctl = _FakeController()
    thread = ex.ControllerThread(ctl)
    thread.start(timeout_s=10)
    try:
        assert thread.call(ctl.answer(21)) == 42
        with pytest.raises(TimeoutError, match="did not answer within 0 s"):
            thread.call(ctl.slow(), timeout_s=0.2)
    finally:
        thread.stop()
    assert ctl.stopped and thread.error is None
    with pytest.raises(RuntimeError, match="^the controller is not running$"):
        thread.call(ctl.answer(1))


def test_controller_thread_reports_a_failed_start():
    thread = ex.ControllerThread(_FakeController(fail=ValueError("no pipeline")))
    with pytest.raises(RuntimeError, match="^controller failed: no pipeline$"):
        thread.start(timeout_s=10)
    with pytest.raises(RuntimeError, match=r"not running \(it failed: no pipeline\)"):
        thread.call(_FakeController().answer(1))
    thread.stop()


def test_controller_thread_times_out_when_never_ready():
    ctl = _FakeController(ready=False)
    thread = ex.ControllerThread(ctl)
    with pytest.raises(TimeoutError, match="could not configure every switch in time"):
        thread.start(timeout_s=0.3)
    thread.stop()
    assert ctl.stopped


def test_fidelity_json_says_when_the_check_failed():
    lines: list[str] = []

    class Broken:
        def result(self) -> Any:
            raise OSError("telemetry.csv unreadable")

    class Fine:
        def result(self) -> Any:
            class R:
                def summary(self) -> str:
                    return "valid"

                def to_json(self) -> dict[str, Any]:
                    return {"valid": True}
            return R()

    out = ex._fidelity_json(Broken(), lines.append, "obp")
    assert out == {"valid": False, "broken": ["check"],
                   "summary": "INVALID: fidelity check failed: OSError('telemetry.csv unreadable')"}
    assert lines == ["[obp] fidelity check failed: OSError('telemetry.csv unreadable')"]
    assert ex._fidelity_json(Fine(), lines.append, "ebn") == {"valid": True}
    assert lines[-1] == "[ebn] fidelity: valid"
