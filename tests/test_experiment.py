"""The runner's switch plans and agent command lines (bwn/emulation/runner.py), without Mininet.

`_switch_plans` is what the controller programs into every switch: routes, each
egress port's capacity schedule (and where it applies), queue, the frame size that
turns its bit rate into BMv2's packets/s, the Assured Forwarding threshold of ports
that reserved flows leave by, and the reservation meters. A fake Mininet network
stands in for the real one (same port numbering rule: each node's interfaces in
link order)."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import copy
import signal
import subprocess
import sys
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
    import tomli as tomllib  # type: ignore[no-redef]
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from needs import missing

from bwn import paths
from bwn import requirements
from bwn.emulation import agents, controller_thread
from bwn.emulation import network as scenario_net
from bwn.emulation import runner as ex
from bwn.scenario import seeding
from bwn.scenario.config import ConfigError, load_config, validate
from controller.xr_math import RcpConfig, XcpConfig
from bwn.scenario.resolved import ExperimentConfig
from controller.entries import Reservation
from bwn.protocol.wire import BWN_UDP_PORT
from bwn.rundir import RunDir, RunMeta

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

    def popen(self, cmd: list[str], **kw: Any) -> subprocess.Popen:
        """Record the command; run `echo out; echo err >&2` with the given outputs, and
        write the command's --ready-file as a real agent does once it is up."""
        self.popened.append(cmd)
        ready = cmd[cmd.index("--ready-file") + 1] if "--ready-file" in cmd else "/dev/null"
        script = f'echo {self.name}-out; echo {self.name}-err >&2; echo $$ > "$1"'
        return subprocess.Popen(["sh", "-c", script, "fake-agent", ready], **kw)


class FakeNet:
    def __init__(self, cfg: ExperimentConfig) -> None:
        self.nodes = {n: FakeNode(n, i) for i, n in enumerate(cfg.node_names())}
        self.ends = {link.name: (self.nodes[link.a].add_intf(), self.nodes[link.b].add_intf())
                     for link in cfg.links}

    def get(self, name: str) -> FakeNode:
        return self.nodes[name]


def needs_mininet() -> None:
    """The runner's network tests build Mininet objects (with fakes for what needs
    root): without Mininet they skip, or fail under BWN_REQUIRE_P4=1."""
    missing(requirements.mininet_missing(), "runner tests that build Mininet objects")


def plans(cfg: ExperimentConfig, frame_bytes: int | None = None) -> tuple[dict[str, scenario_net.SwitchPlan], FakeNet]:
    net = FakeNet(cfg)
    return {p.name: p for p in scenario_net._switch_plans(cfg, net, net.ends, frame_bytes)}, net


def port(plan: scenario_net.SwitchPlan, link: str) -> scenario_net.PortPlan:
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
    assert agents.frame_bytes(1000) == DATA_FRAME
    assert agents.frame_bytes(0) == ACK_FRAME


def test_parking_lot_routes_every_host_from_every_switch():
    cfg = scenario("obp-parking-lot")
    by_name, net = plans(cfg)
    assert [p.name for p in scenario_net._switch_plans(cfg, net, net.ends)] == ["s1", "s2", "s3", "s4"]
    ips = {h.name: f"{h.ip.ip}/32" for h in cfg.hosts}
    for plan in by_name.values():
        sw = net.get(plan.name)
        assert (plan.grpc_addr, plan.thrift_port, plan.device_id) == (sw.grpc_addr, sw.thrift_port, sw.device_id)
        assert sorted(r[0] for r in plan.routes) == sorted(ips.values())
    s2 = {r[0]: r for r in by_name["s2"].routes}
    b1, b2, x2 = (net.ends[link_name(cfg, *ends)] for ends in (("s1", "s2"), ("s2", "s3"), ("x2", "s2")))
    # Towards h9: out of s2's b2 port to the next switch, whose destination MAC it ignores.
    assert s2[ips["h9"]] == (ips["h9"], net.get("s2").port_of(b2[0].name), scenario_net.GATEWAY_MAC, b2[0].MAC())
    # Back towards h0: out of s2's b1 port (the b end of b1).
    assert s2[ips["h0"]] == (ips["h0"], net.get("s2").port_of(b1[1].name), scenario_net.GATEWAY_MAC, b1[1].MAC())
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


def test_a_links_af_threshold_replaces_half_its_queue_where_reserved_flows_leave():
    def set_threshold(data: dict[str, Any]) -> None:
        for link in data["links"]:
            if link.get("name") == "bottleneck":
                link["af_threshold_packets"] = 10
    cfg = scenario("gtcp-reservations", set_threshold)
    by_name, _ = plans(cfg)
    assert port(by_name["s1"], "bottleneck").af_queue_packets == 10
    assert port(by_name["s2"], "bottleneck").af_queue_packets == 0    # no reserved flow leaves s2 there
    assert port(by_name["s2"], link_name(cfg, "s2", "h2")).af_queue_packets == 32   # the default elsewhere


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


def test_a_red_ecn_link_gets_red_at_both_ends_with_the_automatic_parameters():
    """aqm = "red-ecn": RED at each switch end's egress port of the link, with NS-2's
    automatic setting for its rate at the start, in the agents' data frames
    (C = 10 Mb/s / (8 x 1102 bytes) = 1134 packets/s: min_th = max(5, 0.005 C / 2) = 5,
    max_th = 3 min_th)."""
    from controller import aqm

    def red(data: dict[str, Any]) -> None:
        for link in data["links"]:
            if link.get("name") == "bottleneck":
                link["aqm"] = "red-ecn"
    cfg = scenario("gtcp-reservations", red)
    by_name, _ = plans(cfg, DATA_FRAME)
    expected = aqm.RedParams.automatic(10e6, DATA_FRAME)
    assert (expected.min_th, expected.max_th) == (5.0, 15.0)
    assert expected.weight_log2 == 10                     # w_q = 1 - exp(-1 / C) = 2^-10.1
    assert port(by_name["s1"], "bottleneck").red == expected
    assert port(by_name["s2"], "bottleneck").red == expected
    assert port(by_name["s1"], link_name(cfg, "h1", "s1")).red is None
    assert scenario_net.priority_queues(cfg, "s1") == 1


def test_a_guaranteed_link_gives_its_reserved_port_the_priority_queue_and_no_af_threshold():
    def guaranteed(data: dict[str, Any]) -> None:
        for link in data["links"]:
            if link.get("name") == "bottleneck":
                link["service"] = "guaranteed"
    cfg = scenario("gtcp-reservations", guaranteed)
    by_name, _ = plans(cfg)
    out = port(by_name["s1"], "bottleneck")
    assert (out.guaranteed, out.af_queue_packets, out.reserved_bps) == (True, 0, 7e6)   # 4 + 2 + 1 Mb/s
    back = port(by_name["s2"], "bottleneck")                  # no reserved flow leaves s2 there
    assert (back.guaranteed, back.reserved_bps) == (False, 0.0)
    assert port(by_name["s2"], link_name(cfg, "s2", "h2")).af_queue_packets == 32   # other links: AF
    assert [scenario_net.priority_queues(cfg, s) for s in ("s1", "s2")] == [2, 2]
    assert scenario_net.priority_queues(scenario("gtcp-reservations"), "s1") == 1


def test_ecn_senders_get_the_option(tmp_path):
    def ecn(data: dict[str, Any]) -> None:
        data["experiment"]["ecn"] = True
        data["flows"] = [{"name": "f", "src": "h1", "dst": "h2"}]
    cfg = scenario("gtcp-reservations", ecn)
    net = FakeNet(cfg)
    senders, receivers = agents.start_agents(cfg, net, "reno", tmp_path, duration_s=5.0)
    for agent in senders + receivers:
        agent.proc.wait(5)
    (cmd,) = net.get("h1").popened
    assert "--ecn" in cmd


def test_first_switch_and_on_path():
    cfg = scenario("obp-parking-lot")
    assert scenario_net._first_switch(cfg, "h0", "h9") == "s1"
    assert scenario_net._first_switch(cfg, "h9", "h0") == "s4"
    assert scenario_net._first_switch(cfg, "h0", "nowhere") is None
    b2 = cfg.link("b2")
    assert scenario_net._on_path(cfg, "h0", "h9", b2, "s2") and not scenario_net._on_path(cfg, "h0", "h9", b2, "s3")
    assert scenario_net._on_path(cfg, "h9", "h0", b2, "s3") and not scenario_net._on_path(cfg, "x1", "x2", b2, "s2")


