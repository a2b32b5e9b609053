"""The P4Runtime controller: pushes each switch's state, applies link-rate
schedules, and records telemetry.

It is asyncio and drives every switch at once with finsy. Each switch's whole
state is derived from its :class:`SwitchPlan` plus the current schedule values,
and is (re)installed by the switch's *ready handler*, which finsy runs when the
session first comes up and again after every reconnect. So when a BMv2 process
restarts, the controller notices (the gRPC stream breaks), reconnects when the
switch is back, pushes the pipeline and its state again, and carries on.

Outputs (CSV, appended while running):
* `capacity.csv`: t_s, link, switch, port, rate_bps, queue_pps, schedule_pps: every
  rate the controller applied: to the dataplane's capacity (rate_bps, the schedule's
  rate now), to BMv2's queue (queue_pps), and the schedule's rate now in the queue's
  packets/s (schedule_pps; it differs from queue_pps only under the queue look-ahead,
  :meth:`BwnController._queue_target_bps`);
* `telemetry.csv`: t_s, switch, port, capacity_kbps, rate_kbps, avail_kbps,
  queue_pkts, flows, ebn_code, window_start_us: the switches' telemetry digests
  (one per port and closed window; at most one row per port per interval).

While it runs, a user can change a link by hand (`bwn net`'s `bwn rate` and
`bwn loss`): :meth:`BwnController.set_link_rate` pins a link's capacity, which
then replaces its schedule until the pin is lifted (`rate_bps=None`);
:meth:`BwnController.set_link_loss` sets its random loss. Both survive a switch
reconnect. :meth:`BwnController.port_status` gives each port's latest telemetry.
"""
from __future__ import annotations

import asyncio
import csv
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Protocol

import finsy as fy

from controller.bmv2 import QueueControl
from bwn.protocol import dataplane_math as dm
from controller import aqm
from controller import entries as ent
from controller.xr_math import RcpConfig, XcpConfig
from bwn.rundir import RunDir
from bwn.scenario.schedule import ConstantSchedule, bmv2_queue_rate_pps

LOG = logging.getLogger(__name__)

# The longest look-ahead of a queue's rate (BwnController._queue_target_bps): a
# 250-packet queue at 1 Mb/s drains in ~2.2 s; beyond this a telemetry glitch, not
# a queue, is the likelier cause.
MAX_QUEUE_LOOKAHEAD_S = 10.0
DRAIN_STEP_S = 0.01


def drain_time_s(rate_pps: Callable[[float], float], t_s: float, packets: float,
                 step_s: float = DRAIN_STEP_S, max_s: float = MAX_QUEUE_LOOKAHEAD_S) -> float:
    """The D in which a queue served at ``rate_pps(t)`` from ``t_s`` sends ``packets``:
    the smallest D with the integral of the rate over [t_s, t_s + D] = packets
    (midpoint rule in ``step_s`` steps, exact within the last); at most ``max_s``.
    With a rate that changes, D = packets / rate(t_s) is off by the change over D:
    a look-ahead built on it served a 50-packet queue 0.80 of a sine at w = 1 rad/s
    in benchmarks/bmv2_rate_lag.py (this integral: 1.00)."""
    done = 0.0
    elapsed = 0.0
    while elapsed < max_s:
        rate = max(rate_pps(t_s + elapsed + step_s / 2), 1e-9)
        if done + rate * step_s >= packets:
            return min(elapsed + (packets - done) / rate, max_s)
        done += rate * step_s
        elapsed += step_s
    return max_s


class RateSchedule(Protocol):
    def rate_bps(self, t_s: float) -> float: ...


