"""The controller's state push and rate logic (controller/switchctl.py) against fake
switches: what it writes, in which order, and which rate, without BMv2.

tests/test_switchctl_bmv2.py checks the same against a real switch restart; these
check the numbers: after a reconnect the port gets the rate its schedule has *now*
(or the rate pinned by hand), the reservation's meter is configured, and the
schedule loop writes only changes above 0.5 %."""
from __future__ import annotations

import asyncio
import csv
from pathlib import Path
from typing import Any

import finsy as fy
import pytest

from controller import entries as ent
from controller.xr_math import RcpConfig, XcpConfig
from controller import switchctl as sc
from bwn.protocol import dataplane_math as dm
from bwn.rundir import RunDir
from bwn.scenario.schedule import ConstantSchedule, StepSchedule, bmv2_queue_rate_pps

WINDOW = ent.WindowConfig(16_384, 65_536, 1102)


class FakeQueues:
    log: list[tuple[Any, ...]] = []

    def __init__(self, thrift_port: int) -> None:
        self.thrift_port = thrift_port

    def set_depth(self, port: int, depth_packets: int, priority: int | None = None) -> None:
        FakeQueues.log.append(("depth", self.thrift_port, port, depth_packets)
                              + (() if priority is None else (priority,)))

    def set_rate(self, port: int, rate_pps: float, priority: int | None = None) -> None:
        FakeQueues.log.append(("rate", self.thrift_port, port, rate_pps)
                              + (() if priority is None else (priority,)))

    def close(self) -> None:
        FakeQueues.log.append(("close", self.thrift_port))


class FakeSwitch:
    def __init__(self, name: str, digest_exists: bool = False) -> None:
        self.name = name
        self.is_up = True
        self.ops: list[tuple[str, list[Any]]] = []
        self.digest_exists = digest_exists

    async def delete_all(self) -> None:
        self.ops.append(("delete_all", []))

    async def insert(self, entities: list[Any]) -> None:
        if self.digest_exists and isinstance(entities[0], fy.P4DigestEntry):
            raise fy.P4ClientError.__new__(fy.P4ClientError)
        self.ops.append(("insert", list(entities)))

    async def modify(self, entities: list[Any]) -> None:
        self.ops.append(("modify", list(entities)))

    def written(self, kind: type) -> list[tuple[str, Any]]:
        return [(op, e) for op, batch in self.ops for e in batch if isinstance(e, kind)]


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(autouse=True)
def fake_queues(monkeypatch):
    FakeQueues.log = []
    monkeypatch.setattr(sc, "QueueControl", FakeQueues)
    # No P4 program needed: the controller's finsy switches are replaced by FakeSwitch.
    monkeypatch.setattr(sc.fy, "Switch", lambda name, *_args, **_kw: FakeSwitch(name))


STEP = StepSchedule(((0.0, 5e6), (4.0, 2e6)))


def controller(tmp_path: Path, plans: list[sc.SwitchPlan], clock: Clock) -> sc.BwnController:
    ctl = sc.BwnController(plans, tmp_path / "p4info.txtpb", tmp_path / "bwn.json", tmp_path / "out",
                           WINDOW, clock=clock)
    ctl._rate_lock = asyncio.Lock()
    return ctl


def smoke_plan(**port_kw: Any) -> sc.SwitchPlan:
    return sc.SwitchPlan(
        name="s1", grpc_addr="127.0.0.1:50100", thrift_port=9190, device_id=1,
        routes=[("10.0.1.1/32", 1, "00:00:00:00:01:01", "00:00:00:01:00:01"), ("10.0.2.1/32", 2, "00:00:00:00:02:01", "00:00:00:01:00:02")],
        ports=[sc.PortPlan(port=1, link="h1-s1", schedule=None, queue_packets=64),
               sc.PortPlan(port=2, link="bottleneck", schedule=STEP, queue_packets=30, frame_bytes=1102,
                           **port_kw)],
        reservations=[ent.Reservation(src="10.0.1.1", dst="10.0.2.1", rate_bps=1e6, src_port=40001)])


async def schedule_tick(ctl: sc.BwnController, clock: "Clock", dt_s: float) -> None:
    """Move the clock by `dt_s` and let the schedule loop run one tick or so."""
    clock.t += dt_s
    task = asyncio.create_task(ctl._schedules())
    await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def capacity_rows(ctl: sc.BwnController) -> list[dict[str, str]]:
    ctl._cap_file.flush()
    return list(csv.DictReader(open(RunDir(ctl.out_dir).capacity_csv)))