def test_parse_scheme():
    assert agents.parse_scheme("obp") == ("obp", [])
    assert agents.parse_scheme("ebn:variant=relative:k=2") == ("ebn", ["variant=relative", "k=2"])
    # the grids' run keys and older run folders joined parameters with ";"
    assert agents.parse_scheme("ebn:variant=relative;k=2;") == ("ebn", ["variant=relative", "k=2"])
    with pytest.raises(ValueError) as err:
        agents.parse_scheme("ebn:variant")
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
    senders, receivers = agents.start_agents(cfg, net, "ebn:variant=relative", tmp_path, duration_s=10.0)
    for agent in senders + receivers:
        agent.proc.wait(5)
    assert [a.name for a in receivers] == ["h2"] and [a.name for a in senders] == ["g4", "late", "short"]
    (recv,) = net.get("h2").popened
    assert recv == [str(agents.VENV_BIN / "bwn-recv"), "--listen", f"10.0.2.1:{BWN_UDP_PORT}",
                    "--summary-json", str(tmp_path / "recv-h2.summary.json"),
                    "--ready-file", str(tmp_path / "ready" / "recv-h2"), "--window-bytes", "65536"]
    g4, late, short = net.get("h1").popened
    flows_dir = tmp_path / "flows"
    assert g4 == [str(agents.VENV_BIN / "bwn-send"), "--algo", "gtcp", "--dst", f"10.0.2.1:{BWN_UDP_PORT}",
                  "--mss", "1000", "--flow-id", str(seeding.flow_id(cfg.seed, 0)),
                  "--log", str(flows_dir / "g4.jsonl"), "--summary-json", str(flows_dir / "g4.summary.json"),
                  "--ready-file", str(tmp_path / "ready" / "send-g4"), "--wait-go", "--start-delay-s", "0.000",
                  "--bytes", "5000", "--reserved-rate-mbit", "4.0", "--bind", "0.0.0.0:40001",
                  "--param", "alpha=0.5"]
    # The flow under test gets the scheme's parameters; a delayed flow waits its start_s
    # once released (every sender is held until release_senders).
    assert late[1:3] == ["--algo", "ebn"]
    assert late[late.index("--start-delay-s") + 1] == "2.500" and "--wait-go" in late
    assert late[-6:] == ["--duration", "7.500", "--app-rate-mbit", "3.0", "--param", "variant=relative"]
    assert short[short.index("--duration") + 1] == "4.000"
    assert (tmp_path / "send-g4.log").exists() and (tmp_path / "recv-h2.log").exists()
    assert not (tmp_path / "ready").exists()           # the handshake leaves nothing behind
    assert not any("--no-sack" in cmd or "--log-interval-ms" in cmd or "--ecn" in cmd for cmd in (g4, late, short))


def test_agent_command_lines_without_sack_and_with_a_log_interval(tmp_path):
    def no_sack(data: dict[str, Any]) -> None:
        data["experiment"]["sack"] = False
        data["flows"] = [{"name": "f", "src": "h1", "dst": "h2"}]
    cfg = scenario("gtcp-reservations", no_sack)
    net = FakeNet(cfg)
    senders, receivers = agents.start_agents(cfg, net, "newreno", tmp_path, duration_s=5.0, log_interval_ms=250)
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
        agents.end_sender(proc, grace_s=0.2)
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
    agents.end_sender(polite, grace_s=30.0)
    assert polite.returncode == 3     # ended by the first SIGINT, not killed
    agents.end_sender(polite)             # already ended: nothing to do


def test_stop_process_escalates_to_kill():
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "up\n"
    agents.stop_process(proc, signal.SIGTERM, timeout_s=0.3)
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
    thread = controller_thread.ControllerThread(ctl)
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
    thread = controller_thread.ControllerThread(_FakeController(fail=ValueError("no pipeline")))
    with pytest.raises(RuntimeError, match="^controller failed: no pipeline$"):
        thread.start(timeout_s=10)
    with pytest.raises(RuntimeError, match=r"not running \(it failed: no pipeline\)"):
        thread.call(_FakeController().answer(1))
    thread.stop()


def test_controller_thread_times_out_when_never_ready():
    ctl = _FakeController(ready=False)
    thread = controller_thread.ControllerThread(ctl)
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


# -- the network's start and teardown, with a fake Mininet ------------------------------

class TeardownNode(FakeNode):
    def __init__(self, name: str, index: int, log: list, fail: set) -> None:
        super().__init__(name, index)
        self.log, self.fail = log, fail
        self.commands: list[str] = []
        self.link_config = None

    def _step(self, what: str) -> None:
        self.log.append((what, self.name))
        if (what, self.name) in self.fail:
            raise RuntimeError(f"{what} {self.name} failed")

    def cmd(self, line: str) -> str:
        self.commands.append(line)
        return ""

    def defaultIntf(self) -> FakeIntf:
        return FakeIntf(f"{self.name}-eth0", self)

    def start_linkem(self, args: list[str], log: Path, stats: Path) -> None:
        self.log.append(("start_linkem", self.name, tuple(args), log.name, stats.name))

    def wait_linkem_ready(self) -> None:
        self._step("wait_linkem_ready")

    def stop_linkem(self) -> None:
        self._step("stop_linkem")

    def stop_process(self) -> None:
        self._step("stop_process")

    def terminate(self) -> None:
        self._step("terminate")

    def intfList(self) -> list:
        return []


class TeardownNet:
    def __init__(self, cfg: ExperimentConfig, log: list, fail: set) -> None:
        self.log, self.fail = log, fail
        self.nodes = {n: TeardownNode(n, i, log, fail) for i, n in enumerate(cfg.node_names())}
        self.hosts = [self.nodes[h.name] for h in cfg.hosts]
        self.switches = [self.nodes[s.name] for s in cfg.switches]

    def get(self, name: str) -> TeardownNode:
        return self.nodes[name]

    def values(self) -> list:
        return list(self.nodes.values())

    def start(self) -> None:
        self.log.append(("net.start",))

    def stop(self) -> None:
        self.log.append(("net.stop",))
        if ("net.stop", "") in self.fail:
            raise RuntimeError("mininet teardown broke off")


def network(monkeypatch, tmp_path, fail: set = frozenset(), linkem_args=None, frame_bytes=None, seed=11,
            target="bmv2"):
    """A ScenarioNetwork of the smoke scenario on the fake net (its delayed links as one
    emulator node), a fake controller and thread (the eBPF one too, for `target`
    "ebpf"); returns it and the event log."""
    from topologies import nodes
    log: list = []
    cfg = scenario("smoke", lambda d: (d.update(dataplane={"window_us": 8192, "flow_window_us": 65536}),
                                       d["experiment"].update(seed=seed, queue_lookahead=True)))
    net = TeardownNet(cfg, log, set(fail))
    em = TeardownNode("em1", 99, log, set(fail))
    em.link_config = cfg.link("bottleneck")
    built = scenario_net.BuiltNetwork(net=net, plans=["plan"], linkem_nodes=[em])

    class Controller:
        def __init__(self, *args, **kw):
            log.append(("controller", args, tuple(sorted(kw.items()))))

    class Thread:
        def __init__(self, controller):
            self.controller = controller

        def start(self):
            log.append(("thread.start",))
            if ("thread.start", "") in fail:
                raise RuntimeError("controller failed: no pipeline")

        def stop(self):
            log.append(("thread.stop",))

    monkeypatch.setattr(scenario_net, "pipeline_files", lambda: (Path("p4info"), Path("blob")))
    def build(c, log_dir, f, target_="bmv2"):
        assert (c, log_dir, f, target_) == (cfg, tmp_path / "switch-logs", frame_bytes, target)
        return built
    monkeypatch.setattr(scenario_net, "build_network", build)
    monkeypatch.setattr(scenario_net, "BwnController", Controller)
    if target == "ebpf":
        from controller import ebpf

        class EbpfController(Controller):
            def __init__(self, *args, **kw):
                log.append(("ebpf",))
                super().__init__(*args, **kw)
        monkeypatch.setattr(ebpf, "EbpfController", EbpfController)
        monkeypatch.setattr(scenario_net, "ebpf_object", lambda: Path("bwn.o"))
    monkeypatch.setattr(scenario_net, "ControllerThread", Thread)
    monkeypatch.setattr(nodes, "interrupt_command", lambda node: log.append(("interrupt", node.name)))
    monkeypatch.setattr(nodes, "node_namespaces", lambda hosts: {i: h.name for i, h in enumerate(hosts)})
    monkeypatch.setattr(nodes, "end_processes_in", lambda ns: [f"pid 7 in {sorted(ns.values())}"])
    lines: list[str] = []
    return scenario_net.ScenarioNetwork(cfg, tmp_path, lines.append, label="[t] ", frame_bytes=frame_bytes,
                              linkem_args=linkem_args, target=target), log, lines, cfg


def test_configure_hosts_routes_and_static_arp(monkeypatch, tmp_path):
    needs_mininet()
    sn, _, _, cfg = network(monkeypatch, tmp_path)
    scenario_net.configure_hosts(cfg, sn.net)
    assert sn.net.get("h1").commands == [
        "ip route replace default dev h1-eth0",
        f"ip neigh replace 10.0.2.1 lladdr {scenario_net.GATEWAY_MAC} dev h1-eth0 nud permanent"]
    assert sn.net.get("h2").commands[1] == f"ip neigh replace 10.0.1.1 lladdr {scenario_net.GATEWAY_MAC} dev h2-eth0 nud permanent"
    assert sn.net.get("s1").commands == []


