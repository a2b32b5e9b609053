"""Fidelity checks of one emulated run: did the machine keep up?

The idea is Mininet-HiFi's "network invariants" (Handigol et al., "Reproducible
network experiments using container-based emulation", CoNEXT 2012): an emulated
result means something only if, during the run, the emulator behaved like the
network it stands for. Every `bwn run` samples, while the flows run:

* **CPU**: the machine's idle share (/proc/stat, every ``interval_s``). When no
  CPU is idle, some process of the experiment is waiting for one.
* **bwn-link lateness**: how late each delay emulator released frames versus
  their due time (p50/p99/max per direction, from the histogram bwn-link writes
  into its ``--stats-json``; ``bwn.linkem.scheduler.lateness_summary``).
* **Switches**: packets in and out of every switch interface (/proc/net/dev),
  the P4 program's drop counters by reason (Thrift, start and end), frames the
  kernel dropped because the switch did not read its receive ring in time
  (``PACKET_STATISTICS`` of the switch's own packet sockets, read through
  ``pidfd_getfd``), the egress queue (telemetry digests, ``telemetry.csv``).
* **Departure rate**: each rate-limited egress port's packets out per second,
  while its queue was backlogged, against the rate the controller configured
  (``capacity.csv``, ``queue_pps``: BMv2 serves a rate in packets per second).
  Backlogged means the P4 program's ``queue_emptied`` counter (packets that left
  the port's queue empty behind them, Thrift, every tick) did not move.
  A link whose bwn-link serves its rate (the scenario's ``shaper = "link"``) has
  no rate-limited switch port: bwn-link's due times include each frame's
  serialization at the rate, so its lateness (above) judges that rate.
* **bwn-link offload drops**: frames each delay emulator dropped before its link
  model because it could not complete their offload state or they exceeded the
  egress MTU (``dropped_offload``, ``dropped_oversize`` in its ``--stats-json``).
* **bwn-link schedules**: a bwn-link serving a time-varying rate (steps, sine)
  had its schedule started with the flows (``schedule_started_s``).

The sampler is :mod:`bwn.emulation.monitor` (with the probes of
:mod:`bwn.emulation.probes`). This module is the judging, from the numbers
alone: the invariants and their thresholds (:class:`Thresholds`, justified in
``docs/fidelity.md``) are checked after the run on every sample they read, a
:class:`Recording`. ``run.json["fidelity"]`` holds the
verdict, each check's outcome and by how much a broken one missed, the
measurements, the version of the checks (:data:`CHECKS_VERSION`) and the
recording itself, so that a run is judged again from run.json alone when a
check is fixed (:mod:`bwn.analysis.rejudge`). A run with a broken invariant is
INVALID: the report marks it in every table and plot and ``bwn reproduce``
never averages it.
"""
from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Optional, Sequence


#: The version of the checks below, recorded in run.json with each verdict. Raise it
#: with any change that can change a verdict (a check's logic, a threshold, what a
#: recording holds), and say what changed in CHANGELOG.md. Runs without one were
#: judged before run.json recorded the version and the measurements: they cannot be
#: judged again.
CHECKS_VERSION = 1

# ---------------------------------------------------------------------------------------
# Thresholds and results


@dataclass(frozen=True)
class Thresholds:
    """Limits of the invariants (docs/fidelity.md says why each is where it is)."""

    lateness_p99_us: float = 1000.0        # bwn-link: p99 of release lateness, each direction
    lateness_min_frames: int = 100         # directions with fewer frames are not judged
    rate_tolerance: float = 0.05           # |departed / configured - 1| while backlogged
    rate_min_expected_pkts: float = 100.0  # a backlogged stretch is judged if >= this many were due
    backlog_min_pkts: int = 2              # queue depth at both telemetry samples of an interval
    cpu_idle_floor: float = 0.01           # a sample with idle share <= this is "no CPU idle"
    cpu_saturated_max_s: float = 1.0       # longest tolerated stretch of such samples
    switch_ring_drop_max_frac: float = 0.0  # kernel drops at a switch's receive rings / frames in
    linkem_offload_drops_max: int = 0      # frames a bwn-link dropped for offload state or size