def test_reconnect_pushes_the_schedules_current_rate(tmp_path):
    """A switch that comes back 6 s into the run gets the 2 Mb/s its step schedule has
    then, not the 5 Mb/s it started with: dataplane capacity, BMv2 queue rate and the log."""
    clock = Clock()
    plan = smoke_plan()
    ctl = controller(tmp_path, [plan], clock)
    sw = ctl.switches[0]
    asyncio.run(ctl._on_ready(sw))                # first session, t = 0
    clock.t += 6.0
    sw.ops.clear()
    FakeQueues.log = []
    asyncio.run(ctl._on_ready(sw))                # the switch restarted
    assert ctl.ready_count["s1"] == 2
    assert sw.ops[0] == ("delete_all", [])        # its old state goes first
    capacity = [e for op, e in sw.written(fy.P4TableEntry) if e == ent.port_capacity(2, 2e6, WINDOW)]
    assert capacity, "the current scheduled capacity was not written to the port"
    assert ("insert", ent.port_capacity(2, 2e6, WINDOW)) in sw.written(fy.P4TableEntry)
    assert ent.port_capacity(2, 5e6, WINDOW) not in [e for _, e in sw.written(fy.P4TableEntry)]
    assert FakeQueues.log == [("depth", 9190, 1, 64), ("depth", 9190, 2, 30),
                              ("rate", 9190, 2, bmv2_queue_rate_pps(2e6, 1102)), ("close", 9190)]
    assert ctl.applied_bps == {("s1", 2): 2e6}
    rows = capacity_rows(ctl)
    assert [(r["t_s"], r["link"], r["switch"], r["port"], r["rate_bps"]) for r in rows] == [
        ("0.000", "bottleneck", "s1", "2", "5000000"), ("6.000", "bottleneck", "s1", "2", "2000000")]
    assert float(rows[1]["queue_pps"]) == pytest.approx(bmv2_queue_rate_pps(2e6, 1102), abs=0.01)


def test_a_first_session_gets_the_schedules_first_rate_however_late(tmp_path):
    """The schedules start once every switch is ready; a switch that took 10 s to
    connect (a loaded machine) still starts at the schedule's t = 0 rate."""
    clock = Clock()
    ctl = controller(tmp_path, [smoke_plan()], clock)
    clock.t += 10.0
    sw = ctl.switches[0]
    asyncio.run(ctl._on_ready(sw))
    written = [e for _, e in sw.written(fy.P4TableEntry)]
    assert ent.port_capacity(2, 5e6, WINDOW) in written and ent.port_capacity(2, 2e6, WINDOW) not in written


def test_state_push_installs_tables_routes_digest_and_the_reservation_meter(tmp_path):
    plan = smoke_plan(loss=0.25, af_queue_packets=15)
    ctl = controller(tmp_path, [plan], Clock())
    sw = ctl.switches[0]
    asyncio.run(ctl._on_ready(sw))
    entry, meter = ent.reservation(plan.reservations[0])
    assert sw.written(fy.P4DirectMeterEntry) == [("modify", meter)]      # the meter's rate is set
    for e in ent.window_config(WINDOW):
        assert ("modify", e) in sw.written(fy.P4TableEntry)
    inserted = [e for op, e in sw.written(fy.P4TableEntry) if op == "insert"]
    assert inserted == (ent.static_tables(WINDOW) + sc.route_entries(plan) + [ent.port_service(2, 1102)]
                        + [entry, ent.port_capacity(2, 5e6, WINDOW)])
    assert sw.written(fy.P4DigestEntry) == [("insert", ent.telemetry_digest())]
    # A new session of the same switch: the digest is already there, so it is modified.
    again = FakeSwitch("s1", digest_exists=True)
    asyncio.run(ctl._on_ready(again))
    assert again.written(fy.P4DigestEntry) == [("modify", ent.telemetry_digest())]
    assert ctl.ready_count["s1"] == 2


def test_state_push_turns_xcp_and_rcp_on_where_the_port_says(tmp_path):
    """A port with XCP or RCP gets its xcp_port / rcp_port entry with the port's
    parameters, on every session; a port without gets none."""
    plan = smoke_plan(xcp=XcpConfig(alpha=0.2), rcp=RcpConfig())
    assert sc.xr_entries(plan) == [ent.xcp_port(2, XcpConfig(alpha=0.2)), ent.rcp_port(2, RcpConfig())]
    ctl = controller(tmp_path, [plan], Clock())
    sw = ctl.switches[0]
    asyncio.run(ctl._on_ready(sw))
    inserted = [e for op, e in sw.written(fy.P4TableEntry) if op == "insert"]
    assert ent.xcp_port(2, XcpConfig(alpha=0.2)) in inserted and ent.rcp_port(2, RcpConfig()) in inserted
    assert sc.xr_entries(smoke_plan()) == []
    with pytest.raises(dm.ConfigError, match="capacity"):
        sc.PortPlan(port=1, link="h1-s1", schedule=None, rcp=RcpConfig())


def test_a_port_whose_rate_bmv2s_queue_applies_counts_a_frame_per_packet(tmp_path):
    """BMv2 serves its queue in packets: the port's packets count one frame of the
    size its packet rate came from. A port bwn-link shapes (served in bytes) and a
    port without a rate count each packet's length (no entry)."""
    assert sc.port_service_entries(smoke_plan()) == [ent.port_service(2, 1102)]
    assert ent.port_service(2, 1102).action == fy.P4TableAction("BwnIngress.serve_packets", slot_bytes=1102)
    assert sc.port_service_entries(smoke_plan(shaped_by_switch=False)) == []
    with pytest.raises(dm.ConfigError, match="slot"):
        ent.port_service(2, 0)