def test_start_brings_up_net_emulators_and_controller_in_order(monkeypatch, tmp_path):
    needs_mininet()
    sn, log, lines, cfg = network(monkeypatch, tmp_path, linkem_args={"bottleneck": ["--jitter-ms", "1"]})
    sn.start()
    seed_args = ("--seed", str(seeding.linkem_seed(11, "em1")))
    window = ent_window = scenario_net.ent.WindowConfig(8192, 65536, agents.frame_bytes(1000))
    assert log == [
        ("net.start",),
        ("start_linkem", "em1", ("--delay-ms", "10", "--rt-priority", "10", *seed_args, "--jitter-ms", "1"), "em1-linkem.log",
         "em1-linkem.json"),
        ("controller", (["plan"], Path("p4info"), Path("blob"), tmp_path, window),
         (("queue_lookahead", True), ("telemetry_interval_s", cfg.telemetry.interval_s))),
        ("thread.start",),
        ("wait_linkem_ready", "em1"),
    ]
    assert ent_window.queue_unit_bytes == 1102
    assert lines == ["[t] starting 1 BMv2 switches and 2 hosts"]
    assert sn.net.get("h1").commands[0] == "ip route replace default dev h1-eth0"


def test_an_ebpf_network_runs_the_ebpf_controller_without_a_bmv2_pipeline(monkeypatch, tmp_path):
    sn, log, lines, cfg = network(monkeypatch, tmp_path, target="ebpf")
    sn.start()
    window = scenario_net.ent.WindowConfig(8192, 65536, agents.frame_bytes(1000))
    assert ("ebpf",) in log
    assert ("controller", (["plan"], None, None, tmp_path, window),
            (("queue_lookahead", True), ("telemetry_interval_s", cfg.telemetry.interval_s))) in log
    assert lines == ["[t] starting 1 eBPF (NIKSS) switches and 2 hosts"]


def test_a_network_refuses_an_unknown_target_and_a_missing_ebpf_program(monkeypatch, tmp_path):
    cfg = scenario("smoke")
    with pytest.raises(ValueError, match="'tofino' .*bmv2, ebpf"):
        scenario_net.ScenarioNetwork(cfg, tmp_path, target="tofino")
    monkeypatch.setattr(scenario_net, "ebpf_object", lambda: paths.ebpf_object(tmp_path))
    with pytest.raises(FileNotFoundError, match="make build-ebpf"):
        scenario_net.ScenarioNetwork(cfg, tmp_path, target="ebpf")
    red = scenario("smoke", lambda d: [link.update(aqm="red-ecn") for link in d["links"]
                                       if link.get("name") == "bottleneck"])
    with pytest.raises(ValueError, match='link bottleneck: aqm = "red-ecn".*--target bmv2'):
        scenario_net.ScenarioNetwork(red, tmp_path, target="ebpf")


def test_queue_unit_is_the_fixed_frame_size_when_given(monkeypatch, tmp_path):
    needs_mininet()
    sn, log, _, _ = network(monkeypatch, tmp_path, frame_bytes=1500)
    sn.start()
    (ctl,) = [e for e in log if e[0] == "controller"]
    assert ctl[1][4].queue_unit_bytes == 1500


def test_stop_tears_down_in_order_once(monkeypatch, tmp_path):
    needs_mininet()
    sn, log, lines, _ = network(monkeypatch, tmp_path)
    sn.start()
    log.clear()
    sn.stop()
    assert log == [("interrupt", "s1"), ("interrupt", "h1"), ("interrupt", "h2"), ("stop_linkem", "em1"),
                   ("thread.stop",), ("net.stop",)]
    assert lines[-1] == "[t] ended pid 7 in ['h1', 'h2']"
    log.clear()
    sn.stop()                  # safe to call twice
    assert log == []


def test_a_failed_teardown_step_ends_everything_directly_then_raises(monkeypatch, tmp_path):
    needs_mininet()
    sn, log, lines, _ = network(monkeypatch, tmp_path, fail={("stop_linkem", "em1"), ("terminate", "h1")})
    sn.start()
    log.clear()
    with pytest.raises(RuntimeError, match="^stop_linkem em1 failed$"):   # the first failure
        sn.stop()
    assert log == [("interrupt", "s1"), ("interrupt", "h1"), ("interrupt", "h2"), ("stop_linkem", "em1"),
                   ("thread.stop",), ("net.stop",), ("stop_process", "s1"),
                   ("terminate", "h1"), ("terminate", "h2"), ("terminate", "s1")]
    assert lines[-1] == "[t] ended pid 7 in ['h1', 'h2']"


def test_a_failed_start_is_torn_down(monkeypatch, tmp_path):
    needs_mininet()
    sn, log, _, _ = network(monkeypatch, tmp_path, fail={("thread.start", "")})
    with pytest.raises(RuntimeError, match="controller failed"):
        with sn:
            raise AssertionError("not reached")
    assert log[-1] == ("net.stop",) and ("stop_linkem", "em1") in log
    sn2, log2, _, _ = network(monkeypatch, tmp_path)
    with sn2 as entered:
        assert entered is sn2 and ("net.start",) in log2
    assert log2[-1] == ("net.stop",)


# -- one scheme's run (run.json), with a fake network, agents and monitor ------------------

def fake_run(monkeypatch, tmp_path, *, summaries=("main",), interrupt=False, pcap=False,
             monitor_stop_fails=False, sender_code="", controller_error=None, now_s=12.0, edit=None,
             write_logs=True, linkem=True, receiver_alive=False):
    from bwn.emulation import capture
    log: list = []
    seen: dict[str, Any] = {}         # what each collaborator was given
    cfg = scenario("smoke", edit)

    class Net:
        pass

    class Network:
        def __init__(self, cfg_, out_dir, progress, label="", target="bmv2"):
            log.append(("network", label))
            seen["network"] = (cfg_, out_dir, progress)
            seen["target"] = target
            self.log_dir = out_dir / "switch-logs"
            if write_logs:
                self.log_dir.mkdir(parents=True)
            em0 = SimpleNamespace(name="em0", link_config=cfg_.links[0], linkem_proc=None)
            self.built = scenario_net.BuiltNetwork(net=Net(), plans=[], linkem_nodes=[em0] if linkem else [],
                                         ends={"e": 1})
            seen["built"] = self.built
            self.net = self.built.net
            class Controller:
                t0 = 1000.0

                def now_s(self) -> float:
                    return now_s

                @property
                def schedule_origin_s(self) -> float:
                    raise AssertionError("read only in the controller's own loop")

                @schedule_origin_s.setter
                def schedule_origin_s(self, t_s: float) -> None:
                    log.append(("schedule_origin", t_s))
            self.controller = Controller()
            self.controller_thread = type("T", (), {"error": controller_error})()

        def start(self):
            log.append(("start",))

        def stop_linkems(self):
            log.append(("stop_linkems",))

        def stop(self):
            log.append(("stop",))

    class Monitor:
        @classmethod
        def for_network(cls, out_dir, built, interval_s):
            log.append(("monitor", interval_s))
            seen["monitor"] = (out_dir, built, interval_s)
            return cls()

        def start(self):
            log.append(("monitor.start", self.time_origin_s))

        def stop(self):
            log.append(("monitor.stop",))
            if monitor_stop_fails:
                raise OSError("sampler gone")

        def result(self):
            class R:
                def summary(self):
                    return "valid"

                def to_json(self):
                    return {"valid": True}
            return R()

    def start_agents(cfg_, net, scheme, out_dir, duration_s):
        log.append(("agents", scheme, duration_s))
        seen["agents"] = (cfg_, net, scheme, out_dir, duration_s)
        if interrupt:
            raise KeyboardInterrupt
        for name in summaries:
            (out_dir / "flows").mkdir(parents=True, exist_ok=True)
            RunDir(out_dir).flow_summary(name).write_text("{}")
        procs = [subprocess.Popen([sys.executable, "-c", sender_code + "; print('up', flush=True); time.sleep(120)"]
                                  if sender_code else ["true"], stdout=subprocess.PIPE, text=True),
                 subprocess.Popen(["sleep", "60"] if receiver_alive else ["true"])]
        if sender_code:
            assert procs[0].stdout.readline() == "up\n"      # its signal handler is in place
        else:
            procs[0].wait()
        if not receiver_alive:
            procs[1].wait()
        return [agents.Agent("main", procs[0], out_dir / "s.log")], [agents.Agent("h2", procs[1], out_dir / "r.log")]

    class Captures:
        points = [type("P", (), {"link": "bottleneck"})()]

    monkeypatch.setattr(ex, "ScenarioNetwork", Network)
    monkeypatch.setattr(ex, "start_agents", start_agents)
    monkeypatch.setattr(ex, "Monitor", Monitor)
    monkeypatch.setattr(ex, "netem_available", lambda: False)
    monkeypatch.setattr(capture, "start_for_run", lambda c, ends, out, d: log.append(("capture", ends))
                        or seen.setdefault("capture", (c, ends, out, d)) and Captures())
    monkeypatch.setattr(capture, "finish_for_run", lambda caps, out: log.append(("capture.finish",))
                        or seen.setdefault("capture.finish", (caps, out))
                        and {"captures": {"bottleneck": {"file": "x.pcap"}}, "capture_snap_bytes": 198,
                             "capture_stats": {"bottleneck": {"captured": 5}}})
    monkeypatch.setattr(ex, "process_cpu_s", lambda pid: seen.setdefault("cpu_of", []).append(pid) or 0.12345)
    monkeypatch.setattr(ex, "start_link_schedules", lambda nodes, group=None: seen.setdefault("schedules_of", nodes) and ["bl"])
    lines: list[str] = []
    out = tmp_path / "grid" / "ebn"   # its parent does not exist yet either
    def call(duration_s=6.0, target="bmv2"):
        return ex._run_scheme_locked(cfg, "ebn", out, duration_s, lines.append, pcap=pcap, target=target)
    call.seen = seen
    return call, log, lines, out, cfg