DEFAULT_THRESHOLDS = Thresholds()

#: The invariants, in report order.
INVARIANTS = ("cpu", "linkem_lateness", "switch_rx_drops", "departure_rate", "linkem_offload_drops",
              "linkem_schedule")

#: bwn-link's counters of frames it dropped before its link model: offload state it
#: could not complete, and frames longer than the egress MTU (docs/linkem.md).
LINKEM_OFFLOAD_COUNTERS = ("dropped_offload", "dropped_oversize")


@dataclass
class Check:
    """One invariant's outcome. ``held`` is None when there was nothing to judge."""

    name: str
    held: Optional[bool]
    value: Optional[float] = None          # the measured figure the limit applies to
    limit: Optional[float] = None
    unit: str = ""
    detail: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)

    @property
    def broken(self) -> bool:
        return self.held is False

    def describe(self) -> str:
        """One line: e.g. ``cpu: 2.40 s > 1 s without idle CPU (...)``."""
        if self.held is None:
            return f"{self.name}: not measured ({self.detail})" if self.detail else f"{self.name}: not measured"
        status = "held" if self.held else "BROKEN"
        return f"{self.name}: {status}: {self.detail}" if self.detail else f"{self.name}: {status}"


DIRECTIONS = ("a_to_b", "b_to_a")   # a bwn-link's --stats-json, per direction
PORT_SERIES = ("tx", "emptied", "queue", "pps", "schedule_pps")


class FidelityRecordError(ValueError):
    """A run whose verdict cannot be judged again; the message says why."""


@dataclass
class Recording:
    """What the invariants read, on the controller's clock (s since its t0).

    ``cpu``: (t_s, total ticks, idle ticks), cumulative as in /proc/stat;
    ``linkem``: emulator -> its statistics as :func:`bwn.analysis.rejudge.linkem_record` keeps them;
    ``switches``: name -> {"in_pkts", "out_pkts", "ring_drops", "p4_drops",
    "queue_drops_est"}; ``ports``: "switch:port" -> {"tx", "emptied", "queue",
    "pps", "schedule_pps": [(t_s, value)], "queue_capacity_pkts", "link"}, as
    :func:`bwn.analysis.fidelity.departure_rate_check` takes them;
    ``telemetry_interval_s``: the telemetry's period (the gap a backlog may span)."""

    cpu: list[tuple[float, float, float]]
    linkem: dict[str, dict[str, Any]]
    switches: dict[str, dict[str, Any]]
    ports: dict[str, dict[str, Any]]
    telemetry_interval_s: float

    def to_json(self) -> dict[str, Any]:
        return {"telemetry_interval_s": self.telemetry_interval_s,
                "cpu": [list(s) for s in self.cpu],
                "linkem": self.linkem, "switches": self.switches,
                "ports": {key: {k: ([list(p) for p in v] if k in PORT_SERIES else v)
                                for k, v in port.items()}
                          for key, port in self.ports.items()}}

    @classmethod
    def from_json(cls, data: Any) -> "Recording":
        """A recording as run.json holds it; FidelityRecordError if it is not one."""
        if not isinstance(data, Mapping):
            raise FidelityRecordError("the recording is not an object")
        missing = [k for k in ("telemetry_interval_s", "cpu", "linkem", "switches", "ports") if k not in data]
        if missing:
            raise FidelityRecordError(f"the recording lacks {', '.join(missing)}")
        try:
            cpu = [(t, total, idle) for t, total, idle in data["cpu"]]
            ports = {str(key): {k: ([(t, v) for t, v in value] if k in PORT_SERIES else value)
                                for k, value in port.items()}
                     for key, port in data["ports"].items()}
            return cls(cpu, dict(data["linkem"]), dict(data["switches"]), ports,
                       float(data["telemetry_interval_s"]))
        except (TypeError, ValueError, AttributeError) as exc:
            raise FidelityRecordError(f"the recording is malformed: {exc}") from None