def test_route_entries_carry_each_ports_options():
    plan = smoke_plan(loss=0.25, af_queue_packets=15)
    to_h2 = ent.route("10.0.2.1/32", 2, "00:00:00:00:02:01", "00:00:00:01:00:02",
                      ent.PortOptions(loss=0.25, reservations=True, af_queue_packets=15))
    to_h1 = ent.route("10.0.1.1/32", 1, "00:00:00:00:01:01", "00:00:00:01:00:01", ent.PortOptions())
    assert sc.route_entries(plan) == to_h1 + to_h2
    assert sc.route_entries(plan, only_port=2) == to_h2
    # A route out of a port without a plan: no loss, no AF.
    plan.routes.append(("10.0.9.1/32", 7, "00:00:00:00:09:01", "00:00:00:01:00:07"))
    assert sc.route_entries(plan, only_port=7) == ent.route("10.0.9.1/32", 7, "00:00:00:00:09:01", "00:00:00:01:00:07",
                                                             ent.PortOptions())


def test_a_red_port_gets_its_red_entries_and_routes_with_the_red_option(tmp_path):
    from controller import aqm
    red = aqm.RedParams.automatic(5e6, 1102)
    plan = smoke_plan(red=red)
    ctl = controller(tmp_path, [plan], Clock())
    sw = ctl.switches[0]
    asyncio.run(ctl._on_ready(sw))
    inserted = [e for op, e in sw.written(fy.P4TableEntry) if op == "insert"]
    red_entries = ent.red_entries(2, red)
    assert all(e in inserted for e in red_entries)
    assert not any(e.table_id.endswith("red_config") and e.match["egress_port"] == 1 for e in inserted
                   if isinstance(e.table_id, str))
    assert sc.route_entries(plan, only_port=2) == ent.route(
        "10.0.2.1/32", 2, "00:00:00:00:02:01", "00:00:00:01:00:02", ent.PortOptions(reservations=True, red=True))
    assert sc.route_entries(plan, only_port=1) == ent.route(
        "10.0.1.1/32", 1, "00:00:00:00:01:01", "00:00:00:01:00:01", ent.PortOptions())


def test_a_guaranteed_port_serves_in_profile_at_the_rate_and_best_effort_at_the_rest(tmp_path):
    """Priority 1 (in profile) at the port's rate, priority 0 at the rate less the
    reservations that leave by it, both queues as deep as the port's queue; its
    routes carry the guaranteed option; the schedule's later rate moves both."""
    clock = Clock()
    plan = smoke_plan(guaranteed=True, reserved_bps=1.5e6)
    ctl = controller(tmp_path, [plan], clock)
    sw = ctl.switches[0]
    asyncio.run(ctl._on_ready(sw))
    assert FakeQueues.log == [("depth", 9190, 1, 64), ("depth", 9190, 2, 30, 0), ("depth", 9190, 2, 30, 1),
                              ("rate", 9190, 2, bmv2_queue_rate_pps(5e6, 1102), 1),
                              ("rate", 9190, 2, bmv2_queue_rate_pps(3.5e6, 1102), 0), ("close", 9190)]
    assert sc.route_entries(plan, only_port=2) == ent.route(
        "10.0.2.1/32", 2, "00:00:00:00:02:01", "00:00:00:01:00:02",
        ent.PortOptions(reservations=True, guaranteed=True))
    FakeQueues.log = []
    ctl.schedule_interval_s = 0.01
    asyncio.run(schedule_tick(ctl, clock, 5.0))                  # the step to 2 Mb/s
    rates = [e for e in FakeQueues.log if e[0] == "rate"]
    assert rates == [("rate", 9190, 2, bmv2_queue_rate_pps(2e6, 1102), 1),
                     ("rate", 9190, 2, bmv2_queue_rate_pps(0.5e6, 1102), 0)]
    assert sc.best_effort_pps(sc.PortPlan(port=2, link="x", reserved_bps=3e6, frame_bytes=1102), 2e6) == 1.0


def test_a_pinned_rate_survives_a_reconnect_and_unpinning_resumes_the_schedule(tmp_path):
    clock = Clock()
    ctl = controller(tmp_path, [smoke_plan()], clock)
    sw = ctl.switches[0]
    asyncio.run(ctl._on_ready(sw))
    applied = asyncio.run(ctl.set_link_rate("bottleneck", 3e6))
    assert applied == [sc.AppliedRate("s1", 2, 3e6, bmv2_queue_rate_pps(3e6, 1102))]
    assert ("modify", ent.port_capacity(2, 3e6, WINDOW)) in sw.written(fy.P4TableEntry)
    clock.t += 10.0
    sw.ops.clear()
    asyncio.run(ctl._on_ready(sw))
    assert ("insert", ent.port_capacity(2, 3e6, WINDOW)) in sw.written(fy.P4TableEntry)
    assert [s.mode for s in asyncio.run(ctl.port_status())] == ["unlimited", "pinned"]
    applied = asyncio.run(ctl.set_link_rate("bottleneck", None))
    assert [a.rate_bps for a in applied] == [2e6]          # the schedule's rate at t = 10 s
    status = asyncio.run(ctl.port_status())
    assert [(s.link, s.mode, s.applied_bps) for s in status] == [
        ("h1-s1", "unlimited", None), ("bottleneck", "schedule", 2e6)]