def test_a_run_writes_run_json_and_drops_the_switch_logs(monkeypatch, tmp_path):
    call, log, lines, out, cfg = fake_run(monkeypatch, tmp_path, pcap=True)
    meta = call()
    saved = json.loads(RunDir(out).run_json.read_text())
    assert RunMeta.from_json(saved) == meta
    assert saved["ok"] is True and saved["scheme"] == "ebn" and saved["duration_s"] == 6.0
    assert saved["target"] == "bmv2"
    assert saved["delay_emulator"] == "bwn-link" and saved["netem_available"] is False
    assert saved["flow_starts_s"] == {"main": 12.0}                # the controller's clock at release
    assert saved["sender_exit_codes"] == {"main": 0} and saved["flows_without_summary"] == []
    assert saved["fidelity"] == {"valid": True} and saved["captures"] == {"bottleneck": {"file": "x.pcap"}}
    assert saved["capture_snap_bytes"] == 198 and saved["capture_stats"] == {"bottleneck": {"captured": 5}}
    assert saved["flow_ids"] == {"main": seeding.flow_id(cfg.seed, 0)}
    assert saved["mss_bytes"] == 1000 and saved["frame_bytes"] == DATA_FRAME
    assert abs(saved["clock_offset_s"] - (time.time() - 12.0)) < 5
    assert not (out / "switch-logs").exists()
    # The agents are up (and the senders held) before the measurement starts.
    assert [e[0] for e in log] == ["network", "start", "capture", "agents", "monitor", "monitor.start", "schedule_origin",
                                   "monitor.stop", "stop_linkems", "capture.finish", "stop"]
    assert ("monitor.start", 1000.0) in log and ("network", "[ebn] ") in log
    assert ("schedule_origin", 12.0) in log            # the links' schedules start with the flows
    assert lines[:2] == ["[ebn] switches configured; running 1 flows for 6 s", "[ebn] capturing bottleneck"]
    assert lines[-1] == "[ebn] fidelity: valid"


def test_a_flow_without_summary_fails_the_run_and_keeps_the_logs(monkeypatch, tmp_path):
    call, log, lines, out, _ = fake_run(monkeypatch, tmp_path, summaries=(), monitor_stop_fails=True)
    meta = call()
    assert meta.flows_without_summary == ["main"]
    saved = json.loads(RunDir(out).run_json.read_text())
    assert saved["ok"] is False and (out / "switch-logs").is_dir()
    assert f"[ebn] something failed: switch logs kept in {out / 'switch-logs'}" == lines[-1]
    assert "[ebn] fidelity sampler: OSError('sampler gone')" in lines
    assert "capture" not in [e[0] for e in log]


def test_an_interrupted_run_is_torn_down_and_says_so(monkeypatch, tmp_path):
    call, log, lines, out, _ = fake_run(monkeypatch, tmp_path, interrupt=True)
    with pytest.raises(KeyboardInterrupt):
        call()
    assert log[-1] == ("stop",) and ("stop_linkems",) in log
    saved = json.loads(RunDir(out).run_json.read_text())
    assert saved["ok"] is False
    # Interrupted while the agents started: nothing was measured, so no verdict is made up.
    assert "monitor.start" not in [e[0] for e in log] and saved["fidelity"] is None
    assert lines[-1] == f"[ebn] interrupted: switch logs kept in {out / 'switch-logs'}"


def test_a_sender_still_running_at_the_deadline_is_ended(monkeypatch, tmp_path):
    """The runner waits for the senders until the duration + 3 s, then ends them
    (SIGINT first) and records their exit codes."""
    code = "import signal, sys, time; signal.signal(signal.SIGINT, lambda *_: sys.exit(3))"
    call, _, _, out, _ = fake_run(monkeypatch, tmp_path, sender_code=code)
    started = time.monotonic()
    meta = call(duration_s=0.5)
    assert time.monotonic() - started >= 3.5
    assert meta.sender_exit_codes == {"main": 3} and meta.ok is True


def test_a_controller_failure_fails_the_run(monkeypatch, tmp_path):
    code = "import time"
    call, log, lines, out, _ = fake_run(monkeypatch, tmp_path, sender_code=code,
                                        controller_error=ValueError("switch s1 gone"))
    with pytest.raises(RuntimeError, match="^controller failed: switch s1 gone$"):
        call()
    assert json.loads(RunDir(out).run_json.read_text())["ok"] is False
    assert lines[-1] == f"[ebn] something failed: switch logs kept in {out / 'switch-logs'}"
    assert log[-1] == ("stop",)


def test_flow_starts_are_on_the_controllers_clock(monkeypatch, tmp_path):
    def later(data):
        data["flows"][0]["start_s"] = 1.5
    call, _, _, _, _ = fake_run(monkeypatch, tmp_path, now_s=12.0004, edit=later)
    assert call().flow_starts_s == {"main": 13.5}     # released at 12.0004, + 1.5, to the ms


def test_a_run_hands_each_part_what_it_needs_and_records_it(monkeypatch, tmp_path):
    """What run.json says a run was (its seed, the emulator, the look-ahead, the links
    whose schedules bwn-link started, the receivers' CPU), and that the network, agents,
    sampler and captures get this run's scenario, folder and duration."""
    def seeded(data):
        data["experiment"].update(seed=42, queue_lookahead=True)
    call, log, lines, out, cfg = fake_run(monkeypatch, tmp_path, pcap=True, edit=seeded, receiver_alive=True)
    meta = call(duration_s=6.0, target="ebpf")
    seen = call.seen
    assert seen["network"] == (cfg, out, lines.append) and seen["target"] == "ebpf"
    built = seen["built"]
    assert seen["agents"] == (cfg, built.net, "ebn", out, 6.0)
    assert seen["monitor"] == (out, built, cfg.telemetry.interval_s)
    assert seen["capture"] == (cfg, built.ends, out, 6.0)
    assert seen["capture.finish"][1] == out and seen["capture.finish"][0].points[0].link == "bottleneck"
    assert seen["schedules_of"] is built.linkem_nodes
    assert RunMeta.load(RunDir(out).run_json) == meta
    saved = json.loads(RunDir(out).run_json.read_text())
    assert saved["seed"] == 42 and saved["queue_lookahead"] is True and saved["target"] == "ebpf"
    assert saved["flow_ids"] == {"main": seeding.flow_id(42, 0)} != {"main": seeding.flow_id(None, 0)}
    assert saved["linkem_rt_priority"] == cfg.linkem_rt_priority == 10
    assert saved["link_schedules_started"] == ["bl"]
    # the receiver still running at the end: its CPU, in seconds to the ms
    assert saved["receiver_cpu_s"] == {"h2": 0.123}
    assert len(seen["cpu_of"]) == 1 and seen["cpu_of"][0] > 0


def test_a_run_without_emulators_or_captures_says_so(monkeypatch, tmp_path):
    call, log, _, out, _ = fake_run(monkeypatch, tmp_path, linkem=False)
    out.mkdir(parents=True)           # a folder that exists already is used as it is
    saved = call()
    assert saved.delay_emulator == "none" and saved.linkem_rt_priority is None
    assert "capture.finish" not in [e[0] for e in log] and saved.captures == {}
    assert saved.capture_snap_bytes is None and saved.capture_stats == {}
    # the receiver had ended: no CPU figure is made up for it
    assert saved.receiver_cpu_s == {} and "cpu_of" not in call.seen


def test_run_scheme_holds_the_experiment_lock_and_passes_everything_on(monkeypatch, tmp_path):
    import contextlib
    got: dict[str, Any] = {}

    @contextlib.contextmanager
    def lock(progress):
        got["lock"] = progress
        yield

    def locked(*args):
        got["run"] = args
        return {"ok": True}
    monkeypatch.setattr(ex, "experiment_lock", lock)
    monkeypatch.setattr(ex, "_run_scheme_locked", locked)
    cfg = scenario("smoke")
    lines: list[str] = []
    assert ex.run_scheme(cfg, "newreno", tmp_path, 7.5, lines.append, pcap=True) == {"ok": True}
    assert got == {"lock": lines.append, "run": (cfg, "newreno", tmp_path, 7.5, lines.append, True, "bmv2")}
    ex.run_scheme(cfg, "ebn", tmp_path, 3.0, lines.append)
    assert got["run"][-2] is False        # no capture unless asked
    ex.run_scheme(cfg, "ebn", tmp_path, 3.0, lines.append, target="ebpf")
    assert got["run"][-1] == "ebpf"       # the switches the user asked for
    with pytest.raises(ValueError, match="no XCP router"):
        ex.run_scheme(cfg, "xcp", tmp_path, 3.0, lines.append, target="ebpf")


