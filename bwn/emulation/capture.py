"""Packet captures of an experiment's bottleneck links (`bwn run --pcap`).

Which links: the scenario's ``[capture] links``, else the bottleneck of every
flow (:func:`bwn.scenario.flowpaths.bottleneck_links`: on each flow's path, the
rate-limited links with the lowest mean capacity over the run; ties are all
captured, e.g. the three links of the parking lot).

Where: on the link's switch end, in the root namespace where Mininet keeps the
switches' interfaces, preferring an end whose egress applies the schedule (so the
capture sees the rate-limited direction as it leaves the queue, and the other
direction as it arrives). Both directions are in one file.

What: ``tcpdump`` with a snap length of :data:`SNAP_BYTES` (headers only: no DATA
payload is kept), packet-buffered (``-U``) so that an interrupted run still leaves
a readable file. Each tcpdump is started before the flows and stopped (SIGINT, so
it flushes and writes its statistics) when the run ends, whatever the way it ends;
it also gets SIGTERM from the kernel if the runner itself dies (``setpriv
--pdeathsig``), so no capture outlives its run.
"""
from __future__ import annotations

import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from bwn import requirements
from bwn.rundir import RunDir
from bwn.scenario.resolved import ExperimentConfig, LinkConfig
from bwn.scenario.flowpaths import bottleneck_links

# Ethernet 14 + IPv4 20 + UDP 8 + BWN 24 + transport 36 = 102 bytes of headers in
# every packet of the agents; 96 more keep the transport's options (hdr_words > 9:
# 4 SACK blocks take 68 bytes, RCV_STATS 20) and at most 96 bytes of a DATA
# segment's payload.
HEADERS_BYTES = 14 + 20 + 8 + 24 + 36
OPTIONS_ROOM_BYTES = 96
SNAP_BYTES = HEADERS_BYTES + OPTIONS_ROOM_BYTES
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0


class CaptureError(RuntimeError):
    """A capture could not start; the message says which and why."""


@dataclass
class CapturePoint:
    link: str
    node: str                 # the switch whose interface is captured
    interface: str            # its name in the root namespace, e.g. "s1-eth2"
    path: Path

    def as_json(self, run_dir: Path) -> dict[str, str]:
        return {"node": self.node, "interface": self.interface,
                "file": str(self.path.relative_to(run_dir))}


def capture_links(cfg: ExperimentConfig, duration_s: float) -> list[str]:
    """The links to capture: the scenario's ``[capture] links``, else the bottlenecks."""
    if cfg.capture_links is not None:
        return list(cfg.capture_links)
    return bottleneck_links(cfg, duration_s)


def capture_end(cfg: ExperimentConfig, link: LinkConfig) -> str:
    """The switch end of ``link`` to capture on: one that applies the schedule if any."""
    switches = [n for n in (link.a, link.b) if cfg.is_switch(n)]
    applying = [n for n in switches if n in link.apply_at]
    return (applying or switches)[0]


def plan(cfg: ExperimentConfig, ends: dict[str, tuple[Any, Any]], out_dir: Path,
         duration_s: float) -> list[CapturePoint]:
    """Capture points of a built network (``BuiltNetwork.ends``: link -> (a intf, b intf))."""
    points = []
    for name in capture_links(cfg, duration_s):
        link = cfg.link(name)
        node = capture_end(cfg, link)
        intf = ends[name][0] if node == link.a else ends[name][1]
        points.append(CapturePoint(name, node, str(intf.name), RunDir(out_dir).capture_file(name)))
    return points


@dataclass
class _Running:
    point: CapturePoint
    proc: subprocess.Popen
    lines: list[str] = field(default_factory=list)
    settled: threading.Event = field(default_factory=threading.Event)   # listening, or exited
    listening: bool = False
    reader: Optional[threading.Thread] = None


