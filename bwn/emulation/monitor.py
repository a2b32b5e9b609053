"""The fidelity sampler: one thread in the runner's process, while the flows run.

It samples what the invariants of :mod:`bwn.analysis.fidelity` are judged from
(docs/fidelity.md), with the probes of :mod:`bwn.emulation.probes`: every
``interval_s`` the machine's CPU ticks (/proc/stat) and, for each rate-limited
egress port, its interface's ``tx_packets`` (on the eBPF switch, whose htb serves
bytes, ``tx_bytes`` in frames of the port's frame size) and the P4 program's
``queue_emptied`` counter; at the start and the end, each switch's interface
counters, P4 drop counters, receive-ring drops, every switch's and
bwn-link's CPU and run delay, and each egress port's counts of packets given,
sent, and dropped by RED and by Assured Forwarding (the end counts once the
queues have drained): the ``port_drops`` measurement. :meth:`Monitor.result` gathers these with the
controller's files (telemetry.csv, capacity.csv) and the bwn-links' statistics
into a :class:`bwn.analysis.fidelity.Recording` and judges it; the recording goes
into run.json with the verdict, so a run can be judged again from run.json alone.

Its own CPU time is measured and reported (``sampler``): two /proc reads, and a
counter read (Thrift for BMv2, libnikss for an eBPF switch) and a ``pread`` per
rate-limited port, per tick. The machine's busy and softirq CPU over the run
(``machine_cpu_s``) is where an eBPF switch's work shows: it has no process.
"""
from __future__ import annotations

import csv
import json
import os
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from bwn.analysis.fidelity import DEFAULT_THRESHOLDS, FidelityResult, Thresholds
from bwn.analysis.fidelity import Recording
from bwn.analysis.rejudge import judge, linkem_record, recorded_measurements
from bwn.emulation.probes import (
    CounterReader,
    NikssCounterReader,
    counter_reader,
    packet_socket_stats,
    process_cpu_s,
    process_run_delay_s,
    read_net_dev,
    read_cpu_times,
    read_p4_drops,
    read_port_counts,
    read_proc_stat,
)
from bwn.rundir import LINKEM_STATS_SUFFIX, RunDir
from bwn.protocol.dataplane_math import MAX_PORTS
from controller.entries import QUEUE_EMPTIED_COUNTER


@dataclass
class SwitchProbe:
    name: str
    pid: Optional[int]
    thrift_port: int
    intfs: list[str]                                   # its interfaces (root namespace)
    ports: dict[int, str] = field(default_factory=dict)  # port -> interface
    pipe_id: Optional[int] = None                        # an eBPF switch's NIKSS pipeline (no pid, no Thrift)


@dataclass
class PortSpec:
    switch: str
    port: int
    intf: str
    rate_limited: bool
    queue_packets: int
    link: str = ""
    # 0: the port is served in packets (BMv2's queue rate), departures are its
    # interface's tx_packets. Else it is served in bytes (the eBPF switch's htb)
    # and departures are its tx_bytes in frames of this size, the frame its
    # packets-per-second rate is derived from.
    frame_unit_bytes: int = 0