@dataclass
class FidelityResult:
    checks: list[Check]
    thresholds: Thresholds = DEFAULT_THRESHOLDS
    measurements: dict[str, Any] = field(default_factory=dict)
    recording: Optional[Recording] = None      # what the checks were given

    @property
    def valid(self) -> bool:
        return not any(c.broken for c in self.checks)

    @property
    def broken(self) -> list[Check]:
        return [c for c in self.checks if c.broken]

    def summary(self) -> str:
        """``valid`` or ``INVALID: <check>: ...; <check>: ...``."""
        if self.valid:
            return "valid"
        return "INVALID: " + "; ".join(c.describe() for c in self.broken)

    def to_json(self) -> dict[str, Any]:
        """run.json's ``fidelity``."""
        out = {"valid": self.valid, "summary": self.summary(),
               "broken": [c.name for c in self.broken],
               "checks": {c.name: asdict(c) for c in self.checks},
               "thresholds": asdict(self.thresholds),
               "measurements": self.measurements,
               "checks_version": CHECKS_VERSION}
        if self.recording is not None:
            out["recorded"] = self.recording.to_json()
        return out



# ---------------------------------------------------------------------------------------
# The invariants, as pure functions of samples (tests feed them synthetic ones)


def cpu_check(samples: Sequence[tuple[float, float, float]], th: Thresholds = DEFAULT_THRESHOLDS) -> Check:
    """``samples``: (t_s, total_ticks, idle_ticks), cumulative as in /proc/stat.

    Each interval between two samples has an idle share ``d_idle / d_total``; a
    stretch of consecutive intervals at or below ``cpu_idle_floor`` counts as
    saturated. Broken when the longest such stretch exceeds ``cpu_saturated_max_s``."""
    if len(samples) < 2:
        return Check("cpu", None, detail="fewer than 2 CPU samples")
    longest_s = current_s = 0.0
    busy_shares = []
    start_of_longest = None
    current_start = None
    for (t0, tot0, idle0), (t1, tot1, idle1) in zip(samples, samples[1:]):
        d_total = tot1 - tot0
        if d_total <= 0 or t1 <= t0:
            continue
        idle_share = max(0.0, min(1.0, (idle1 - idle0) / d_total))
        busy_shares.append(1.0 - idle_share)
        if idle_share <= th.cpu_idle_floor:
            if current_s == 0.0:
                current_start = t0
            current_s += t1 - t0
            if current_s > longest_s:
                longest_s, start_of_longest = current_s, current_start
        else:
            current_s = 0.0
    if not busy_shares:
        return Check("cpu", None, detail="no CPU ticks between samples")
    mean_busy = sum(busy_shares) / len(busy_shares)
    longest_s = round(longest_s, 6)     # sums of sample intervals: no float dust at the limit
    held = longest_s <= th.cpu_saturated_max_s
    where = f" from t={start_of_longest:.1f} s" if start_of_longest is not None and longest_s > 0 else ""
    return Check("cpu", held, round(longest_s, 3), th.cpu_saturated_max_s, "s",
                 f"longest stretch without idle CPU {longest_s:.2f} s{where} "
                 f"({'<=' if held else '>'} {th.cpu_saturated_max_s:g} s); mean CPU busy {mean_busy:.0%}",
                 [{"mean_busy": round(mean_busy, 4), "max_busy": round(max(busy_shares), 4),
                   "samples": len(samples)}])