def test_delete_root_interfaces_deletes_only_those_still_there(monkeypatch):
    calls: list[list[str]] = []

    def run(cmd, capture_output=False):
        calls.append(cmd)
        exists = cmd[:3] == ["ip", "link", "show"] and cmd[3] == "s1-eth1"
        return subprocess.CompletedProcess(cmd, 0 if exists else 1)

    monkeypatch.setattr(scenario_net.subprocess, "run", run)

    class Sw:
        def intfList(self):
            return [FakeIntf("lo", None), FakeIntf("s1-eth1", None), FakeIntf("s1-eth2", None)]

    scenario_net._delete_root_interfaces(type("Net", (), {"switches": [Sw()]})())
    assert calls == [["ip", "link", "show", "s1-eth1"], ["ip", "link", "del", "s1-eth1"],
                     ["ip", "link", "show", "s1-eth2"]]


def test_build_network_wires_nodes_ports_and_emulators(monkeypatch, tmp_path):
    """Mininet's calls for a scenario (not started): a switch per [[switches]] with its
    ports and ids, a host per [[hosts]], an emulator node in the middle of each delayed
    link, and the plans computed from the result."""
    needs_mininet()
    import mininet.link
    import mininet.net
    from topologies import nodes
    calls: list[tuple] = []

    class Node(FakeNode):
        pass

    class Link:
        def __init__(self, a, b, port1, port2):
            self.intf1, self.intf2 = a.add_intf(), b.add_intf()
            calls.append(("link", a.name, b.name, port1, port2))

    class Mininet:
        def __init__(self, **kw):
            calls.append(("mininet", tuple(sorted(kw.items()))))
            self.nodes: dict[str, Node] = {}

        def _add(self, name, cls, **kw):
            calls.append((cls.__name__, name, tuple(sorted(kw.items()))))
            self.nodes[name] = Node(name, len(self.nodes))
            return self.nodes[name]

        def addSwitch(self, name, cls, **kw):
            return self._add(name, cls, **kw)

        def addHost(self, name, cls, **kw):
            return self._add(name, cls, **kw)

        def addLink(self, a, b, port1=None, port2=None):
            return Link(a, b, port1, port2)

        def get(self, name):
            return self.nodes[name]

    monkeypatch.setattr(mininet.net, "Mininet", Mininet)

    def edit(data):
        data["switches"][0].update(grpc_port=50999, device_id=7)
        data["links"][1]["a_port"] = 5
    cfg = scenario("smoke", edit)
    built = scenario_net.build_network(cfg, tmp_path / "logs")
    assert calls[0] == ("mininet", (("autoSetMacs", False), ("build", False), ("controller", None),
                                    ("link", mininet.link.Link), ("topo", None), ("waitConnected", False)))
    assert calls[1] == ("Bmv2MininetSwitch", "s1", (("device_id", 7), ("dpid", "0000000000000001"),
                                                    ("grpc_port", 50999), ("log_dir", str(tmp_path / "logs")), ("priority_queues", 1),
                                                    ("thrift_port", scenario_net.THRIFT_PORT_BASE)))
    assert calls[2:4] == [("BwnHost", "h1", (("ip", "10.0.1.1/24"),)), ("BwnHost", "h2", (("ip", "10.0.2.1/24"),))]
    # Both links have a delay: each gets its emulator node, a = h1 side first.
    assert calls[4:] == [("LinkemNode", "em0", (("ip", None),)), ("link", "h1", "em0", None, None),
                         ("link", "em0", "s1", None, None),
                         ("LinkemNode", "em1", (("ip", None),)), ("link", "s1", "em1", 5, None),
                         ("link", "em1", "h2", None, None)]
    assert [em.name for em in built.linkem_nodes] == ["em0", "em1"]
    assert built.linkem_nodes[1].link_config is cfg.link("bottleneck")
    a, b = built.ends["bottleneck"]
    assert (a.node.name, b.node.name) == ("s1", "h2")      # the link's real ends, not the emulator
    assert [p.name for p in built.plans] == ["s1"]
    assert built.net.get("s1") is a.node


def _fake_mininet(monkeypatch) -> list[tuple]:
    """Replace Mininet by a recorder; returns the list it appends switches and links to."""
    import mininet.net
    links: list[tuple] = []

    class Mininet:
        def __init__(self, **kw):
            self.nodes = {}

        def addSwitch(self, name, cls, **kw):
            self.nodes[name] = FakeNode(name, len(self.nodes))
            links.append(("switch", name, kw["grpc_port"], kw["thrift_port"], kw["dpid"]))
            return self.nodes[name]

        def addHost(self, name, cls, **kw):
            self.nodes[name] = FakeNode(name, len(self.nodes))
            return self.nodes[name]

        def addLink(self, a, b, port1=None, port2=None):
            links.append((a.name, b.name, port1, port2))
            return type("L", (), {"intf1": a.add_intf(), "intf2": b.add_intf()})()

        def get(self, name):
            return self.nodes[name]

    monkeypatch.setattr(mininet.net, "Mininet", Mininet)
    return links


def test_build_network_without_delay_links_directly(monkeypatch, tmp_path):
    needs_mininet()
    links = _fake_mininet(monkeypatch)

    def edit(d):
        for lk in d["links"]:
            lk.pop("delay_ms", None)
        d["switches"].append({"name": "s2", "device_id": 2})
        d["links"].append({"a": "s1", "b": "s2", "a_port": 7, "b_port": 8, "delay_ms": 0.5,
                           "schedule": {"kind": "constant", "rate_mbit": 10}})
        d["links"].append({"a": "s2", "b": "s1", "a_port": 9, "b_port": 10,
                           "schedule": {"kind": "constant", "rate_mbit": 10}})
    cfg = scenario("smoke", edit)
    built = scenario_net.build_network(cfg, tmp_path)
    assert [em.name for em in built.linkem_nodes] == ["em2"]         # 0.5 ms is a delay too
    assert links[:2] == [("switch", "s1", scenario_net.GRPC_PORT_BASE, scenario_net.THRIFT_PORT_BASE, "0000000000000001"),
                         ("switch", "s2", scenario_net.GRPC_PORT_BASE + 1, scenario_net.THRIFT_PORT_BASE + 1, "0000000000000002")]
    assert links[2:] == [("h1", "s1", None, None), ("s1", "h2", None, None),
                         ("s1", "em2", 7, None), ("em2", "s2", None, 8), ("s2", "s1", 9, 10)]
    assert [p.name for p in built.plans] == ["s1", "s2"] and len(built.plans[1].ports) == 2
    fixed = scenario_net.build_network(cfg, tmp_path, frame_bytes=1500)
    assert {pp.frame_bytes for plan in fixed.plans for pp in plan.ports} == {1500}


def test_build_network_puts_a_link_shaped_link_through_bwn_link_without_delay(monkeypatch, tmp_path):
    needs_mininet()
    links = _fake_mininet(monkeypatch)

    def edit(d):
        for lk in d["links"]:
            lk.pop("delay_ms", None)
        _serve_by_link(d)
    cfg = scenario("smoke", edit)
    built = scenario_net.build_network(cfg, tmp_path)
    assert [em.name for em in built.linkem_nodes] == ["em1"]        # no delay, but its rate
    assert built.linkem_nodes[0].link_config is cfg.link("bottleneck")
    assert links[1:] == [("h1", "s1", None, None), ("s1", "em1", None, None), ("em1", "h2", None, None)]


def test_agents_log_to_their_files_and_flows_get_their_own_start(tmp_path):
    """Each agent's stdout and stderr go to its log file; a flow starting at 0.5 s is
    delayed too; flow ids come from the scenario's seed; the output folder is made
    (with its parents) and may exist already."""

    def flows(data: dict[str, Any]) -> None:
        data["experiment"]["seed"] = 7
        data["flows"] = [{"name": "soon", "src": "h1", "dst": "h2", "start_s": 0.5}]
    cfg = scenario("gtcp-reservations", flows)
    out = tmp_path / "new" / "run"
    for _ in range(2):
        net = FakeNet(cfg)
        senders, receivers = agents.start_agents(cfg, net, "newreno", out, duration_s=5.0)
        for agent in senders + receivers:
            agent.proc.wait(5)
    assert [(a.name, a.log) for a in senders] == [("soon", out / "send-soon.log")]
    assert [(a.name, a.log) for a in receivers] == [("h2", out / "recv-h2.log")]
    assert sorted((out / "send-soon.log").read_text().split()) == ["h1-err", "h1-out"]
    assert sorted((out / "recv-h2.log").read_text().split()) == ["h2-err", "h2-out"]
    (cmd,) = net.get("h1").popened
    assert cmd[cmd.index("--start-delay-s") + 1] == "0.500"
    assert cmd[cmd.index("--flow-id") + 1] == str(seeding.flow_id(7, 0)) != str(seeding.flow_id(None, 0))


