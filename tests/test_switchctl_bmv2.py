"""The controller against a real simple_switch_grpc: pipeline push, entry writes,
schedules, and reconnect after the switch is killed and restarted."""
from __future__ import annotations

import asyncio
import csv
import os
import socket
from pathlib import Path

import pytest

from needs import missing, not_root, stale_build

from bwn.requirements import bmv2_missing
from bwn.rundir import RunDir
from controller.bmv2 import Bmv2Switch

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "build"

missing(not_root() or bmv2_missing()
        or stale_build(), "controller-on-BMv2 tests", module_level=True)

import finsy as fy  # noqa: E402

from controller import entries as ent  # noqa: E402
from bwn.scenario.schedule import StepSchedule  # noqa: E402
from controller.switchctl import BwnController, PortPlan, SwitchPlan  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def switch(tmp_path):
    sw = Bmv2Switch("ctl-test", ports={}, grpc_port=free_port(), thrift_port=free_port(),
                    log_dir=tmp_path / "logs")
    sw.start()
    yield sw
    sw.stop()


async def table_entries(sw: fy.Switch, table: str) -> list:
    return [e async for e in sw.read(fy.P4TableEntry(table))]


def test_push_schedule_telemetry_and_reconnect(switch, tmp_path):
    schedule = StepSchedule([(0.0, 5e6), (1.0, 2e6)])
    plan = SwitchPlan(
        name="s1", grpc_addr=switch.grpc_addr, thrift_port=switch.thrift_port,
        routes=[("10.0.2.1/32", 1, "00:00:00:00:00:02", "00:00:00:00:01:01")],
        ports=[PortPlan(port=1, link="bottleneck", schedule=schedule, queue_packets=50, loss=0.01)],
        reservations=[ent.Reservation(src="10.0.1.1", dst="10.0.2.1", rate_bps=1e6)],
    )
    ctl = BwnController([plan], BUILD / "bwn.p4info.txtpb", BUILD / "bwn.json", tmp_path / "out",
                        ent.WindowConfig(), telemetry_interval_s=0.2, schedule_interval_s=0.05)

    async def scenario() -> None:
        ready = asyncio.Event()
        run = asyncio.create_task(ctl.run(duration_s=None, ready=ready))
        await asyncio.wait_for(ready.wait(), 30)
        sw = ctl.switches[0]
        [route] = await table_entries(sw, f"{ent.INGRESS}.ipv4_lpm")
        # The port is lossy and this switch is the reservation's edge: the route checks both.
        assert route.action.name == "route_checked"  # finsy reads back the alias
        assert route.action.args["loss_threshold"] == round(0.01 * 2**32)
        assert route.action.args["options"] >> 31 == 1
        assert len(await table_entries(sw, f"{ent.INGRESS}.ipv4_lpm_other")) == 1
        [res] = await table_entries(sw, f"{ent.INGRESS}.reservations")
        # The meter is configured with the reservation's rate (read back).
        [meter] = [m async for m in sw.read(fy.P4DirectMeterEntry(table_entry=res))]
        assert meter.config.cir == 1e6 / 8 and meter.config.pir == 1e6 / 8
        assert len(await table_entries(sw, f"{ent.INGRESS}.flows_log")) == 256
        await asyncio.sleep(1.5)  # the step to 2 Mb/s is applied
        [cap] = await table_entries(sw, f"{ent.INGRESS}.port_config")
        assert cap.action.args["cap_kbps"] == 2000
        # Kill the switch and start it again: the controller reinstalls everything.
        switch.stop()
        await asyncio.sleep(1.0)
        await asyncio.to_thread(switch.start)
        for _ in range(100):
            if ctl.ready_count["s1"] >= 2:
                break
            await asyncio.sleep(0.2)
        assert ctl.ready_count["s1"] >= 2, "controller did not notice the restart"
        assert len(await table_entries(sw, f"{ent.INGRESS}.ipv4_lpm")) == 1
        [cap] = await table_entries(sw, f"{ent.INGRESS}.port_config")
        assert cap.action.args["cap_kbps"] == 2000
        await asyncio.sleep(0.5)
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)

    asyncio.run(scenario())
    rows = list(csv.DictReader(open(RunDir(tmp_path / "out").capacity_csv)))
    assert [float(r["rate_bps"]) for r in rows][:2] == [5e6, 2e6]
    # No traffic crossed this switch, so it sent no telemetry digest (the PTF
    # tests and the Mininet smoke test check telemetry with traffic).
    with open(RunDir(tmp_path / "out").telemetry_csv) as fh:
        assert next(csv.reader(fh))[:3] == ["t_s", "switch", "port"]