class Monitor:
    """Samples while a run's flows run; :meth:`result` judges the invariants.

    The runner calls ``start()`` when the switches are configured, ``stop()`` when
    the flows have ended (before anything is torn down) and ``result()`` when the
    link emulators have written their statistics."""

    def __init__(self, out_dir: Path, switches: Sequence[SwitchProbe], ports: Sequence[PortSpec],
                 linkem_stats: Sequence[Path] = (), linkem_pids: Mapping[str, int] | None = None,
                 interval_s: float = 0.1, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                 telemetry_interval_s: float = 0.25) -> None:
        self.out_dir = Path(out_dir)
        self.run_dir = RunDir(self.out_dir)
        self.switches = list(switches)
        self.ports = list(ports)
        self.linkem_stats = list(linkem_stats)
        self.linkem_pids = dict(linkem_pids or {})
        self.interval_s = interval_s
        self.thresholds = thresholds
        self.telemetry_interval_s = telemetry_interval_s
        self.time_origin_s = time.monotonic()   # the controller's t0: telemetry's time base
        self.cpu: list[tuple[float, float, float]] = []
        self.net: list[tuple[float, dict[str, tuple[int, int, int, int]]]] = []   # start, stop
        self.tx: dict[str, list[tuple[float, float]]] = defaultdict(list)        # port -> departures (frames)
        self._tx_unit: dict[str, int] = {}                                          # port -> frame_unit_bytes
        self._tx_fds: dict[str, int] = {}
        self.emptied: dict[str, list[tuple[float, int]]] = defaultdict(list)   # port -> queue_emptied
        self._counters: dict[str, tuple[CounterReader, str, int]] = {}    # port -> reader, counter, index
        self.sampler_cpu_s = 0.0
        self.sampler_ticks = 0
        self._intfs = [i for s in self.switches for i in s.intfs]
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._started_s = 0.0
        self._stopped_s = 0.0
        self._runner_cpu0 = 0.0
        self._p4_start: dict[str, Optional[dict[str, int]]] = {}
        self._p4_end: dict[str, Optional[dict[str, int]]] = {}
        self._ring: dict[str, Optional[tuple[int, int]]] = {}
        self._proc_cpu_start: dict[str, Optional[float]] = {}
        self._proc_cpu: dict[str, Optional[float]] = {}
        self._wait_start: dict[str, Optional[float]] = {}
        self._wait: dict[str, Optional[float]] = {}
        self._cpu_times: list[dict[str, float]] = []      # at start and at stop
        self._port_counts_start: dict[str, dict[str, int]] = {}    # "switch:port" -> counts
        self._port_counts_end: dict[str, dict[str, int]] = {}

    @classmethod
    def for_network(cls, out_dir: Path, built: Any, telemetry_interval_s: float,
                    thresholds: Thresholds = DEFAULT_THRESHOLDS) -> "Monitor":
        """A monitor for a :class:`bwn.emulation.runner.BuiltNetwork` (started)."""
        net = built.net
        probes, ports = [], []
        for plan in built.plans:
            sw = net.get(plan.name)
            intfs = {port: intf.name for port, intf in sw.intfs.items() if intf.name != "lo"}
            proc = getattr(sw, "proc", None)
            probes.append(SwitchProbe(plan.name, proc.pid if proc else None, plan.thrift_port,
                                      sorted(intfs.values()), intfs,
                                      pipe_id=plan.pipe_id if getattr(plan, "target", "bmv2") == "ebpf" else None))
            for pp in plan.ports:
                if pp.port in intfs:
                    # A port whose link's bwn-link serves the rate (shaper = "link") is
                    # not rate-limited: that rate is judged by bwn-link's lateness.
                    # The eBPF switch's htb serves bytes: its departures are counted
                    # in the frames its packet rate is derived from.
                    ebpf = getattr(plan, "target", "bmv2") == "ebpf"
                    ports.append(PortSpec(plan.name, pp.port, intfs[pp.port],
                                          pp.schedule is not None and pp.shaped_by_switch,
                                          pp.queue_packets, pp.link,
                                          frame_unit_bytes=pp.frame_bytes if ebpf else 0))
        stats = [RunDir(out_dir).linkem_stats(em.name) for em in built.linkem_nodes]
        pids = {em.name: em.linkem_proc.pid for em in built.linkem_nodes
                if getattr(em, "linkem_proc", None) is not None}
        group = getattr(built, "linkem_group", None)
        if group is not None and group.proc is not None:
            pids["bwn-links"] = group.proc.pid      # one process for every link
        return cls(out_dir, probes, ports, stats, pids, thresholds=thresholds,
                   telemetry_interval_s=telemetry_interval_s)

    # -- sampling ---------------------------------------------------------------------
    def start(self) -> None:
        self._port_counts_start = self._read_port_counts()
        for s in self.switches:
            self._p4_start[s.name] = read_p4_drops(s.thrift_port, s.pipe_id)
            if s.pid is not None:
                packet_socket_stats(s.pid)               # reset: count this run only
                self._proc_cpu_start[s.name] = process_cpu_s(s.pid)
                self._wait_start[s.name] = process_run_delay_s(s.pid)
        for name, pid in self.linkem_pids.items():
            self._proc_cpu_start[name] = process_cpu_s(pid)
            self._wait_start[name] = process_run_delay_s(pid)
        # Per tick: /proc/stat and, for each rate-limited port, the P4 program's
        # queue_emptied counter (one Thrift call) and then its tx_packets counter
        # through a file descriptor kept open (one pread).
        readers: dict[str, CounterReader | NikssCounterReader] = {}
        probes = {s.name: s for s in self.switches}
        for p in self.ports:
            if p.rate_limited:
                key = f"{p.switch}:{p.port}"
                try:
                    counter_file = "tx_bytes" if p.frame_unit_bytes > 0 else "tx_packets"
                    self._tx_fds[key] = os.open(f"/sys/class/net/{p.intf}/statistics/{counter_file}", os.O_RDONLY)
                    self._tx_unit[key] = p.frame_unit_bytes
                except OSError:
                    continue
                if p.switch in probes and p.switch not in readers:
                    reader = counter_reader(probes[p.switch].thrift_port, probes[p.switch].pipe_id)
                    if reader.open() and reader.read(QUEUE_EMPTIED_COUNTER, p.port % MAX_PORTS) is not None:
                        readers[p.switch] = reader
                    else:
                        reader.close()
                if p.switch in readers:
                    self._counters[key] = (readers[p.switch], QUEUE_EMPTIED_COUNTER, p.port % MAX_PORTS)
        self._started_s = time.monotonic()
        self._cpu_times = [read_cpu_times()]
        self._runner_cpu0 = time.process_time()
        if self._intfs:
            self.net.append((self._started_s, read_net_dev(self._intfs)))
        self._sample()
        self._thread = threading.Thread(target=self._run, name="fidelity", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        t = time.monotonic()
        total, idle = read_proc_stat()
        self.cpu.append((t, total, idle))
        for key, fd in self._tx_fds.items():
            counter = self._counters.get(key)
            emptied = counter[0].read(*counter[1:]) if counter else None
            # each port's own time, taken at its counter's read: the reads before it
            # (a Thrift or libnikss call per port, each letting the controller's
            # thread run) put the last ports of a tick milliseconds after its start
            t_port = time.monotonic()
            try:
                count = int(os.pread(fd, 32, 0))
            except (OSError, ValueError):
                continue
            unit = self._tx_unit.get(key, 0)
            self.tx[key].append((t_port, count / unit if unit > 0 else count))
            if emptied is not None:
                self.emptied[key].append((t_port, emptied))

    def _run(self) -> None:
        cpu0 = time.thread_time()
        try:
            while not self._stop.wait(self.interval_s):
                self._sample()
                self.sampler_ticks += 1
        finally:
            self.sampler_cpu_s = time.thread_time() - cpu0

    def _machine_cpu(self) -> Optional[dict[str, float]]:
        if len(self._cpu_times) < 2:
            return None
        a, b = self._cpu_times[0], self._cpu_times[-1]
        d = {k: b[k] - a[k] for k in a}
        return {"busy": round(sum(d.values()) - d["idle"] - d["iowait"], 2), "softirq": round(d["softirq"], 2),
                "system": round(d["system"], 2), "user": round(d["user"] + d["nice"], 2)}

    def stop(self) -> None:
        """End sampling and read the end counters (switches still running)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self._thread = None
        self._sample()
        self._stopped_s = time.monotonic()
        self._cpu_times.append(read_cpu_times())
        # the runner process: controller (P4Runtime, telemetry), this sampler, Mininet
        self._proc_cpu["runner"] = time.process_time() - self._runner_cpu0
        for fd in self._tx_fds.values():
            os.close(fd)
        self._tx_fds = {}
        for reader, _, _ in self._counters.values():
            reader.close()
        self._counters = {}
        if self._intfs:
            self.net.append((self._stopped_s, read_net_dev(self._intfs)))
        self._port_counts_end = settled(self._read_port_counts)
        for s in self.switches:
            self._p4_end[s.name] = read_p4_drops(s.thrift_port, s.pipe_id)
            self._ring[s.name] = packet_socket_stats(s.pid) if s.pid is not None else None
            if s.pid is not None:
                self._proc_cpu[s.name] = _delta(process_cpu_s(s.pid), self._proc_cpu_start.get(s.name))
                self._wait[s.name] = _delta(process_run_delay_s(s.pid), self._wait_start.get(s.name))
        for name, pid in self.linkem_pids.items():
            self._proc_cpu[name] = _delta(process_cpu_s(pid), self._proc_cpu_start.get(name))
            self._wait[name] = _delta(process_run_delay_s(pid), self._wait_start.get(name))

    def _read_port_counts(self) -> dict[str, dict[str, int]]:
        """Every port's counts now, "switch:port" -> counts (a port left out when its
        switch does not answer or its program has no such counters)."""
        out: dict[str, dict[str, int]] = {}
        # the eBPF switch (a NIKSS pipeline) has none of these counters (p4src/psa/README.md)
        thrift_ports = {s.name: s.thrift_port for s in self.switches if s.pipe_id is None}
        for switch in sorted({p.switch for p in self.ports}):
            if switch not in thrift_ports:
                continue
            reader = CounterReader(thrift_ports[switch])
            try:
                if not reader.open():
                    continue
                for p in self.ports:
                    if p.switch == switch:
                        counts = read_port_counts(reader, p.port % MAX_PORTS)
                        if counts is not None:
                            out[f"{p.switch}:{p.port}"] = counts
            finally:
                reader.close()
        return out

    def port_drops(self) -> dict[str, dict[str, Any]]:
        """Per port over the run: "link", "tail" (handed to the port less sent: its
        queue's tail drops, the queues being empty at both ends), "red" (RED's drops),
        "af" (AF drops), "drops" (their sum) and "marked" (RED's CE marks)."""
        out: dict[str, dict[str, Any]] = {}
        links = {f"{p.switch}:{p.port}": p.link for p in self.ports}
        for key, end in self._port_counts_end.items():
            start = self._port_counts_start.get(key)
            if start is None:
                continue
            d = {name: end[name] - start.get(name, 0) for name in end}
            tail = max(d["enqueued"] - d["dequeued"], 0)
            out[key] = {"link": links.get(key), "tail": tail, "red": d["red_dropped"], "af": d["af_dropped"],
                        "drops": tail + d["red_dropped"] + d["af_dropped"], "marked": d["red_marked"]}
        return out

    # -- judging ----------------------------------------------------------------------
    def _switch_counts(self) -> dict[str, dict[str, Any]]:
        out = {}
        first, last = (self.net[0][1], self.net[-1][1]) if self.net else ({}, {})
        for s in self.switches:
            rx = sum(last.get(i, (0,) * 4)[0] - first.get(i, (0,) * 4)[0] for i in s.intfs)
            tx = sum(last.get(i, (0,) * 4)[2] - first.get(i, (0,) * 4)[2] for i in s.intfs)
            p4 = None
            if self._p4_start.get(s.name) is not None and self._p4_end.get(s.name) is not None:
                p4 = {k: self._p4_end[s.name][k] - self._p4_start[s.name].get(k, 0)
                      for k in self._p4_end[s.name]}
            ring = self._ring.get(s.name)
            p4_total = sum(p4.values()) if p4 else 0
            out[s.name] = {"in_pkts": rx, "out_pkts": tx, "p4_drops": p4,
                           "ring_drops": ring[1] if ring else None,
                           # frames in minus out minus counted drops: egress-queue
                           # tail drops (the emulated congestion) and frames queued at stop
                           "queue_drops_est": rx - tx - p4_total - (ring[1] if ring else 0)}
        return out

    def _port_series(self) -> dict[str, dict[str, Any]]:
        telemetry = _read_csv(self.run_dir.telemetry_csv)
        capacity = _read_csv(self.run_dir.capacity_csv)
        origin = self.time_origin_s
        out = {}
        for p in self.ports:
            if not p.rate_limited:
                continue
            key = f"{p.switch}:{p.port}"
            tx = [(t - origin, n) for t, n in self.tx.get(key, [])]
            emptied = [(t - origin, n) for t, n in self.emptied.get(key, [])]
            queue = [(float(r["t_s"]), float(r["queue_pkts"])) for r in telemetry
                     if r.get("switch") == p.switch and _int(r.get("port")) == p.port and r.get("queue_pkts")]
            mine = [r for r in capacity if r.get("switch") == p.switch and _int(r.get("port")) == p.port]
            pps = sorted((float(r["t_s"]), float(r["queue_pps"])) for r in mine if r.get("queue_pps"))
            # The schedule's rate in packets/s: what the link should carry. It differs
            # from the rate written to the queue (pps) only under the controller's queue
            # look-ahead; files older than the column have only the written rate.
            schedule = sorted((float(r["t_s"]), float(r.get("schedule_pps") or r["queue_pps"]))
                              for r in mine if r.get("queue_pps"))
            queue.sort()
            out[key] = {"tx": tx, "queue": queue, "pps": pps, "schedule_pps": schedule,
                        "queue_capacity_pkts": p.queue_packets,
                        "link": p.link, "emptied": emptied, "tx_unit_bytes": p.frame_unit_bytes}
        return out

    def recording(self) -> Recording:
        """What the invariants are judged from: the samples, on the controller's clock,
        with the controller's files and the bwn-links' statistics (each cut to the
        figures the checks read)."""
        linkem = {}
        for path in self.linkem_stats:
            try:
                stats = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            linkem[path.name.removesuffix(LINKEM_STATS_SUFFIX)] = linkem_record(stats)
        cpu = [(t - self.time_origin_s, total, idle) for t, total, idle in self.cpu]
        return Recording(cpu, linkem, self._switch_counts(), self._port_series(), self.telemetry_interval_s)

    def result(self) -> FidelityResult:
        """The verdict, with the recording it was judged from and the measurements."""
        recording = self.recording()
        wall_s = max(self._stopped_s - self._started_s, 1e-9)
        measurements = {
            "wall_s": round(wall_s, 3),
            "interval_s": self.interval_s,
            "sampler": {"cpu_s": round(self.sampler_cpu_s, 4), "ticks": self.sampler_ticks,
                        "cpu_fraction": round(self.sampler_cpu_s / wall_s, 5),
                        "us_per_tick": round(1e6 * self.sampler_cpu_s / max(self.sampler_ticks, 1), 1)},
            "process_cpu_s": {k: (round(v, 2) if v is not None else None) for k, v in self._proc_cpu.items()},
            # the whole machine over the run (other jobs on it included): busy CPU and its
            # softirq part, where the eBPF switch and the veths' packet paths run
            "machine_cpu_s": self._machine_cpu(),
            # time the process's threads were runnable but had no CPU (not judged: evidence)
            "process_wait_s": {k: (round(v, 2) if v is not None else None) for k, v in self._wait.items()},
            # per egress port: tail, RED and AF drops and RED's marks (metric drops:LINKS)
            "port_drops": self.port_drops(),
            **recorded_measurements(recording),
        }
        return judge(recording, self.thresholds, measurements)


#: The end counts are read once no port has sent a packet for QUIET_S (its queue has
#: drained: nothing sends once the agents are stopped), at most after SETTLE_MAX_S.
QUIET_S = 0.3
SETTLE_POLL_S = 0.1
SETTLE_MAX_S = 5.0


def settled(read: Any, sleep: Any = time.sleep, clock: Any = time.monotonic) -> dict[str, dict[str, int]]:
    """``read()``'s port counts once every port's "dequeued" count has held still for
    QUIET_S (a packet still queued would be counted as a tail drop), or at SETTLE_MAX_S."""
    last = read()
    deadline = clock() + SETTLE_MAX_S
    still_since = clock()
    while clock() < deadline and clock() - still_since < QUIET_S:
        sleep(SETTLE_POLL_S)
        now = read()
        if {k: c["dequeued"] for k, c in now.items()} != {k: c["dequeued"] for k, c in last.items()}:
            still_since = clock()
        last = now
    return last


def _delta(end: Optional[float], start: Optional[float]) -> Optional[float]:
    return None if end is None or start is None else end - start


def _int(text: Any) -> Optional[int]:
    try:
        return int(float(text))
    except (TypeError, ValueError):
        return None


def _read_csv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))