def test_set_link_rate_refuses_what_it_cannot_do(tmp_path):
    ctl = controller(tmp_path, [smoke_plan()], Clock())
    with pytest.raises(KeyError) as err:
        asyncio.run(ctl.set_link_rate("nosuch", 1e6))
    assert err.value.args[0] == "no link 'nosuch' on any switch; links: h1-s1, bottleneck"
    with pytest.raises(KeyError) as err:
        asyncio.run(ctl.set_link_rate("h1-s1", 1e6))
    assert err.value.args[0] == "link 'h1-s1' has no rate-limited switch port (see its apply_at)"
    # Not connected yet: refused, but the pin is kept for when the session is back.
    with pytest.raises(RuntimeError) as err:
        asyncio.run(ctl.set_link_rate("bottleneck", 1e6))
    assert str(err.value) == ("s1 is not connected now; the change is kept and applied when its "
                              "session is back")
    assert ctl.pinned_bps == {"bottleneck": 1e6}
    ctl.ready_count["s1"] = 1
    ctl.switches[0].is_up = False
    with pytest.raises(RuntimeError, match="s1 is not connected now"):
        asyncio.run(ctl.set_link_loss("bottleneck", 0.1))


def test_set_link_loss_rewrites_the_ports_routes(tmp_path):
    plan = smoke_plan()
    ctl = controller(tmp_path, [plan], Clock())
    ctl.ready_count["s1"] = 1
    done = asyncio.run(ctl.set_link_loss("bottleneck", 0.1))
    assert done == [("s1", 2, 1)]
    assert plan.ports[1].loss == 0.1
    assert ctl.switches[0].ops == [("modify", sc.route_entries(plan, only_port=2))]
    with pytest.raises(Exception, match="0..1|probability"):
        asyncio.run(ctl.set_link_loss("bottleneck", 1.5))


def test_schedule_loop_writes_only_changes(tmp_path):
    """Every schedule_interval_s: a port whose target moved by more than 0.5 % gets it;
    switches that are down, or never configured, are left for their ready handler."""
    clock = Clock()
    ramp = ConstantSchedule(10e6)
    plans = [smoke_plan(), sc.SwitchPlan("s2", "127.0.0.1:50101", 9191, 2,
                                         ports=[sc.PortPlan(3, "b2", ramp, frame_bytes=1102)])]
    ctl = controller(tmp_path, plans, clock)
    s1, s2 = ctl.switches
    ctl.ready_count.update(s1=1, s2=1)
    ctl.applied_bps = {("s1", 2): 5e6, ("s2", 3): 10e6 * 1.004}   # s2 within 0.5 % of its target
    ctl.schedule_interval_s = 0.01

    asyncio.run(schedule_tick(ctl, clock, 1.0))                # t = 1 s: 5 Mb/s is still right
    assert s1.ops == [] and s2.ops == []
    s2.is_up = False
    asyncio.run(schedule_tick(ctl, clock, 4.0))                # t = 5 s: the step to 2 Mb/s
    assert s1.ops == [("modify", [ent.port_capacity(2, 2e6, WINDOW)])]
    assert ctl.applied_bps[("s1", 2)] == 2e6
    assert s2.ops == []
    ctl.applied_bps[("s2", 3)] = 10e6 * 1.006
    s2.is_up = True
    asyncio.run(schedule_tick(ctl, clock, 0.0))
    assert s2.ops == [("modify", [ent.port_capacity(3, 10e6, WINDOW)])]
    assert ("close", 9191) in FakeQueues.log


def test_target_is_the_pin_else_the_schedule(tmp_path):
    ctl = controller(tmp_path, [smoke_plan()], Clock())
    pp = ctl.plans["s1"].ports[1]
    assert ctl._target_bps(pp, 3.99) == 5e6 and ctl._target_bps(pp, 4.0) == 2e6
    # An experiment starts the schedules when it releases its flows (here at 10 s):
    # the first rate holds until then, and the step comes 4 s after it.
    ctl.schedule_origin_s = 10.0
    assert ctl._target_bps(pp, 4.0) == 5e6 and ctl._target_bps(pp, 13.99) == 5e6
    assert ctl._target_bps(pp, 14.0) == 2e6
    ctl.schedule_origin_s = 0.0
    ctl.pinned_bps["bottleneck"] = 7e6
    assert ctl._target_bps(pp, 4.0) == 7e6
    assert ctl.links() == ["h1-s1", "bottleneck"]


# -- telemetry: the digest (port_telemetry_t) and the controller's telemetry.csv -------

def digest(port: int, flows: int, queue: int, br_kbps: int, start_us: int, ebn: int, ic_kbps: int,
           ab_kbps: int) -> dict:
    """A telemetry digest as finsy hands it over: each field of port_telemetry_t
    (p4src/shared/telemetry.p4) by name, as an unsigned integer."""
    return dict(port=port, window_start_us=start_us, capacity_kbps=ic_kbps, rate_kbps=br_kbps,
                avail_kbps=ab_kbps & 0xFFFFFFFF, queue_pkts=queue, flows=flows, ebn_code=ebn)