class Captures:
    """tcpdump on every capture point, as a context manager::

        with Captures(points) as captures:
            ...                                   # the experiment
        captures.stats                            # per link: packets, drops

    ``prefix`` runs tcpdump through a command (tests: ``ip netns exec NS``).
    """

    def __init__(self, points: Sequence[CapturePoint], prefix: Sequence[str] = ()) -> None:
        self.points = list(points)
        self.prefix = list(prefix)
        self.running: list[_Running] = []
        self.stats: dict[str, dict[str, Any]] = {}

    def __enter__(self) -> "Captures":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def command(self, point: CapturePoint) -> list[str]:
        guard = ["setpriv", "--pdeathsig", "TERM", "--"] if shutil.which("setpriv") else []
        return guard + self.prefix + [
            "tcpdump", "-i", point.interface, "-s", str(SNAP_BYTES), "-U", "-n",
            "-Z", "root",                  # Debian's tcpdump would switch to user tcpdump
            "-w", str(point.path)]

    def start(self) -> None:
        why = requirements.tcpdump_missing()
        if why and self.points:
            raise CaptureError(why)
        for point in self.points:
            point.path.parent.mkdir(parents=True, exist_ok=True)
            proc = subprocess.Popen(self.command(point), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            running = _Running(point, proc)
            running.reader = threading.Thread(target=self._read, args=(running,),
                                              name=f"tcpdump-{point.link}", daemon=True)
            running.reader.start()
            self.running.append(running)
        deadline = time.monotonic() + START_TIMEOUT_S
        for running in self.running:
            # tcpdump says "listening on IF" once the socket is open: packets from now on are kept.
            running.settled.wait(max(deadline - time.monotonic(), 0.0))
            if not running.listening:
                raise CaptureError(f"tcpdump on {running.point.interface} (link "
                                   f"{running.point.link}) did not start: "
                                   f"{' '.join(running.lines[-3:]) or 'no output'}")

    @staticmethod
    def _read(running: _Running) -> None:
        assert running.proc.stderr is not None
        for line in running.proc.stderr:
            running.lines.append(line.rstrip())
            if "listening on" in line:
                running.listening = True
                running.settled.set()
        running.settled.set()            # it exited: start() reports its last words

    def stop(self) -> None:
        """SIGINT every tcpdump (it flushes the file), then SIGKILL what is left."""
        for running in self.running:
            if running.proc.poll() is None:
                running.proc.send_signal(signal.SIGINT)
        for running in self.running:
            try:
                running.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                running.proc.kill()
                running.proc.wait(STOP_TIMEOUT_S)
            if running.reader is not None:
                running.reader.join(STOP_TIMEOUT_S)
            self.stats[running.point.link] = {**_counts(running.lines),
                                              "exit_code": running.proc.returncode}
        self.running = []


_COUNT = re.compile(r"^(\d+) packets? (captured|received by filter|dropped by kernel)")


def _counts(lines: list[str]) -> dict[str, int]:
    """tcpdump's closing statistics ("12 packets captured", ...)."""
    out = {}
    for line in lines:
        match = _COUNT.match(line)
        if match:
            out[match.group(2).replace(" ", "_")] = int(match.group(1))
    return out


def start_for_run(cfg: ExperimentConfig, ends: dict[str, tuple[Any, Any]], out_dir: Path,
                  duration_s: float) -> Captures:
    """Start the captures of one scheme's run (the runner's entry point)."""
    captures = Captures(plan(cfg, ends, out_dir, duration_s))
    try:
        captures.start()
    except BaseException:
        captures.stop()
        raise
    return captures


def finish_for_run(captures: Captures, out_dir: Path) -> dict[str, Any]:
    """Stop them; what run.json records: ``captures`` (link -> node, interface, file)
    and ``capture_stats`` (link -> tcpdump's packet counts)."""
    captures.stop()
    return {"captures": {p.link: p.as_json(out_dir) for p in captures.points},
            "capture_snap_bytes": SNAP_BYTES, "capture_stats": captures.stats}