@dataclass
class PortPlan:
    """One egress port of a switch: the link it drives and how."""

    port: int
    link: str                                 # link name, for the capacity log
    schedule: Optional[RateSchedule] = None   # None: no rate limit, no stamping capacity
    queue_packets: int = 100
    frame_bytes: int = 1066                   # mean frame size for BMv2's packets/s rate
    loss: float = 0.0
    # Assured Forwarding (GTCP reservations leave by this port): out-of-profile and
    # best-effort packets are dropped while the queue holds this many packets (0 = off).
    af_queue_packets: int = 0
    # False: the link's bwn-link applies the rate (the scenario's shaper = "link"); the
    # port still stamps the schedule's capacity, but its BMv2 queue is not rate-limited.
    shaped_by_switch: bool = True
    # RED with ECN marking at the port (aqm = "red-ecn"): its parameters; None: drop-tail.
    red: Optional[aqm.RedParams] = None
    # The guaranteed service (service = "guaranteed", reserved flows leave by the port):
    # in-profile packets take priority queue 1, served at the port's rate; the rest take
    # priority 0, served at the rate less `reserved_bps` (BMv2 rate-limits each priority
    # queue on its own: no port-wide rate over both). The switch runs --priority-queues 2.
    guaranteed: bool = False
    reserved_bps: float = 0.0
    # XCP's and RCP's routers on this port (explicit feedback in the XR header), with
    # their parameters; None: off. Both need the port's capacity (a schedule).
    xcp: Optional[XcpConfig] = None
    rcp: Optional[RcpConfig] = None

    def __post_init__(self) -> None:
        if (self.xcp is not None or self.rcp is not None) and self.schedule is None:
            raise dm.ConfigError(f"port {self.port} ({self.link}): XCP and RCP need the port's capacity "
                                 "(a rate schedule), and it has none")


@dataclass
class SwitchPlan:
    name: str
    grpc_addr: str = ""                     # BMv2: its P4Runtime server
    thrift_port: int = 0                    # BMv2: its Thrift runtime (queues, counters)
    device_id: int = 0
    routes: list[tuple[str, int, str, str]] = field(default_factory=list)  # prefix, port, dst_mac, src_mac
    ports: list[PortPlan] = field(default_factory=list)
    reservations: list[ent.Reservation] = field(default_factory=list)
    # The eBPF switch (controller/ebpf.py): its NIKSS pipeline and each port's interface.
    target: str = "bmv2"
    pipe_id: Optional[int] = None
    ifnames: dict[int, str] = field(default_factory=dict)


class SwitchClock:
    """Maps a switch's 32-bit microsecond clock (the windows' start times in its
    telemetry digests) to the controller's clock, to say how old a reported window is.

    A port's digest is sent by the first packet after its window closed, so it
    arrives at or after the window's end: arrival - window end >= the clocks'
    offset, and the smallest such difference seen is the estimate (exact to the
    shortest such delay, i.e. within one packet gap on a busy port). The 32-bit
    clock wraps every 71.6 minutes; starts are unwrapped against the last one seen."""

    WRAP_US = 1 << 32

    def __init__(self) -> None:
        self.offset_s: Optional[float] = None
        self._latest_us: Optional[int] = None   # the newest window start seen, unwrapped

    def observe(self, window_start_us: int, window_us: int, arrival_s: float) -> float:
        """Note a digest; return its window's end on the switch's (unwrapped) clock, in s."""
        if self._latest_us is None:
            start_us = window_start_us
        else:   # the unwrapped value nearest the newest start seen
            delta = (window_start_us - self._latest_us) % self.WRAP_US
            if delta >= self.WRAP_US // 2:
                delta -= self.WRAP_US
            start_us = self._latest_us + delta
        self._latest_us = start_us if self._latest_us is None else max(self._latest_us, start_us)
        end_s = (start_us + window_us) / 1e6
        if self.offset_s is None or arrival_s - end_s < self.offset_s:
            self.offset_s = arrival_s - end_s
        return end_s

    def age_s(self, end_s: float, now_s: float) -> float:
        assert self.offset_s is not None
        return max(0.0, now_s - (end_s + self.offset_s))


@dataclass(frozen=True)
class AppliedRate:
    """A capacity the controller has just written to a port (dataplane and BMv2 queue)."""

    switch: str
    port: int
    rate_bps: float
    queue_pps: Optional[float]   # None: the port's queue is not rate-limited (shaper = "link")


@dataclass(frozen=True)
class PortStatus:
    """One switch port as the controller knows it now."""

    switch: str
    port: int
    link: str
    mode: str                          # "schedule", "pinned" (set by hand) or "unlimited"
    applied_bps: Optional[float]       # last capacity written to the port; None: none
    loss: float
    window_age_s: Optional[float]      # since the end of the window `telemetry` measured
    telemetry: Optional[ent.PortTelemetry]