def test_telemetry_decodes_every_field_of_the_digest():
    t = ent.PortTelemetry.from_digest(digest(port=0x1FF, flows=7, queue=42, br_kbps=0xFFFFFFFF,
                                             start_us=0xDEADBEEF, ebn=0x88, ic_kbps=5000, ab_kbps=-250))
    assert t == ent.PortTelemetry(port=0x1FF, window_start_us=0xDEADBEEF, capacity_kbps=5000.0,
                                  rate_kbps=float(0xFFFFFFFF), avail_kbps=-250.0, queue_pkts=42,
                                  flows=7, ebn_code=0x88)
    # AB is a signed 32-bit field: the extremes.
    assert ent.PortTelemetry.from_digest(digest(1, 9, 0, 0, 0, 0, 0, -(2**31))).avail_kbps == -(2**31)
    assert ent.PortTelemetry.from_digest(digest(1, 0, 0, 0, 0, 0, 0, 2**31 - 1)).avail_kbps == 2**31 - 1
    assert ent.PortTelemetry.from_digest(digest(1, 0, 0, 0, 0, 0, 0, 0)).avail_kbps == 0


@pytest.mark.parametrize("kw, says", [
    (dict(window_us=1000), "window_us"), (dict(flow_window_us=3), "flow_window_us"),
    (dict(queue_unit_bytes=0), "queue_unit_bytes must be positive, got 0")])
def test_window_config_refuses_bad_values(kw, says):
    with pytest.raises(ValueError, match=says):
        ent.WindowConfig(**kw)
    assert ent.WindowConfig(queue_unit_bytes=1).queue_unit_bytes == 1
    assert ent.WindowConfig(window_us=1024).window_log2 == 10


class _DigestList(list):
    def ack(self) -> str:
        return "ack"


def test_controller_runs_switches_and_writes_telemetry(tmp_path, monkeypatch):
    """run(): every switch's state installed before `ready`, then the schedules and a
    telemetry task per switch. Telemetry rows: one per port per interval, only the
    plan's ports, each digest acknowledged, and every digest kept as the latest."""
    clock = Clock()
    digests = [
        _DigestList([digest(2, 1, 4, 4800, 1000, 98, 5000, 200),
                     digest(9, 1, 0, 0, 1000, 0, 0, 0)]),        # not a plan port
        _DigestList([digest(2, 1, 6, 4900, 17384, 98, 5000, 100)]),  # within the interval
    ]

    async def read_digests(self, name):
        assert name == ent.TELEMETRY_DIGEST
        for d in digests:
            yield d
        clock.t += 1.0
        yield _DigestList([digest(2, 2, 8, 4950, 33768, 90, 5000, 50)])
        await asyncio.sleep(3600)

    async def write(self, entities):
        self.ops.append(("write", list(entities)))

    monkeypatch.setattr(FakeSwitch, "read_digests", read_digests, raising=False)
    monkeypatch.setattr(FakeSwitch, "write", write, raising=False)

    class FakeFinsyController:
        def __init__(self, switches):
            self.switches = switches

        async def run(self):
            for sw in self.switches:
                await sw.ready_handler(sw)
            await asyncio.sleep(3600)

    monkeypatch.setattr(sc.fy, "Controller", FakeFinsyController)
    plan = smoke_plan()
    ctl = controller(tmp_path, [plan], clock)
    for sw in ctl.switches:
        sw.ready_handler = ctl._on_ready
    ctl.telemetry_interval_s = 0.5

    async def main():
        ready = asyncio.Event()
        await ctl.run(duration_s=0.3, ready=ready)
        return ready.is_set()

    assert asyncio.run(main())
    assert ctl.ready_count["s1"] == 1
    sw = ctl.switches[0]
    assert [op for op in sw.ops if op[0] == "write"] == [("write", ["ack"])] * 3
    rows = list(csv.DictReader(open(ctl.out_dir / "telemetry.csv")))
    assert [(r["t_s"], r["port"], r["capacity_kbps"], r["avail_kbps"], r["queue_pkts"], r["ebn_code"],
             r["window_start_us"]) for r in rows] == [
        ("0.000", "2", "5000.0", "200.0", "4", "98", "1000"), ("1.000", "2", "5000.0", "50.0", "8", "90", "33768")]
    latest, _ = ctl.latest_telemetry[("s1", 2)]
    assert latest.queue_pkts == 8 and ("s1", 9) not in ctl.latest_telemetry
    assert ctl._cap_file.closed and ctl._tel_file.closed