def test_the_run_reports_progress_every_10_s_and_ends_at_its_deadline(monkeypatch, tmp_path):
    """With a clock that advances only when the runner sleeps: progress lines at 10 and
    20 s of a 25 s run, none at or after its end; the senders are ended at 28 s
    (duration + 3 s), not before."""
    import types
    code = "import signal, sys, time; signal.signal(signal.SIGINT, lambda *_: sys.exit(3))"
    call, _, lines, out, _ = fake_run(monkeypatch, tmp_path, sender_code=code, write_logs=False)
    clock = {"t": 1000.0}
    slept: list[float] = []

    def sleep(dt: float) -> None:
        slept.append(dt)
        clock["t"] += dt

    monkeypatch.setattr(ex, "time", types.SimpleNamespace(monotonic=lambda: clock["t"], sleep=sleep,
                                                          time=time.time))
    meta = call(duration_s=25.0)
    assert [line for line in lines if line.endswith("/25 s")] == ["[ebn] 10/25 s", "[ebn] 20/25 s"]
    assert set(slept) == {0.25} and sum(slept) == pytest.approx(28.0)
    assert meta.sender_exit_codes == {"main": 3}
    # The log folder of a run that never wrote one: nothing to remove, no error.
    assert meta.ok is True and not (out / "switch-logs").exists()


def _agent_net(cfg: ExperimentConfig, scripts: dict[str, str]) -> tuple[FakeNet, list[subprocess.Popen]]:
    """A FakeNet whose hosts run `scripts[host]` (sh; $1 is the agent's --ready-file)."""
    net = FakeNet(cfg)
    procs: list[subprocess.Popen] = []
    for host, script in scripts.items():
        node = net.get(host)

        def popen(cmd: list[str], script: str = script, **kw: Any) -> subprocess.Popen:
            ready = cmd[cmd.index("--ready-file") + 1]
            procs.append(subprocess.Popen(["sh", "-c", script, "agent", ready], **kw))
            return procs[-1]
        node.popen = popen  # type: ignore[method-assign]
    return net, procs


def test_an_agent_that_dies_before_it_is_ready_fails_the_start_and_ends_the_others(tmp_path):
    def one_flow(data: dict[str, Any]) -> None:
        data["flows"] = [{"name": "f", "src": "h1", "dst": "h2"}]
    cfg = scenario("gtcp-reservations", one_flow)
    net, procs = _agent_net(cfg, {"h2": 'echo $$ > "$1"; exec sleep 60', "h1": "exit 3"})
    with pytest.raises(agents.AgentStartError) as err:
        agents.start_agents(cfg, net, "newreno", tmp_path, duration_s=5.0)
    assert str(err.value) == (f"agent f exited with status 3 before it was ready; its output is in "
                              f"{tmp_path / 'send-f.log'}")
    assert all(p.poll() is not None for p in procs), "the receiver was left running"
    assert not (tmp_path / "ready").exists()


def test_an_agent_that_got_ready_and_then_ended_counts_as_ready(tmp_path):
    """Between the look for its ready file and the look at its status an agent may
    write the file and exit (a short flow): that is a start, not a failure."""
    ready = tmp_path / "ready-f"

    class ReadyThenEnded:
        def poll(self) -> int:
            ready.write_text("1\n")           # what the agent did after the first look
            return 0
    agent = agents.Agent("f", ReadyThenEnded(), tmp_path / "f.log")  # type: ignore[arg-type]
    agents._wait_ready([(agent, ready)], timeout_s=5.0)


def test_an_agent_never_ready_fails_the_start_after_the_timeout(monkeypatch, tmp_path):
    def one_flow(data: dict[str, Any]) -> None:
        data["flows"] = [{"name": "f", "src": "h1", "dst": "h2"}]
    err, procs = _start_never_ready(monkeypatch, tmp_path, one_flow, {"h2": 'echo $$ > "$1"; exec sleep 60',
                                                                      "h1": "exec sleep 60"})
    assert err.startswith("agents not ready after 0 s: f ")
    assert all(p.poll() is not None for p in procs)


def _start_never_ready(monkeypatch, tmp_path, flows, scripts) -> tuple[str, list]:
    """start_agents on hosts running `scripts` with a short ready timeout: its error."""
    cfg = scenario("gtcp-reservations", flows)
    monkeypatch.setattr(agents, "AGENT_READY_TIMEOUT_S", 0.5)
    net, procs = _agent_net(cfg, scripts)
    with pytest.raises(agents.AgentStartError) as err:
        agents.start_agents(cfg, net, "newreno", tmp_path, duration_s=5.0)
    return str(err.value), procs


def test_release_starts_the_held_senders(tmp_path):
    """Senders are held on stdin until release_senders says go; one that already
    exited does not stop the others' release."""
    def two_flows(data: dict[str, Any]) -> None:
        data["flows"] = [{"name": "a", "src": "h1", "dst": "h2"}, {"name": "b", "src": "h1", "dst": "h2"}]
    cfg = scenario("gtcp-reservations", two_flows)
    got = tmp_path / "got"
    held = f'echo $$ > "$1"; read line; echo "$line" >> {got}'
    net, _ = _agent_net(cfg, {"h2": 'echo $$ > "$1"; exec sleep 60', "h1": held})
    senders, receivers = agents.start_agents(cfg, net, "newreno", tmp_path, duration_s=5.0)
    try:
        time.sleep(0.3)
        assert not got.exists(), "a sender started before its release"
        senders[0].proc.kill()                 # died while held: its pipe has no reader
        senders[0].proc.wait(5)
        agents.release_senders(senders)
        senders[1].proc.wait(5)
        assert got.read_text().splitlines() == ["go"]
    finally:
        for agent in senders + receivers:
            agents.stop_process(agent.proc, signal.SIGKILL)


# -- shaper = "link": bwn-link serves the link's rate ---------------------------------------

def _serve_by_link(data: dict[str, Any], **extra: Any) -> None:
    for link in data["links"]:
        if link.get("name") == "bottleneck":
            link.update(shaper="link", schedule={"kind": "constant", "rate_mbit": 5}, **extra)


def test_linkem_options_serve_the_rate_where_the_switch_would_have():
    """bwn-link gets the rate and queue in each direction a switch end applying the
    schedule sends into (its first interface faces end a); a switch-shaped link gets
    its delay only."""
    assert scenario_net.linkem_options(scenario("smoke").link("bottleneck")) == ["--delay-ms", "10"]
    shaped = scenario("smoke", _serve_by_link).link("bottleneck")          # s1 -> h2
    assert scenario_net.linkem_options(shaped) == ["--delay-ms", "10", "--a-to-b-rate-mbit", "5",
                                         "--a-to-b-queue-packets", "50"]

    def two_switches(data: dict[str, Any]) -> None:
        data["switches"].append({"name": "s2", "device_id": 2})
        data["links"].append({"name": "trunk", "a": "s2", "b": "s1", "queue_packets": 250,
                              "shaper": "link", "schedule": {"kind": "constant", "rate_mbit": 11.02}})
    both = scenario("smoke", two_switches).link("trunk")
    assert scenario_net.linkem_options(both) == ["--delay-ms", "0",
                                       "--a-to-b-rate-mbit", "11.02", "--a-to-b-queue-packets", "250",
                                       "--b-to-a-rate-mbit", "11.02", "--b-to-a-queue-packets", "250"]
    one = scenario("smoke", lambda d: (two_switches(d), d["links"][-1].update(apply_at="s1"))).link("trunk")
    assert scenario_net.linkem_options(one) == ["--delay-ms", "0", "--b-to-a-rate-mbit", "11.02",
                                      "--b-to-a-queue-packets", "250"]


def test_linkem_runs_at_the_scenarios_real_time_priority():
    """bwn-link runs with SCHED_FIFO priority 10 unless the scenario says otherwise
    (`[experiment] linkem_rt_priority`; 0 = the normal scheduler); the option
    bounds 0..99 as bwn-link does."""
    cfg = scenario("smoke")
    assert cfg.linkem_rt_priority == 10
    assert scenario_net.linkem_options(cfg.link("bottleneck"), cfg.linkem_rt_priority) == [
        "--delay-ms", "10", "--rt-priority", "10"]
    off = scenario("smoke", lambda d: d["experiment"].update(linkem_rt_priority=0))
    assert off.linkem_rt_priority == 0
    assert scenario_net.linkem_options(off.link("bottleneck"), off.linkem_rt_priority) == ["--delay-ms", "10"]
    assert scenario("smoke", lambda d: d["experiment"].update(linkem_rt_priority=99)).linkem_rt_priority == 99
    for bad in (-1, 100, 1.5, "10"):
        with pytest.raises(ConfigError, match="linkem_rt_priority"):
            scenario("smoke", lambda d, bad=bad: d["experiment"].update(linkem_rt_priority=bad))