def test_rate_and_loss_set_by_hand_hold_against_the_schedule_and_a_restart(switch, tmp_path):
    """`bwn net`'s `bwn rate` and `bwn loss`: the pinned capacity replaces the schedule
    (a step due meanwhile is not applied), both survive a switch restart, and
    `rate_bps=None` returns the link to its schedule."""
    schedule = StepSchedule([(0.0, 5e6), (1.5, 2e6)])
    plan = SwitchPlan(
        name="s1", grpc_addr=switch.grpc_addr, thrift_port=switch.thrift_port,
        routes=[("10.0.2.1/32", 1, "00:00:00:00:00:02", "00:00:00:00:01:01")],
        ports=[PortPlan(port=1, link="bottleneck", schedule=schedule, queue_packets=50),
               PortPlan(port=2, link="access", schedule=None)],
    )
    ctl = BwnController([plan], BUILD / "bwn.p4info.txtpb", BUILD / "bwn.json", tmp_path / "out",
                        ent.WindowConfig(), telemetry_interval_s=0.2, schedule_interval_s=0.05)

    async def cap_kbps(sw: fy.Switch) -> int:
        [cap] = await table_entries(sw, f"{ent.INGRESS}.port_config")
        return cap.action.args["cap_kbps"]

    async def loss_thresholds(sw: fy.Switch) -> list[tuple[str, int]]:
        """The loss threshold each routing table's entry to 10.0.2.1 checks (0: plain route)."""
        return [(e.action.name, e.action.args.get("loss_threshold", 0))
                for table in ent.ROUTE_TABLES for e in await table_entries(sw, table)]

    async def scenario() -> None:
        ready = asyncio.Event()
        run = asyncio.create_task(ctl.run(duration_s=None, ready=ready))
        await asyncio.wait_for(ready.wait(), 30)
        sw = ctl.switches[0]
        [applied] = await ctl.set_link_rate("bottleneck", 3e6)
        assert (applied.switch, applied.port, applied.rate_bps) == ("s1", 1, 3e6)
        assert applied.queue_pps == pytest.approx(3e6 / (8 * 1066))
        assert await cap_kbps(sw) == 3000
        assert await loss_thresholds(sw) == [("route", 0), ("route_other", 0)]
        assert await ctl.set_link_loss("bottleneck", 0.5) == [("s1", 1, 1)]
        assert await loss_thresholds(sw) == [("route_checked", 1 << 31), ("route_other_checked", 1 << 31)]
        await ctl.set_link_loss("bottleneck", 0.25)
        assert await loss_thresholds(sw) == [("route_checked", 1 << 30), ("route_other_checked", 1 << 30)]
        assert await ctl.set_link_loss("access", 0.1) == [("s1", 2, 0)]    # no route leaves by it
        with pytest.raises(KeyError, match="no link 'nosuch'"):
            await ctl.set_link_rate("nosuch", 1e6)
        with pytest.raises(KeyError, match="no rate-limited switch port"):
            await ctl.set_link_rate("access", 1e6)
        await asyncio.sleep(2.0)                                 # the step to 2 Mb/s falls due
        assert await cap_kbps(sw) == 3000
        switch.stop()
        await asyncio.sleep(1.0)
        await asyncio.to_thread(switch.start)
        for _ in range(100):
            if ctl.ready_count["s1"] >= 2:
                break
            await asyncio.sleep(0.2)
        assert ctl.ready_count["s1"] >= 2, "controller did not notice the restart"
        assert await cap_kbps(sw) == 3000
        assert await loss_thresholds(sw) == [("route_checked", 1 << 30), ("route_other_checked", 1 << 30)]
        await ctl.set_link_loss("bottleneck", 0.0)
        assert await loss_thresholds(sw) == [("route", 0), ("route_other", 0)]
        [applied] = await ctl.set_link_rate("bottleneck", None)
        assert applied.rate_bps == 2e6
        assert await cap_kbps(sw) == 2000
        status = {r.port: r for r in await ctl.port_status()}
        assert (status[1].mode, status[1].applied_bps, status[1].loss) == ("schedule", 2e6, 0.0)
        assert (status[2].mode, status[2].loss) == ("unlimited", 0.1)
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)

    asyncio.run(scenario())
    rows = [float(r["rate_bps"]) for r in csv.DictReader(open(RunDir(tmp_path / "out").capacity_csv))]
    assert rows[:2] == [5e6, 3e6] and 2e6 not in rows[:-1] and rows[-1] == 2e6