def test_schedule_loop_skips_down_switches_goes_on_after_a_failure(tmp_path, caplog):
    """A switch listed first that is down, or up but not configured yet, is skipped
    without stopping the others; a port whose write fails (switch restarting) is
    logged with its switch and port, its queue connection renewed, and the next
    port still gets its rate."""
    clock = Clock()
    two_ports = sc.SwitchPlan("s2", "127.0.0.1:50101", 9191, 2, ports=[
        sc.PortPlan(3, "b2", ConstantSchedule(10e6), frame_bytes=1102),
        sc.PortPlan(4, "b3", ConstantSchedule(20e6), frame_bytes=1102)])
    down = sc.SwitchPlan("s0", "127.0.0.1:50099", 9189, 3, ports=[sc.PortPlan(1, "b0", ConstantSchedule(1e6))])
    ctl = controller(tmp_path, [down, two_ports], clock)
    s0, s2 = ctl.switches
    ctl.ready_count.update(s0=1, s2=1)
    s0.is_up = False
    ctl.applied_bps = {("s2", 3): 10e6, ("s2", 4): 5e6}     # b2 unchanged, b3 due
    ctl.schedule_interval_s = 0.01

    asyncio.run(schedule_tick(ctl, clock, 0.0))
    assert s0.ops == []
    assert s2.ops == [("modify", [ent.port_capacity(4, 20e6, WINDOW)])]
    # Up but never configured: still skipped.
    s0.is_up, ctl.ready_count["s0"] = True, 0
    asyncio.run(schedule_tick(ctl, clock, 0.0))
    assert s0.ops == []
    # A write that fails: logged, queues reconnected, the next port still done.
    ctl.applied_bps = {("s2", 3): 1e6, ("s2", 4): 1e6}
    calls = []

    async def failing_modify(entities):
        calls.append(entities)
        if len(calls) == 1:
            raise ConnectionError("switch restarting")
        s2.ops.append(("modify", list(entities)))

    s2.modify = failing_modify
    s2.ops.clear()
    FakeQueues.log = []
    with caplog.at_level("WARNING", logger="controller"):
        asyncio.run(schedule_tick(ctl, clock, 0.0))
    assert ("modify", [ent.port_capacity(4, 20e6, WINDOW)]) in s2.ops
    assert "s2: could not apply rate on port 3: switch restarting" in caplog.messages
    assert FakeQueues.log.count(("close", 9191)) >= 2    # the old connection closed, a new one made


def test_a_link_shaped_port_stamps_the_capacity_but_leaves_the_queue_unlimited(tmp_path):
    """shaper = "link": bwn-link serves the rate, so the port gets the capacity for
    stamping (EBN's share, OBP's narrow link) but no BMv2 queue rate, and capacity.csv
    says so with an empty queue_pps (the fidelity monitor then checks no departure
    rate there); `bwn rate` refuses the link instead of pinning what it cannot change."""
    clock = Clock()
    ctl = controller(tmp_path, [smoke_plan(shaped_by_switch=False)], clock)
    sw = ctl.switches[0]
    asyncio.run(ctl._on_ready(sw))
    assert ("insert", ent.port_capacity(2, 5e6, WINDOW)) in sw.written(fy.P4TableEntry)
    assert FakeQueues.log == [("depth", 9190, 1, 64), ("depth", 9190, 2, 30), ("close", 9190)]
    assert ctl.applied_bps == {("s1", 2): 5e6}
    (row,) = capacity_rows(ctl)
    assert (row["link"], row["port"], row["rate_bps"], row["queue_pps"], row["schedule_pps"]) == (
        "bottleneck", "2", "5000000", "", "")
    with pytest.raises(KeyError) as err:
        asyncio.run(ctl.set_link_rate("bottleneck", 1e6))
    assert err.value.args[0].startswith("link 'bottleneck' is served at its rate by its bwn-link "
                                        "(shaper = \"link\")")
    assert ctl.pinned_bps == {}


def test_each_switch_is_opened_with_the_program_its_address_and_device_id(tmp_path, monkeypatch):
    opened: list[tuple[Any, ...]] = []
    monkeypatch.setattr(sc.fy, "Switch", lambda *args: opened.append(args) or FakeSwitch(args[0]))
    other = sc.SwitchPlan(name="s2", grpc_addr="127.0.0.1:50101", thrift_port=9191, device_id=7,
                          routes=[], ports=[])
    out = tmp_path / "run" / "controller"                   # made, parents included
    ctl = sc.BwnController([smoke_plan(), other], tmp_path / "p4info.txtpb", tmp_path / "bwn.json", out,
                           WINDOW, clock=Clock())
    assert [(name, addr) for name, addr, _ in opened] == [("s1", "127.0.0.1:50100"), ("s2", "127.0.0.1:50101")]
    for (_, _, options), device_id in zip(opened, (1, 7)):
        assert (options.p4info, options.p4blob, options.device_id) == (
            tmp_path / "p4info.txtpb", tmp_path / "bwn.json", device_id)
        assert options.ready_handler == ctl._on_ready          # state is pushed on every connect
    ctl._cap_file.flush()
    ctl._tel_file.flush()
    assert (out / "capacity.csv").read_text().splitlines() == ["t_s,link,switch,port,rate_bps,queue_pps,schedule_pps"]
    assert (out / "telemetry.csv").read_text().splitlines() == [
        "t_s,switch,port,capacity_kbps,rate_kbps,avail_kbps,queue_pkts,flows,ebn_code,window_start_us"]
    # a second controller may use the same folder (a run started again)
    sc.BwnController([other], tmp_path / "p4info.txtpb", tmp_path / "bwn.json", out, WINDOW, clock=Clock())