def test_linkem_options_give_a_time_varying_rate_as_its_schedule():
    from bwn.scenario.config import schedule_from_json

    sine = {"kind": "sine", "b_mbit": 0.1102, "alpha": 3.0, "w_rad_s": 1.0, "phi_rad": 0.0}
    shaped = scenario("smoke", lambda d: (_serve_by_link(d), d["links"][1].update(schedule=sine))
                      ).link("bottleneck")
    options = scenario_net.linkem_options(shaped)
    assert options[:2] == ["--delay-ms", "10"] and options[2] == "--a-to-b-rate-schedule"
    assert options[4:] == ["--a-to-b-queue-packets", "50"]
    assert json.loads(options[3]) == sine
    assert schedule_from_json(options[3]) == shaped.capacity.schedule


class _Proc:
    def __init__(self, alive: bool = True) -> None:
        self.alive, self.signals = alive, []

    def poll(self) -> int | None:
        return None if self.alive else 0

    def send_signal(self, signum: int) -> None:
        self.signals.append(signum)


def test_link_schedules_start_with_sigusr1_on_the_links_that_vary():
    import signal
    from types import SimpleNamespace

    sine = {"kind": "sine", "b_mbit": 1.0, "w_rad_s": 1.0}
    varying = scenario("smoke", lambda d: (_serve_by_link(d), d["links"][1].update(schedule=sine))
                       ).link("bottleneck")
    constant = scenario("smoke", _serve_by_link).link("bottleneck")
    by_switch = scenario("smoke").link("bottleneck")
    nodes = [SimpleNamespace(link_config=link, linkem_proc=_Proc(alive))
             for link, alive in ((varying, True), (constant, True), (by_switch, True), (varying, False))]
    nodes.append(SimpleNamespace(link_config=varying, linkem_proc=None))
    assert scenario_net.start_link_schedules(nodes) == ["bottleneck"]
    assert [n.linkem_proc.signals if n.linkem_proc else None for n in nodes] == \
        [[signal.SIGUSR1], [], [], [], None]


def test_a_link_shaped_port_is_planned_without_a_switch_rate():
    by_name, _ = plans(scenario("smoke"))
    assert port(by_name["s1"], "bottleneck").shaped_by_switch
    by_name, _ = plans(scenario("smoke", _serve_by_link))
    pp = port(by_name["s1"], "bottleneck")
    assert not pp.shaped_by_switch and pp.schedule.rate_bps(0.0) == 5e6   # still stamps the capacity
    assert port(by_name["s1"], "h1-s1").shaped_by_switch


def test_the_runner_starts_bwn_link_with_the_links_rate(monkeypatch, tmp_path):
    needs_mininet()
    sn, log, _, cfg = network(monkeypatch, tmp_path)
    shaped = scenario("smoke", _serve_by_link).link("bottleneck")
    sn.built.linkem_nodes[0].link_config = shaped
    sn.start()
    (start,) = [e for e in log if e[0] == "start_linkem"]
    assert start[2] == ("--delay-ms", "10", "--rt-priority", "10", "--a-to-b-rate-mbit", "5", "--a-to-b-queue-packets", "50",
                        "--seed", str(seeding.linkem_seed(11, "em1")))


def test_a_run_of_obp_on_a_link_shaped_link_is_refused_before_anything_starts(monkeypatch, tmp_path):
    from bwn.scenario.config import ConfigError
    monkeypatch.setattr(ex, "experiment_lock", lambda *a: pytest.fail("the run started"))
    cfg = scenario("smoke", _serve_by_link)
    with pytest.raises(ConfigError) as err:
        ex.run_scheme(cfg, "obp", tmp_path / "run", 5.0)
    assert "obp reads it" in str(err.value)
    assert err.value.source == str(cfg.source)      # the file to fix is named
    assert not (tmp_path / "run").exists()


# -- more of what a run relies on, found by mutation testing (docs/testing.md) ----------------

def test_routes_to_a_directly_attached_host_carry_its_mac_whichever_end_it_is():
    """smoke: h1 is end a of its link, h2 end b of the bottleneck; s1 must address each
    by its own MAC (a host drops frames for another MAC) and give the port its queue."""
    by_name, net = plans(scenario("smoke"))
    routes = {r[0]: r for r in by_name["s1"].routes}
    assert routes["10.0.1.1/32"][2] == net.get("h1").MAC()
    assert routes["10.0.2.1/32"][2] == net.get("h2").MAC()
    assert port(by_name["s1"], "bottleneck").queue_packets == 50      # the scenario's, not a default
    # a flow from the host at end b of its first link enters at end a
    assert scenario_net._first_switch(scenario("smoke"), "h2", "h1") == "s1"


def test_a_stale_ready_file_does_not_count_as_an_agent_up(monkeypatch, tmp_path):
    """An earlier run's ready files in the folder must not let the start go on before
    this run's agents are up."""
    def one_flow(data: dict[str, Any]) -> None:
        data["flows"] = [{"name": "f", "src": "h1", "dst": "h2"}]
    (tmp_path / "ready").mkdir()
    for name in ("recv-h2", "send-f"):
        (tmp_path / "ready" / name).write_text("1\n")
    err, procs = _start_never_ready(monkeypatch, tmp_path, one_flow, {"h2": "exec sleep 60", "h1": "exec sleep 60"})
    assert err.startswith("agents not ready after 0 s: h2, f (their output: ")   # every one waiting named
    assert all(p.poll() is not None for p in procs)


def test_background_flows_keep_their_own_algorithm_and_parameters(tmp_path):
    """Only the flows under test run the scheme and get its parameters."""
    def flows(data: dict[str, Any]) -> None:
        data["flows"] = [{"name": "bg", "src": "h1", "dst": "h2", "scheme": "newreno"},
                         {"name": "t", "src": "h1", "dst": "h2"}]
    cfg = scenario("gtcp-reservations", flows)
    net = FakeNet(cfg)
    senders, receivers = agents.start_agents(cfg, net, "ebn:variant=relative", tmp_path, duration_s=5.0)
    for agent in senders + receivers:
        agent.proc.wait(5)
    bg, t = net.get("h1").popened
    assert bg[1:3] == ["--algo", "newreno"] and "--param" not in bg
    assert t[1:3] == ["--algo", "ebn"] and t[-2:] == ["--param", "variant=relative"]


def test_a_time_varying_rate_is_one_compact_argument():
    sine = {"kind": "sine", "b_mbit": 0.1102, "alpha": 3.0, "w_rad_s": 1.0, "phi_rad": 0.0}
    shaped = scenario("smoke", lambda d: (_serve_by_link(d), d["links"][1].update(schedule=sine))
                      ).link("bottleneck")
    assert " " not in scenario_net.linkem_options(shaped)[3]    # one word for a shell or a log line


def test_every_varying_link_gets_its_start_whatever_comes_before_it():
    sine = {"kind": "sine", "b_mbit": 1.0, "w_rad_s": 1.0}
    varying = scenario("smoke", lambda d: (_serve_by_link(d), d["links"][1].update(schedule=sine))
                       ).link("bottleneck")
    constant = scenario("smoke", _serve_by_link).link("bottleneck")
    nodes = [SimpleNamespace(link_config=constant, linkem_proc=_Proc()),
             SimpleNamespace(link_config=varying),                       # never started: no process
             SimpleNamespace(link_config=varying, linkem_proc=_Proc())]
    assert scenario_net.start_link_schedules(nodes) == ["bottleneck"]
    assert nodes[2].linkem_proc.signals == [signal.SIGUSR1] and nodes[0].linkem_proc.signals == []


def test_release_goes_past_a_sender_without_a_pipe():
    class Stdin:
        def __init__(self):
            self.data, self.closed = b"", False

        def write(self, data):
            self.data += data

        def close(self):
            self.closed = True
    first = agents.Agent("a", SimpleNamespace(stdin=None), Path("a.log"))
    second = agents.Agent("b", SimpleNamespace(stdin=Stdin()), Path("b.log"))
    agents.release_senders([first, second])
    assert second.proc.stdin.data == b"go\n" and second.proc.stdin.closed


class _StubbornProc:
    """A process that never ends by itself: records each signal and wait."""
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def poll(self) -> int | None:
        return None

    def send_signal(self, sig: int) -> None:
        self.events.append(("signal", sig))

    def kill(self) -> None:
        self.events.append(("kill", None))

    def wait(self, timeout: float | None = None) -> int:
        self.events.append(("wait", timeout))
        raise subprocess.TimeoutExpired("agent", timeout)


def test_end_sender_interrupts_twice_then_kills():
    proc = _StubbornProc()
    with pytest.raises(subprocess.TimeoutExpired):      # the stub survives even SIGKILL
        agents.end_sender(proc, grace_s=0.5)
    assert proc.events[:5] == [("signal", signal.SIGINT), ("wait", 0.5), ("signal", signal.SIGINT),
                               ("wait", 0.5), ("signal", signal.SIGKILL)]