def lateness_check(linkem_stats: Mapping[str, Mapping[str, Any]],
                   th: Thresholds = DEFAULT_THRESHOLDS) -> Check:
    """``linkem_stats``: emulator name -> its bwn-link ``--stats-json`` content.
    Broken when any direction that released at least ``lateness_min_frames``
    frames has p99 lateness above ``lateness_p99_us``."""
    items = []
    for name, stats in sorted(linkem_stats.items()):
        for direction in ("a_to_b", "b_to_a"):
            late = (stats.get(direction) or {}).get("lateness")
            if not late:
                continue
            items.append({"emulator": name, "direction": direction, "frames": late.get("frames", 0),
                          "p50_us": late.get("p50_us"), "p99_us": late.get("p99_us"),
                          "max_us": late.get("max_us"), "beyond": bool(late.get("p99_us_beyond_span"))})
    judged = [i for i in items if i["frames"] >= th.lateness_min_frames and i["p99_us"] is not None]
    if not judged:
        why = "no bwn-link in this scenario" if not linkem_stats else \
            f"no direction released {th.lateness_min_frames} frames with a lateness record"
        return Check("linkem_lateness", None, limit=th.lateness_p99_us, unit="us", detail=why, items=items)
    worst = max(judged, key=lambda i: i["p99_us"])
    bad = [i for i in judged if i["p99_us"] > th.lateness_p99_us]
    held = not bad
    detail = (f"worst p99 {'>= ' if worst.get('beyond') else ''}{worst['p99_us']:.0f} us "
              f"({worst['emulator']} {worst['direction']}, "
              f"max {worst['max_us']:.0f} us) {'<=' if held else '>'} {th.lateness_p99_us:g} us")
    if bad:
        detail += f"; {len(bad)} of {len(judged)} directions over"
    return Check("linkem_lateness", held, worst["p99_us"], th.lateness_p99_us, "us", detail, items)


def switch_drop_check(switches: Mapping[str, Mapping[str, Any]],
                      th: Thresholds = DEFAULT_THRESHOLDS) -> Check:
    """``switches``: name -> {"in_pkts", "out_pkts", "ring_drops" (None: unreadable),
    "p4_drops": {...}}. Broken when a switch's receive-ring drops exceed
    ``switch_ring_drop_max_frac`` of the frames it was offered."""
    items = []
    worst_frac = None
    worst_name = None
    for name, s in sorted(switches.items()):
        item = dict(s)
        item["switch"] = name
        drops = s.get("ring_drops")
        offered = (s.get("in_pkts") or 0)
        if drops is not None:
            frac = drops / offered if offered > 0 else (1.0 if drops else 0.0)
            item["ring_drop_frac"] = round(frac, 6)
            if worst_frac is None or frac > worst_frac:
                worst_frac, worst_name = frac, name
        items.append(item)
    if worst_frac is None:
        return Check("switch_rx_drops", None, limit=th.switch_ring_drop_max_frac,
                     detail="the switches' receive-ring statistics could not be read", items=items)
    held = worst_frac <= th.switch_ring_drop_max_frac
    total = sum(i.get("ring_drops") or 0 for i in items)
    detail = (f"{total} frames dropped by the kernel before a switch read them "
              f"(worst {worst_name}: {worst_frac:.3%} of its input; limit {th.switch_ring_drop_max_frac:.3%})")
    return Check("switch_rx_drops", held, worst_frac, th.switch_ring_drop_max_frac, "fraction", detail, items)