class BwnController:
    """Runs the switches of one experiment."""

    target = "bmv2"

    def __init__(self, plans: list[SwitchPlan], p4info: Path, p4blob: Path, out_dir: Path,
                 window: ent.WindowConfig, telemetry_interval_s: float = 0.5,
                 schedule_interval_s: float = 0.1, clock: Callable[[], float] = time.monotonic,
                 queue_lookahead: bool = False) -> None:
        self.plans = {p.name: p for p in plans}
        self.window = window
        self.out_dir = out_dir
        self.telemetry_interval_s = telemetry_interval_s
        self.schedule_interval_s = schedule_interval_s
        self.clock = clock
        self.t0 = clock()
        # The schedules' time 0 on now_s()'s clock: an experiment moves it to the moment
        # its flows are released (the schedule's t_s and a flow's start_s then count from
        # the same instant); before it the schedule's first rate holds.
        self.schedule_origin_s = 0.0
        self.applied_bps: dict[tuple[str, int], float] = {}
        # The rate each port's BMv2 queue was given (bit/s): the capacity of the moment,
        # or with queue_lookahead ([experiment] queue_lookahead) the schedule's rate when
        # the packets enqueued then will leave (_queue_target_bps).
        self.applied_queue_bps: dict[tuple[str, int], float] = {}
        self.queue_lookahead = queue_lookahead
        self.ready_count: dict[str, int] = {p.name: 0 for p in plans}
        # Links whose capacity was set by hand: it replaces their schedule.
        self.pinned_bps: dict[str, float] = {}
        # Per (switch, port): the latest telemetry digest and its window's end on the
        # switch's clock (s); every digest, not only those written to telemetry.csv.
        self.latest_telemetry: dict[tuple[str, int], tuple[ent.PortTelemetry, float]] = {}
        self.switch_clocks: dict[str, SwitchClock] = {p.name: SwitchClock() for p in plans}
        self._rate_lock: Optional[asyncio.Lock] = None      # made in run(), on its loop
        self.switches = self._make_switches(plans, p4info, p4blob)
        out_dir.mkdir(parents=True, exist_ok=True)
        run = RunDir(out_dir)
        self._cap_file = open(run.capacity_csv, "w", newline="")
        self._cap_csv = csv.writer(self._cap_file)
        self._cap_csv.writerow(["t_s", "link", "switch", "port", "rate_bps", "queue_pps", "schedule_pps"])
        self._tel_file = open(run.telemetry_csv, "w", newline="")
        self._tel_csv = csv.writer(self._tel_file)
        self._tel_csv.writerow(["t_s", "switch", "port", "capacity_kbps", "rate_kbps", "avail_kbps",
                                "queue_pkts", "flows", "ebn_code", "window_start_us"])

    # -- what differs per target (controller/ebpf.py's EbpfController overrides these) --
    def _make_switches(self, plans: list[SwitchPlan], p4info: Path, p4blob: Path) -> list:
        """One handle per switch, each with `name` and `is_up`."""
        return [fy.Switch(p.name, p.grpc_addr, fy.SwitchOptions(
                    p4info=p4info, p4blob=p4blob, device_id=p.device_id, ready_handler=self._on_ready))
                for p in plans]

    def _queue_control(self, plan: SwitchPlan) -> QueueControl:
        """A connection to the switch's queues (BMv2's Thrift runtime); `.close()` it."""
        return QueueControl(plan.thrift_port)

    async def _start_sessions(self) -> asyncio.Task:
        """Start the switches' sessions; return the task that runs them (it installs
        each switch's state: ready_count counts those done)."""
        return asyncio.create_task(fy.Controller(self.switches).run(), name="finsy")

    async def _write_routes(self, sw: fy.Switch, plan: SwitchPlan, only_port: int) -> int:
        """Rewrite the routes of `plan` that leave by `only_port` (its options
        changed); return how many routes."""
        entries = route_entries(plan, only_port=only_port)
        if entries:
            await sw.modify(entries)
        return len(entries) // len(ent.ROUTE_TABLES)

    def _log_rate(self, plan: SwitchPlan, pp: PortPlan, rate_bps: float, pps: Optional[float],
                  schedule_pps: Optional[float]) -> None:
        self._cap_csv.writerow([f"{self.now_s():.3f}", pp.link, plan.name, pp.port, f"{rate_bps:.0f}",
                                "" if pps is None else f"{pps:.2f}",
                                "" if schedule_pps is None else f"{schedule_pps:.2f}"])
        self._cap_file.flush()

    def now_s(self) -> float:
        return self.clock() - self.t0

    def _target_bps(self, pp: PortPlan, t_s: float) -> float:
        """The capacity `pp` should have now: its link's pinned rate, else its schedule's."""
        pinned = self.pinned_bps.get(pp.link)
        if pinned is not None:
            return pinned
        assert pp.schedule is not None
        return pp.schedule.rate_bps(max(0.0, t_s - self.schedule_origin_s))

    def _queue_target_bps(self, plan: SwitchPlan, pp: PortPlan, t_s: float) -> float:
        """The rate BMv2's queue of `pp` should serve the packets enqueued now.

        BMv2 fixes a packet's departure time when the packet is enqueued
        (behavioral-model's ``QueueingLogicPriRL``: ``max(now, last_sent + 1/rate)``;
        a new rate applies only to packets enqueued after it), so a packet that
        joins Q packets leaves about D later, spaced at the rate of its enqueueing.
        On a schedule that keeps changing, a standing queue then serves the capacity
        of D seconds ago: the EBN grid's 24-packet queues were served 0.91-0.93 of a
        sine's capacity at w = 1 rad/s (docs/fidelity.md, invariant 4). With
        ``queue_lookahead`` the queue gets the schedule's rate at t + D, D the time
        in which the schedule serves the port's queue as its latest telemetry saw it
        (:func:`drain_time_s`), so each packet leaves spaced at the capacity in force
        when it leaves; kept runs of EBN's cases f and h were then served 0.96-0.99
        of the schedule. The dataplane's capacity (what the switch stamps) stays the
        rate of the moment. Without it, or for a pinned rate, a constant schedule, a
        link bwn-link serves, an empty or unknown queue: the rate of the moment."""
        rate_bps = self._target_bps(pp, t_s)
        if (not self.queue_lookahead or pp.link in self.pinned_bps or not pp.shaped_by_switch
                or isinstance(pp.schedule, ConstantSchedule)):
            return rate_bps
        seen = self.latest_telemetry.get((plan.name, pp.port))
        if seen is None or seen[0].queue_pkts <= 0:
            return rate_bps
        drain_s = drain_time_s(lambda t: bmv2_queue_rate_pps(self._target_bps(pp, t), pp.frame_bytes),
                               t_s, seen[0].queue_pkts)
        return self._target_bps(pp, t_s + drain_s)


    # -- state push -------------------------------------------------------------------
    async def _on_ready(self, sw: fy.Switch) -> None:
        """Install the switch's whole state (first connection and every reconnect)."""
        plan = self.plans[sw.name]
        LOG.info("%s ready (session %d): installing state", sw.name, self.ready_count[sw.name] + 1)
        await sw.delete_all()
        await sw.modify(ent.window_config(self.window))
        for batch in ent.chunks(ent.static_tables(self.window)):
            await sw.insert(batch)
        for batch in ent.chunks(route_entries(plan)):
            await sw.insert(batch)
        for pp in plan.ports:
            if pp.red is not None:
                for batch in ent.chunks(ent.red_entries(pp.port, pp.red)):
                    await sw.insert(batch)
        service = port_service_entries(plan)
        if service:
            await sw.insert(service)
        xr = xr_entries(plan)
        if xr:
            await sw.insert(xr)
        try:
            await sw.insert([ent.telemetry_digest()])
        except fy.P4ClientError:  # same switch, new session: the digest is still configured
            await sw.modify([ent.telemetry_digest()])
        for res in plan.reservations:
            entry, meter = ent.reservation(res)
            await sw.insert([entry])
            await sw.modify([meter])
        queues = self._queue_control(plan)
        # A switch's first session comes before the schedules start (run() starts their
        # clock once every switch is ready): it gets the schedule's first rate, however
        # long the connection took (under load it took more than a step's 1.5 s once).
        t_s = 0.0 if self.ready_count[sw.name] == 0 else self.now_s()
        try:
            for pp in plan.ports:
                if pp.guaranteed:       # both priority queues of the port
                    queues.set_depth(pp.port, pp.queue_packets, 0)
                    queues.set_depth(pp.port, pp.queue_packets, ent.PRIORITY_GUARANTEED)
                else:
                    queues.set_depth(pp.port, pp.queue_packets)
                if pp.schedule is not None:
                    await self._apply_rate(sw, plan, pp, self._target_bps(pp, t_s), queues, first=True)
        finally:
            queues.close()
        self.ready_count[sw.name] += 1  # counts sessions whose state is fully installed

    async def _apply_rate(self, sw: fy.Switch, plan: SwitchPlan, pp: PortPlan, rate_bps: float,
                          queues: QueueControl, first: bool = False,
                          queue_rate_bps: Optional[float] = None) -> Optional[float]:
        """Write `rate_bps` to the port's dataplane capacity and, when the switch
        shapes the link, `queue_rate_bps` (default: `rate_bps`) to its BMv2 queue;
        return the queue rate (packets/s), or None when the link's bwn-link applies
        the rate (capacity.csv: queue_pps and schedule_pps empty)."""
        entity = ent.port_capacity(pp.port, rate_bps, self.window)
        await (sw.insert([entity]) if first else sw.modify([entity]))
        pps: Optional[float] = None
        schedule_pps: Optional[float] = None
        if pp.shaped_by_switch:
            queue_bps = rate_bps if queue_rate_bps is None else queue_rate_bps
            pps = bmv2_queue_rate_pps(queue_bps, pp.frame_bytes)
            schedule_pps = bmv2_queue_rate_pps(rate_bps, pp.frame_bytes)
            if pp.guaranteed:
                queues.set_rate(pp.port, pps, ent.PRIORITY_GUARANTEED)
                queues.set_rate(pp.port, best_effort_pps(pp, queue_bps), 0)
            else:
                queues.set_rate(pp.port, pps)
            self.applied_queue_bps[(plan.name, pp.port)] = queue_bps
        self.applied_bps[(plan.name, pp.port)] = rate_bps
        self._log_rate(plan, pp, rate_bps, pps, schedule_pps)
        return pps

    def _reconnect_queues(self, plan: SwitchPlan, old: QueueControl) -> QueueControl:
        old.close()
        try:
            return self._queue_control(plan)
        except Exception:
            return old

    # -- periodic tasks -----------------------------------------------------------------
    async def _schedules(self) -> None:
        queues = {p.name: self._queue_control(p) for p in self.plans.values()}
        try:
            while True:
                await asyncio.sleep(self.schedule_interval_s)
                t = self.now_s()
                for sw in self.switches:
                    if not sw.is_up or self.ready_count[sw.name] == 0:
                        continue
                    plan = self.plans[sw.name]
                    for pp in plan.ports:
                        if pp.schedule is None:
                            continue
                        assert self._rate_lock is not None
                        async with self._rate_lock:  # not between a hand-set rate and its pin
                            rate = self._target_bps(pp, t)
                            queue_rate = self._queue_target_bps(plan, pp, t)
                            last = self.applied_bps.get((plan.name, pp.port))
                            last_queue = self.applied_queue_bps.get((plan.name, pp.port), last)
                            if last is not None and abs(rate - last) <= 0.005 * last and (
                                    last_queue is None or abs(queue_rate - last_queue) <= 0.005 * last_queue):
                                continue
                            try:
                                await self._apply_rate(sw, plan, pp, rate, queues[plan.name],
                                                       queue_rate_bps=queue_rate)
                            except Exception as exc:  # switch restarting: its ready handler will re-apply
                                LOG.warning("%s: could not apply rate on port %d: %s", sw.name, pp.port, exc)
                                queues[plan.name] = self._reconnect_queues(plan, queues[plan.name])
        finally:
            for q in queues.values():
                q.close()

    async def _telemetry(self, sw: fy.Switch) -> None:
        """Write the switch's telemetry digests (one per port and closed window) to
        telemetry.csv, at most one row per port per telemetry interval."""
        last_row_s: dict[int, float] = {}
        ports = {pp.port for pp in self.plans[sw.name].ports}
        while True:
            try:
                async for digest_list in sw.read_digests(ent.TELEMETRY_DIGEST):
                    await sw.write([digest_list.ack()])
                    self._record_telemetry(sw.name, [ent.PortTelemetry.from_digest(item) for item in digest_list],
                                           ports, last_row_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # session lost: the queue survives reconnects
                LOG.warning("%s: telemetry digest: %s", sw.name, exc)
                await asyncio.sleep(0.5)

    def _record_telemetry(self, switch: str, reports: list[ent.PortTelemetry], ports: set[int],
                          last_row_s: dict[int, float]) -> None:
        """Keep each report of `switch`'s ports as the port's latest, and write one
        row per port per telemetry interval to telemetry.csv."""
        t = self.now_s()
        for r in reports:
            if r.port in ports:
                end_s = self.switch_clocks[switch].observe(r.window_start_us, self.window.window_us, t)
                self.latest_telemetry[(switch, r.port)] = (r, end_s)
            if r.port not in ports or t - last_row_s.get(r.port, -1e9) < self.telemetry_interval_s:
                continue
            last_row_s[r.port] = t
            self._tel_csv.writerow([f"{t:.3f}", switch, r.port, r.capacity_kbps, r.rate_kbps,
                                    r.avail_kbps, r.queue_pkts, r.flows, r.ebn_code, r.window_start_us])
        self._tel_file.flush()

    # -- lifetime ----------------------------------------------------------------------
    async def run(self, duration_s: Optional[float] = None, ready: Optional[asyncio.Event] = None) -> None:
        """Run until `duration_s` elapses (or forever); `ready` is set once every
        switch has had its state installed."""
        self._rate_lock = asyncio.Lock()
        tasks = [await self._start_sessions()]
        try:
            while min(self.ready_count.values()) == 0:
                if tasks[0].done():
                    await tasks[0]
                await asyncio.sleep(0.05)
            self.t0 = self.clock()
            if ready is not None:
                ready.set()
            tasks += [asyncio.create_task(self._schedules(), name="schedules"),
                      *[asyncio.create_task(self._telemetry(sw), name=f"telemetry-{sw.name}")
                        for sw in self.switches]]
            if duration_s is None:
                await asyncio.gather(*tasks)
            else:
                done, _ = await asyncio.wait(tasks, timeout=duration_s, return_when=asyncio.FIRST_EXCEPTION)
                for t in done:
                    t.result()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._cap_file.close()
            self._tel_file.close()


    # -- changes by hand (on the controller's loop) -------------------------------------
    def links(self) -> list[str]:
        """Names of the links that have a port on some switch, in plan order."""
        return list(dict.fromkeys(pp.link for plan in self.plans.values() for pp in plan.ports))

    def _link_ports(self, link: str) -> list[tuple[fy.Switch, SwitchPlan, PortPlan]]:
        found = [(sw, self.plans[sw.name], pp) for sw in self.switches
                 for pp in self.plans[sw.name].ports if pp.link == link]
        if not found:
            raise KeyError(f"no link {link!r} on any switch; links: {', '.join(self.links())}")
        return found

    def _check_up(self, sw: fy.Switch) -> None:
        if not sw.is_up or self.ready_count[sw.name] == 0:
            raise RuntimeError(f"{sw.name} is not connected now; the change is kept and applied "
                               f"when its session is back")

    async def set_link_rate(self, link: str, rate_bps: Optional[float]) -> list[AppliedRate]:
        """Pin `link`'s capacity to `rate_bps` now, at each switch port that rate-limits it
        (the ports with a schedule), in the dataplane and the BMv2 queue; the link's
        schedule is paused while pinned. `rate_bps=None` lifts the pin: the schedule's
        current rate is applied and the schedule goes on."""
        ports = [(sw, plan, pp) for sw, plan, pp in self._link_ports(link) if pp.schedule is not None]
        if not ports:
            raise KeyError(f"link {link!r} has no rate-limited switch port (see its apply_at)")
        if not all(pp.shaped_by_switch for _, _, pp in ports):
            raise KeyError(f"link {link!r} is served at its rate by its bwn-link (shaper = \"link\"), "
                           f"which cannot change it during a run: restart with another rate, or "
                           f"use shaper = \"switch\"")
        if rate_bps is not None:
            dm.PortCapacity.from_bps(rate_bps, self.window.window_us)   # ConfigError if it cannot
        assert self._rate_lock is not None
        applied = []
        async with self._rate_lock:
            if rate_bps is None:
                self.pinned_bps.pop(link, None)
            else:
                self.pinned_bps[link] = rate_bps
            for sw, plan, pp in ports:
                self._check_up(sw)
                rate = self._target_bps(pp, self.now_s())
                queues = self._queue_control(plan)
                try:
                    pps = await self._apply_rate(sw, plan, pp, rate, queues)
                finally:
                    queues.close()
                applied.append(AppliedRate(sw.name, pp.port, rate, pps))
        return applied

    async def set_link_loss(self, link: str, probability: float) -> list[tuple[str, int, int]]:
        """Random loss `probability` now on every switch port that sends onto `link`
        (as the scenario's `loss`: the routes that leave by the port check it);
        returns (switch, port, routes changed) for each."""
        dm.loss_threshold(probability)   # ConfigError outside [0, 1]
        found = self._link_ports(link)
        for _, _, pp in found:
            pp.loss = probability   # kept: a reconnect re-installs the routes with it
        done = []
        for sw, plan, pp in found:
            self._check_up(sw)
            done.append((sw.name, pp.port, await self._write_routes(sw, plan, pp.port)))
        return done

    async def port_status(self) -> list[PortStatus]:
        now = self.now_s()
        rows = []
        for plan in self.plans.values():
            for pp in plan.ports:
                mode = ("unlimited" if pp.schedule is None
                        else "pinned" if pp.link in self.pinned_bps else "schedule")
                seen = self.latest_telemetry.get((plan.name, pp.port))
                rows.append(PortStatus(plan.name, pp.port, pp.link, mode,
                                       self.applied_bps.get((plan.name, pp.port)), pp.loss,
                                       None if seen is None else self.switch_clocks[plan.name].age_s(seen[1], now),
                                       None if seen is None else seen[0]))
        return rows


def best_effort_pps(pp: PortPlan, rate_bps: float) -> float:
    """Priority 0's rate at a guaranteed-service port: the port's rate less the
    reservations that leave by it (in-profile traffic is at most those, metered at
    the edge, and has priority 1 at the full rate), so both together stay within
    the rate; at least 1 packet/s."""
    return max(bmv2_queue_rate_pps(max(rate_bps - pp.reserved_bps, 0.0), pp.frame_bytes), 1.0)


def route_entries(plan: SwitchPlan, only_port: Optional[int] = None) -> list:
    """The routing entries of `plan` (those that leave by `only_port`, if given),
    each with the options of its egress port (loss, Assured Forwarding or the
    guaranteed service, RED) and whether this switch is the edge of a reservation
    to the route's destination."""
    ports = {pp.port: pp for pp in plan.ports}
    reserved_dsts = {r.dst for r in plan.reservations}
    out = []
    for prefix, port, dst_mac, src_mac in plan.routes:
        if only_port is not None and port != only_port:
            continue
        pp = ports.get(port)
        options = ent.PortOptions(loss=pp.loss if pp else 0.0,
                                  reservations=prefix.split("/")[0] in reserved_dsts,
                                  af_queue_packets=pp.af_queue_packets if pp else 0,
                                  guaranteed=pp.guaranteed if pp else False,
                                  red=pp.red is not None if pp else False)
        out += ent.route(prefix, port, dst_mac, src_mac, options)
    return out


def port_service_entries(plan: SwitchPlan) -> list:
    """Every port whose rate BMv2's queue applies is served in packets: its
    packets count one frame of `frame_bytes` each (the frame its packet rate is
    derived from) in what the port received. A port bwn-link shapes, or without
    a rate, counts bytes."""
    return [ent.port_service(pp.port, pp.frame_bytes) for pp in plan.ports
            if pp.schedule is not None and pp.shaped_by_switch]


def xr_entries(plan: SwitchPlan) -> list:
    """The XCP and RCP port entries of the switch's ports that run them."""
    out = []
    for pp in plan.ports:
        if pp.xcp is not None:
            out.append(ent.xcp_port(pp.port, pp.xcp))
        if pp.rcp is not None:
            out.append(ent.rcp_port(pp.port, pp.rcp))
    return out