def test_stop_process_waits_its_timeout_after_the_kill_too():
    proc = _StubbornProc()
    with pytest.raises(subprocess.TimeoutExpired):
        agents.stop_process(proc, signal.SIGTERM, timeout_s=0.3)
    assert proc.events == [("signal", signal.SIGTERM), ("wait", 0.3), ("kill", None), ("wait", 0.3)]


def test_deleting_root_interfaces_keeps_ips_messages_off_the_terminal(monkeypatch):
    options: list[Any] = []

    def run(cmd, **kw):
        options.append(kw)
        return subprocess.CompletedProcess(cmd, 0)
    monkeypatch.setattr(scenario_net.subprocess, "run", run)
    sw = SimpleNamespace(intfList=lambda: [FakeIntf("s1-eth1", None)])
    scenario_net._delete_root_interfaces(SimpleNamespace(switches=[sw]))
    assert options == [{"capture_output": True}, {"capture_output": True}]


def test_controller_runs_in_a_daemon_thread_named_controller():
    seen: dict[str, Any] = {}

    class Ctl(_FakeController):
        async def run(self, ready: asyncio.Event) -> None:
            import threading
            seen["thread"] = threading.current_thread()
            await super().run(ready)
    thread = controller_thread.ControllerThread(Ctl())
    thread.start(timeout_s=10)
    thread.stop()
    assert seen["thread"].name == "controller" and seen["thread"].daemon   # never holds the exit up
    never = controller_thread.ControllerThread(_FakeController(ready=False))
    with pytest.raises(TimeoutError, match="^the controller could not configure every switch in time$"):
        never.start(timeout_s=0.2)
    never.stop()


def test_a_network_never_started_stops_quietly_and_a_started_one_runs_its_controller(monkeypatch, tmp_path):
    needs_mininet()
    sn, log, lines, _ = network(monkeypatch, tmp_path)
    sn.stop()                                  # no controller, no thread: nothing of theirs to stop
    assert ("thread.stop",) not in log
    sn, log, _, _ = network(monkeypatch, tmp_path)
    sn.start()
    assert sn.controller_thread.controller is sn.controller


def test_without_a_seed_bwn_link_draws_its_own(monkeypatch, tmp_path):
    needs_mininet()
    sn, log, _, cfg = network(monkeypatch, tmp_path, seed=None)
    sn.start()
    (start,) = [e for e in log if e[0] == "start_linkem"]
    assert "--seed" not in start[2]


def test_a_failed_teardown_step_is_logged_by_name_and_the_switch_ports_deleted(monkeypatch, tmp_path, caplog):
    needs_mininet()
    sn, log, _, _ = network(monkeypatch, tmp_path, fail={("stop_linkem", "em1")})
    monkeypatch.setattr(scenario_net, "_delete_root_interfaces", lambda net: log.append(("delete_root", net)))
    sn.start()
    with caplog.at_level("WARNING", logger=scenario_net.LOG.name), pytest.raises(RuntimeError):
        sn.stop()
    assert ("delete_root", sn.net) in log
    assert "teardown: stop_linkems failed: stop_linkem em1 failed" in caplog.messages


def test_progress_lines_carry_no_label_unless_given(monkeypatch, tmp_path):
    needs_mininet()
    sn, _, _, _ = network(monkeypatch, tmp_path)
    lines: list[str] = []
    bare = scenario_net.ScenarioNetwork(sn.cfg, tmp_path, lines.append)
    bare.start()
    assert lines == ["starting 1 BMv2 switches and 2 hosts"]


# -- one bwn-links process for every delayed link ([experiment] linkem_shared) ----------

def test_shared_emulators_start_as_one_group_with_each_links_options_and_the_priority_once(
        monkeypatch, tmp_path):
    needs_mininet()
    from topologies import nodes
    sn, log, _, cfg = network(monkeypatch, tmp_path, linkem_args={"bottleneck": ["--jitter-ms", "1"]})
    sn.cfg = dataclasses.replace(cfg, linkem_shared=True)

    class Group:
        def __init__(self, members):
            log.append(("group", [m.name for m in members]))
            self.proc = None

        def start(self, args, stats, spec, group_log, rt_priority):
            log.append(("group.start", args, stats, spec.name, group_log.name, rt_priority))

        def wait_ready(self):
            log.append(("group.ready",))

        def stop(self):
            log.append(("group.stop",))

    monkeypatch.setattr(nodes, "LinkemGroup", Group)
    sn.start()
    seed = str(seeding.linkem_seed(11, "em1"))
    assert [e for e in log if e[0].startswith("group") or e[0] in ("start_linkem", "wait_linkem_ready")] == [
        ("group", ["em1"]),
        ("group.start", {"em1": ["--delay-ms", "10", "--seed", seed, "--jitter-ms", "1"]},
         {"em1": tmp_path / "em1-linkem.json"}, "linkem-links.json", "linkem.log", 10),
        ("group.ready",),
    ]
    sn.stop_linkems()
    assert log[-2:] == [("group.stop",), ("stop_linkem", "em1")]


def test_shared_emulators_get_one_sigusr1_for_every_link_that_varies():
    import signal
    from types import SimpleNamespace

    sine = {"kind": "sine", "b_mbit": 1.0, "w_rad_s": 1.0}
    varying = scenario("smoke", lambda d: (_serve_by_link(d), d["links"][1].update(schedule=sine))
                       ).link("bottleneck")
    constant = scenario("smoke", _serve_by_link).link("bottleneck")
    group = SimpleNamespace(proc=_Proc(True))
    nodes = [SimpleNamespace(name=f"em{i}", link_config=link, linkem_proc=None)
             for i, link in enumerate((varying, constant, varying))]
    assert scenario_net.start_link_schedules(nodes, group) == ["bottleneck", "bottleneck"]
    assert group.proc.signals == [signal.SIGUSR1]
    ended = SimpleNamespace(proc=_Proc(False))
    assert scenario_net.start_link_schedules(nodes, ended) == [] and ended.proc.signals == []
    assert scenario_net.start_link_schedules(nodes, SimpleNamespace(proc=None)) == []


def test_the_fidelity_monitor_counts_the_shared_emulators_cpu_once(tmp_path):
    from types import SimpleNamespace
    from bwn.emulation.monitor import Monitor
    em = [SimpleNamespace(name=f"em{i}", linkem_proc=None) for i in range(3)]
    built = SimpleNamespace(net=SimpleNamespace(get=lambda name: None), plans=[], linkem_nodes=em,
                            linkem_group=SimpleNamespace(proc=SimpleNamespace(pid=4321)))
    monitor = Monitor.for_network(tmp_path, built, 0.25)
    assert monitor.linkem_pids == {"bwn-links": 4321}
    assert monitor.linkem_stats == [tmp_path / f"em{i}-linkem.json" for i in range(3)]


def test_bwn_net_describes_the_shared_emulator_and_the_links_it_serves(tmp_path):
    from types import SimpleNamespace
    from bwn.emulation import session
    cfg = scenario("smoke")
    ems = [SimpleNamespace(name=f"em{i}", link_config=cfg.links[i], linkem_proc=SimpleNamespace(pid=50 + i))
           for i in range(2)]
    net = SimpleNamespace(switches=[])
    alone = SimpleNamespace(cfg=cfg, net=net, built=SimpleNamespace(linkem_nodes=ems, linkem_group=None))
    text = session.describe(alone, tmp_path)
    assert "  em0: bwn-link pid 50, link h1-s1, 10 ms each way" in text
    assert "bwn-links" not in text
    shared = SimpleNamespace(cfg=cfg, net=net, built=SimpleNamespace(
        linkem_nodes=ems, linkem_group=SimpleNamespace(proc=SimpleNamespace(pid=77))))
    text = session.describe(shared, tmp_path)
    assert "  bwn-links pid 77 serves every delayed link (em0, em1; [experiment] linkem_shared)" in text
    assert "  em1: bwn-links pid 77, link bottleneck, 10 ms each way" in text


def test_xcp_and_rcp_run_at_every_port_that_applies_a_capacity_unless_turned_off():
    """[dataplane] explicit_feedback: by default both routers at each port with a
    schedule, their queue counted in the windows' unit; [] turns them off."""
    cfg = scenario("obp-parking-lot")
    by_name, _ = plans(cfg)
    ports = [p for plan in by_name.values() for p in plan.ports]
    assert ports and all(p.schedule is not None for p in ports)
    assert all(p.xcp == XcpConfig(queue_unit_bytes=DATA_FRAME) and p.rcp == RcpConfig(queue_unit_bytes=DATA_FRAME)
               for p in ports)
    off, _ = plans(scenario("obp-parking-lot", lambda d: d.setdefault("dataplane", {}).update(
        explicit_feedback=["rcp"])))
    assert all(p.xcp is None and p.rcp is not None for plan in off.values() for p in plan.ports)
    with pytest.raises(ConfigError, match="explicit_feedback"):
        scenario("obp-parking-lot", lambda d: d.setdefault("dataplane", {}).update(explicit_feedback=["tcp"]))