def test_port_status_gives_each_ports_latest_telemetry_and_its_age(tmp_path):
    clock = Clock()
    ctl = controller(tmp_path, [smoke_plan(loss=0.25)], clock)
    asyncio.run(ctl._on_ready(ctl.switches[0]))
    seen = ent.PortTelemetry.from_digest(digest(2, 3, 5, 900, 1_000_000, 0x40, 5000, 120))
    end_s = ctl.switch_clocks["s1"].observe(seen.window_start_us, WINDOW.window_us, ctl.now_s())
    ctl.latest_telemetry[("s1", 2)] = (seen, end_s)
    clock.t += 2.5                                   # 2.5 s after the digest arrived
    first, second = asyncio.run(ctl.port_status())
    assert first == sc.PortStatus("s1", 1, "h1-s1", "unlimited", None, 0.0, None, None)
    assert second == sc.PortStatus("s1", 2, "bottleneck", "schedule", 5e6, 0.25, pytest.approx(2.5), seen)


def test_switch_clock_unwraps_the_32_bit_window_start_to_the_nearest_time():
    """Digests carry the window's start as 32 bits of us (wrapping every 71.6 min); the
    controller takes the unwrapped value nearest the newest seen, in either direction."""
    clock = sc.SwitchClock()
    wrap = sc.SwitchClock.WRAP_US
    assert clock.observe(wrap - 16_384, 16_384, 100.0) == wrap / 1e6            # ends at the wrap
    assert clock.observe(0, 16_384, 100.02) == pytest.approx((wrap + 16_384) / 1e6)   # after it
    assert clock.observe(wrap - 32_768, 16_384, 100.03) == pytest.approx((wrap - 16_384) / 1e6)  # late
    ahead = int(0.4 * wrap)                                 # 0.4 of a wrap ahead is ahead, not behind
    assert clock.observe(ahead, 16_384, 2000.0) == pytest.approx((wrap + ahead + 16_384) / 1e6)
    # the offset is the smallest arrival - end seen: the digest that came soonest
    assert clock.offset_s == pytest.approx(100.0 - wrap / 1e6)
    assert clock.age_s((wrap + 16_384) / 1e6, 100.5) == pytest.approx(0.5 - 16_384 / 1e6)
    assert clock.age_s(wrap / 1e6, 99.0) == 0.0              # never negative


# -- the queue look-ahead ([experiment] queue_lookahead) ---------------------------------

def _telemetry(port: int, queue_pkts: int) -> tuple[ent.PortTelemetry, float]:
    return ent.PortTelemetry(port=port, window_start_us=0, capacity_kbps=110.0, rate_kbps=100.0,
                             avail_kbps=0.0, queue_pkts=queue_pkts, flows=1, ebn_code=0), 0.0


def test_the_queue_gets_the_rate_in_force_when_its_packets_will_leave(tmp_path):
    """BMv2 spaces a packet at the rate of its enqueueing and it leaves its queue's
    drain time D later: with the look-ahead the queue gets the schedule's rate at t + D
    (the dataplane's capacity keeps the rate of now); a constant schedule, a pin, an
    empty or unknown queue, a link served by bwn-link, or the look-ahead off (the
    default): the rate of now."""
    from bwn.scenario.schedule import SineSchedule
    sine = SineSchedule(110.2e3, 3.0, 1.0, 0.0)
    plan = sc.SwitchPlan("s1", "127.0.0.1:50100", 9190, 1, ports=[
        sc.PortPlan(3, "C-D", sine, queue_packets=50, frame_bytes=1102),
        sc.PortPlan(4, "flat", ConstantSchedule(110.2e3), queue_packets=50, frame_bytes=1102),
        sc.PortPlan(5, "shaped", sine, queue_packets=50, frame_bytes=1102, shaped_by_switch=False)])
    sine_pp, flat_pp, shaped_pp = plan.ports
    ctl = controller(tmp_path, [plan], Clock())
    assert ctl.queue_lookahead is False
    ctl.latest_telemetry[("s1", 3)] = _telemetry(3, 24)
    t_s = 2.0
    assert ctl._queue_target_bps(plan, sine_pp, t_s) == sine.rate_bps(t_s)           # off by default
    ctl.queue_lookahead = True
    del ctl.latest_telemetry[("s1", 3)]
    assert ctl._queue_target_bps(plan, sine_pp, t_s) == sine.rate_bps(t_s)           # no telemetry yet
    ctl.latest_telemetry[("s1", 3)] = _telemetry(3, 0)
    assert ctl._queue_target_bps(plan, sine_pp, t_s) == sine.rate_bps(t_s)           # nothing queued
    ctl.latest_telemetry[("s1", 3)] = _telemetry(3, 24)
    drain_s = sc.drain_time_s(lambda t: bmv2_queue_rate_pps(sine.rate_bps(t), 1102), t_s, 24)
    assert 1.0 < drain_s < 3.0
    assert ctl._queue_target_bps(plan, sine_pp, t_s) == pytest.approx(sine.rate_bps(t_s + drain_s))
    assert abs(sine.rate_bps(t_s + drain_s) - sine.rate_bps(t_s)) > 0.1 * sine.rate_bps(t_s)
    ctl.schedule_origin_s = 0.5                                                      # schedule time
    drain_s = sc.drain_time_s(lambda t: bmv2_queue_rate_pps(sine.rate_bps(t - 0.5), 1102), t_s, 24)
    assert ctl._queue_target_bps(plan, sine_pp, t_s) == pytest.approx(sine.rate_bps(t_s - 0.5 + drain_s))
    ctl.schedule_origin_s = 0.0
    ctl.latest_telemetry[("s1", 3)] = _telemetry(3, 10**6)                           # bounded
    assert ctl._queue_target_bps(plan, sine_pp, t_s) == pytest.approx(
        sine.rate_bps(t_s + sc.MAX_QUEUE_LOOKAHEAD_S))
    ctl.latest_telemetry[("s1", 3)] = _telemetry(3, 24)
    for port in (4, 5):
        ctl.latest_telemetry[("s1", port)] = _telemetry(port, 24)
    assert ctl._queue_target_bps(plan, flat_pp, t_s) == 110.2e3
    assert ctl._queue_target_bps(plan, shaped_pp, t_s) == sine.rate_bps(t_s)
    ctl.pinned_bps["C-D"] = 50e3
    assert ctl._queue_target_bps(plan, sine_pp, t_s) == 50e3