def linkem_offload_drops(linkem_stats: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One item per emulator direction whose stats carry the offload counters
    (bwn-link from before them has none): emulator, direction, received frames,
    ``dropped_offload``, ``dropped_oversize``."""
    items = []
    for name, stats in sorted(linkem_stats.items()):
        for direction in ("a_to_b", "b_to_a"):
            d = stats.get(direction) or {}
            if not any(k in d for k in LINKEM_OFFLOAD_COUNTERS):
                continue
            item: dict[str, Any] = {"emulator": name, "direction": direction, "rx_frames": d.get("rx_frames")}
            for key in LINKEM_OFFLOAD_COUNTERS:
                item[key] = int(d.get(key) or 0)
            items.append(item)
    return items


def linkem_offload_check(linkem_stats: Mapping[str, Mapping[str, Any]],
                         th: Thresholds = DEFAULT_THRESHOLDS) -> Check:
    """Broken when the bwn-link emulators together dropped more than
    ``linkem_offload_drops_max`` frames (0) for their offload state
    (``dropped_offload``) or their size (``dropped_oversize``): losses the
    scenario never asked for (docs/fidelity.md, invariant 5)."""
    items = linkem_offload_drops(linkem_stats)
    if not items:
        why = "no bwn-link in this scenario" if not linkem_stats else \
            "the bwn-link statistics carry no offload counters"
        return Check("linkem_offload_drops", None, limit=th.linkem_offload_drops_max, unit="frames",
                     detail=why, items=items)
    totals = {key: sum(i[key] for i in items) for key in LINKEM_OFFLOAD_COUNTERS}
    total = sum(totals.values())
    held = total <= th.linkem_offload_drops_max
    detail = (f"{total} frames dropped by bwn-link before its link model "
              f"(dropped_offload {totals['dropped_offload']}, dropped_oversize {totals['dropped_oversize']})")
    if total:
        worst = max(items, key=lambda i: sum(i[k] for k in LINKEM_OFFLOAD_COUNTERS))
        detail += f"; most at {worst['emulator']} {worst['direction']}"
    detail += f" ({'<=' if held else '>'} {th.linkem_offload_drops_max})"
    return Check("linkem_offload_drops", held, float(total), float(th.linkem_offload_drops_max), "frames",
                 detail, items)


def linkem_schedule_check(linkem_stats: Mapping[str, Mapping[str, Any]]) -> Check:
    """Broken when a bwn-link serving a time-varying rate (``--rate-schedule``,
    kind steps or sine) never had the schedule started (its stats'
    ``schedule_started_s`` is null): its rate then stayed at the schedule's time 0
    while the switches stamped the schedule (docs/fidelity.md, invariant 6)."""
    items = []
    for name, stats in sorted(linkem_stats.items()):
        for direction in ("a_to_b", "b_to_a"):
            table = ((stats.get(direction) or {}).get("config") or {}).get("rate_schedule")
            if table and table.get("kind") != "constant":
                items.append({"emulator": name, "direction": direction, "kind": table.get("kind"),
                              "started_s": stats.get("schedule_started_s")})
    if not items:
        return Check("linkem_schedule", None, unit="links",
                     detail="no bwn-link serves a time-varying rate", items=items)
    missed = [i for i in items if i["started_s"] is None]
    never = ", ".join(f"{i['emulator']} {i['direction']}" for i in missed)
    detail = (f"{len(items) - len(missed)} of {len(items)} time-varying bwn-link rates started"
              + (f"; never started: {never}" if missed
                 else f" (at {max(i['started_s'] for i in items):.3f} s at the latest)"))
    return Check("linkem_schedule", not missed, float(len(missed)), 0.0, "links", detail, items)


def integral_steps(points: Sequence[tuple[float, float]], t0: float, t1: float) -> float:
    """Integral over [t0, t1] of the step function through ``points`` (t, value),
    sorted by t; the first value also holds before the first point."""
    if t1 <= t0 or not points:
        return 0.0
    total = 0.0
    for i, (t, value) in enumerate(points):
        start = t if i > 0 else -float("inf")
        end = points[i + 1][0] if i + 1 < len(points) else float("inf")
        overlap = min(end, t1) - max(start, t0)
        if overlap > 0:
            total += value * overlap
    return total


def backlogged_stretches(queue: Sequence[tuple[float, float]], min_pkts: float,
                         max_gap_s: float) -> list[tuple[float, float]]:
    """Maximal [start, end] spans over which consecutive queue samples (t, pkts),
    at most ``max_gap_s`` apart, all held at least ``min_pkts``."""
    spans: list[tuple[float, float]] = []
    start = None
    prev_t = None
    for t, q in queue:
        ok = q is not None and q >= min_pkts
        if ok and start is not None and prev_t is not None and t - prev_t <= max_gap_s:
            spans[-1] = (start, t)
        elif ok:
            start = t
            spans.append((t, t))
        else:
            start = None
        prev_t = t
    return [(a, b) for a, b in spans if b > a]


def busy_stretches(samples: Sequence[tuple[float, int, int]], max_gap_s: float) -> list[tuple[float, float]]:
    """[start, end] spans over which a port certainly never ran dry, from ticks
    ``(t, tx_packets, queue_emptied)`` sorted by t.

    ``queue_emptied`` counts the packets that left the port's queue empty behind
    them. Over ticks i..j at most ``max_gap_s`` apart with the count unchanged,
    every departure had a successor already waiting, so the port sent back to
    back (at its configured rate) from its first departure in the run to t_j.
    Whether it was busy before that first departure is unknown (the queue may
    have been empty at t_i), so a span starts at the first tick after a
    departure: a packet that leaves an empty queue splits spans, and an idle
    port never starts one. The interface's counter also counts frames that did
    not come through the switch's queue (the kernel's own, a race with the
    run's teardown), so one departure is not enough to open a span: the next
    interval must have departures too (a stall that begins in a span's very
    first interval is missed; one that lasts into the next is not)."""
    spans: list[tuple[float, float]] = []
    busy_from = None       # a confirmed span's start
    candidate = None       # first tick after a departure, awaiting a second one
    for k, (t, tx, emptied) in enumerate(samples):
        if k == 0 or emptied != samples[k - 1][2] or t - samples[k - 1][0] > max_gap_s:
            if busy_from is not None and samples[k - 1][0] > busy_from:
                spans.append((busy_from, samples[k - 1][0]))
            busy_from = candidate = None
            continue
        if busy_from is not None:
            continue
        moved = tx > samples[k - 1][1]
        if candidate is not None:
            busy_from, candidate = (candidate, None) if moved else (None, None)
        elif moved:
            candidate = t
    if busy_from is not None and samples and samples[-1][0] > busy_from:
        spans.append((busy_from, samples[-1][0]))
    return spans


def steady_windows(pps: Sequence[tuple[float, float]], queue_capacity_pkts: float) -> list[tuple[float, float, float]]:
    """(start, end, packets/s) spans over which a port's configured rate held.

    BMv2 fixes a packet's departure time when it is enqueued (behavioral-model
    ``QueueingLogicPriRL``: ``max(now, last_sent + 1/rate)``), so after a rate
    change the packets already queued still leave at the old rate, for up to a
    full queue's drain time. Each span therefore starts that long after its
    change: ``queue_capacity / min(old rate, new rate)``. The first rate holds
    from the start."""
    out = []
    for i, (t, rate) in enumerate(pps):
        end = pps[i + 1][0] if i + 1 < len(pps) else float("inf")
        lag = 0.0
        if i > 0:
            slower = min(rate, pps[i - 1][1])
            lag = queue_capacity_pkts / slower if slower > 0 else float("inf")
        start = -float("inf") if i == 0 else t + lag
        if end > start and rate > 0:
            out.append((start, end, rate))
    return out


def departure_rate_check(ports: Mapping[str, Mapping[str, Any]], th: Thresholds = DEFAULT_THRESHOLDS,
                         max_gap_s: float = 1.0) -> Check:
    """``ports``: "switch:port" -> {"tx": [(t, tx_packets)], "queue": [(t, queue_pkts)],
    "pps": [(t, configured packets/s)], "queue_capacity_pkts": N,
    "emptied": [(t, queue_emptied)]}, all on one time base; "emptied" is read at
    the same ticks as "tx".

    Backlogged stretches come from the ``queue_emptied`` counter
    (:func:`busy_stretches`: exact, at the tick's resolution) when the port has
    it; otherwise from the telemetry's queue samples (:func:`backlogged_stretches`:
    a queue that drains and refills between two samples passes for backlogged,
    a false alarm the counter removes). Within each stretch and each span of
    steady configured rate
    (:func:`steady_windows`) in which at least ``rate_min_expected_pkts`` packets
    were due, compares the packets that left with the rate times the time. Broken
    when any such piece is off by more than ``rate_tolerance``."""
    items = []
    worst_dev = None
    worst = None
    for key, p in sorted(ports.items()):
        tx, queue, pps = p.get("tx") or [], p.get("queue") or [], p.get("pps") or []
        if not tx or not pps:
            continue
        windows = steady_windows(pps, float(p.get("queue_capacity_pkts") or 0))
        departed_sum = expected_sum = 0.0
        stretches = []
        tx_times = [t for t, _ in tx]
        emptied = p.get("emptied") or []
        if emptied and len(emptied) == len(tx):
            basis = "queue_emptied"
            spans = busy_stretches([(t, n, e) for (t, n), (_, e) in zip(tx, emptied)], max_gap_s)
        else:
            basis = "queue_samples"
            spans = backlogged_stretches(queue, th.backlog_min_pkts, max_gap_s)
        for s0, s1 in spans:
            for w0, w1, rate in windows:
                a0, b0 = max(s0, w0), min(s1, w1)
                if b0 <= a0:
                    continue
                # The counter's own samples inside the piece: no interpolation
                # across a change of rate at its edges.
                i, j = bisect.bisect_left(tx_times, a0), bisect.bisect_right(tx_times, b0) - 1
                if j <= i:
                    continue
                (a, tx_a), (b, tx_b) = tx[i], tx[j]
                expected = rate * (b - a)
                if expected < th.rate_min_expected_pkts:
                    continue
                departed = tx_b - tx_a
                ratio = departed / expected
                stretches.append({"t0_s": round(a, 3), "t1_s": round(b, 3), "departed": round(departed, 1),
                                  "expected": round(expected, 1), "ratio": round(ratio, 4)})
                departed_sum += departed
                expected_sum += expected
                if worst_dev is None or abs(ratio - 1) > worst_dev:
                    worst_dev, worst = abs(ratio - 1), (key, stretches[-1])
        if stretches:
            items.append({"port": key, "backlog_from": basis, "stretches": len(stretches),
                          "ratio_all": round(departed_sum / expected_sum, 4),
                          "worst_ratio": min((s["ratio"] for s in stretches), key=lambda r: -abs(r - 1)),
                          "backlogged_s": round(sum(s["t1_s"] - s["t0_s"] for s in stretches), 3),
                          "detail": stretches[:20]})
    if worst is None:
        return Check("departure_rate", None, limit=th.rate_tolerance,
                     detail=f"no port was backlogged at a steady rate long enough for "
                            f"{th.rate_min_expected_pkts:g} packets", items=items)
    held = worst_dev <= th.rate_tolerance
    key, s = worst
    detail = (f"worst stretch {key} t={s['t0_s']:.1f}-{s['t1_s']:.1f} s: {s['departed']:.0f} packets left "
              f"of {s['expected']:.0f} due (ratio {s['ratio']:.3f}, |deviation| {worst_dev:.1%} "
              f"{'<=' if held else '>'} {th.rate_tolerance:.0%})")
    return Check("departure_rate", held, round(worst_dev, 4), th.rate_tolerance, "fraction", detail, items)


def evaluate(cpu: Sequence[tuple[float, float, float]], linkem_stats: Mapping[str, Mapping[str, Any]],
             switches: Mapping[str, Mapping[str, Any]], ports: Mapping[str, Mapping[str, Any]],
             th: Thresholds = DEFAULT_THRESHOLDS, measurements: Optional[dict[str, Any]] = None,
             telemetry_interval_s: float = 0.25) -> FidelityResult:
    """Every invariant, on samples as a :class:`Recording` holds them (each argument
    is one of its fields)."""
    checks = [cpu_check(cpu, th), lateness_check(linkem_stats, th), switch_drop_check(switches, th),
              departure_rate_check(ports, th, max_gap_s=max(1.0, 4 * telemetry_interval_s)),
              linkem_offload_check(linkem_stats, th), linkem_schedule_check(linkem_stats)]
    return FidelityResult(checks, th, measurements or {})