def test_the_schedule_loop_writes_the_capacity_of_now_and_the_queue_rate_ahead(tmp_path):
    """One tick of the loop on a sine port with a standing queue and the look-ahead on:
    the dataplane gets the capacity at t, BMv2's queue the rate at t + D; capacity.csv
    records both and the schedule's rate in the queue's packets/s; a tick where only
    the queue's target moved writes it too."""
    from bwn.scenario.schedule import SineSchedule
    clock = Clock()
    sine = SineSchedule(110.2e3, 3.0, 1.0, 0.0)
    plan = sc.SwitchPlan("s1", "127.0.0.1:50100", 9190, 1,
                         ports=[sc.PortPlan(3, "C-D", sine, queue_packets=50, frame_bytes=1102)])
    ctl = controller(tmp_path, [plan], clock)
    ctl.queue_lookahead = True
    (sw,) = ctl.switches
    ctl.ready_count["s1"] = 1
    ctl.schedule_interval_s = 0.01
    ctl.latest_telemetry[("s1", 3)] = _telemetry(3, 24)

    asyncio.run(schedule_tick(ctl, clock, 2.0))
    t_s = ctl.now_s()
    ahead_bps = ctl._queue_target_bps(plan, plan.ports[0], t_s)
    assert abs(ahead_bps - sine.rate_bps(t_s)) > 0.05 * sine.rate_bps(t_s)
    assert sw.ops[-1] == ("modify", [ent.port_capacity(3, sine.rate_bps(t_s), WINDOW)])
    assert [e for e in FakeQueues.log if e[0] == "rate"][-1] == ("rate", 9190, 3, bmv2_queue_rate_pps(ahead_bps, 1102))
    assert ctl.applied_bps[("s1", 3)] == sine.rate_bps(t_s) and ctl.applied_queue_bps[("s1", 3)] == ahead_bps
    row = capacity_rows(ctl)[-1]
    assert float(row["rate_bps"]) == pytest.approx(sine.rate_bps(t_s), abs=1)
    assert float(row["queue_pps"]) == pytest.approx(bmv2_queue_rate_pps(ahead_bps, 1102), abs=0.01)
    assert float(row["schedule_pps"]) == pytest.approx(bmv2_queue_rate_pps(sine.rate_bps(t_s), 1102), abs=0.01)
    # The queue grew: only the queue's target moves, and it is written.
    ctl.latest_telemetry[("s1", 3)] = _telemetry(3, 40)
    FakeQueues.log = []
    asyncio.run(schedule_tick(ctl, clock, 0.0))
    assert [e for e in FakeQueues.log if e[0] == "rate"] == [
        ("rate", 9190, 3, bmv2_queue_rate_pps(ctl._queue_target_bps(plan, plan.ports[0], t_s), 1102))]


def test_drain_time_is_where_the_schedule_has_served_the_queue():
    assert sc.drain_time_s(lambda t: 10.0, 0.0, 24) == pytest.approx(2.4)
    assert sc.drain_time_s(lambda t: 10.0, 5.0, 0) == 0.0
    # 10 pkt/s until t = 1, then 40: 24 packets = 10 in the first second + 14 at 40/s.
    step = lambda t: 10.0 if t < 1.0 else 40.0
    assert sc.drain_time_s(step, 0.0, 24) == pytest.approx(1.0 + 14 / 40, abs=0.01)
    assert sc.drain_time_s(step, 0.0, 24) != pytest.approx(24 / 10, abs=0.5)    # not q / rate(now)
    assert sc.drain_time_s(lambda t: 1.0, 0.0, 1e6) == sc.MAX_QUEUE_LOOKAHEAD_S
    assert sc.drain_time_s(lambda t: 0.0, 0.0, 3) == sc.MAX_QUEUE_LOOKAHEAD_S     # a stalled rate: bounded
