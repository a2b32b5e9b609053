"""What a soak run measures, and its arithmetic (benchmarks/soak.py runs it; docs/soak.md).

A soak keeps a scenario's network (BMv2 switches, bwn-link emulators, the
controller) and long-running flows up for minutes and watches, every
``interval_s``, each process of the run: its resident memory and CPU time. At
the end it fits each process's memory growth per hour, accounts for every byte
the senders handed to the transport, and reports the run's fidelity verdict
(:mod:`bwn.analysis.fidelity`).

* :class:`Watched` and :class:`Sample`: a process of the run and one reading of
  it, taken by :class:`bwn.emulation.probes.Recorder` (which samples the watched
  processes into a CSV as it goes, so an interrupted soak keeps what it measured).
* :func:`growth_per_hour`: least-squares slope of RSS over time (scipy's
  ``linregress``) with its standard error, in bytes per hour.
* :func:`account_flows`: bytes handed over / acknowledged / delivered per flow,
  from the senders' and receivers' summaries; lost bytes are bytes the sender
  was told were delivered that the receiver never delivered.
"""
from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

SAMPLE_FIELDS = ("t_s", "process", "kind", "pid", "rss_bytes", "anon_bytes", "cpu_s")
MIB = 1024 * 1024
SECONDS_PER_HOUR = 3600.0
MIN_FIT_SAMPLES = 3   # two points have a slope but no standard error


# ---------------------------------------------------------------------------------------
# Processes


@dataclass
class Watched:
    """One process of the run: ``kind`` is switch, bwn-link, bwn-send, bwn-recv or
    runner; ``poll`` says whether it ended (None: still running), if known."""

    name: str
    kind: str
    pid: int
    poll: Optional[Callable[[], Optional[int]]] = None


@dataclass(frozen=True)
class Sample:
    t_s: float
    rss_bytes: int
    anon_bytes: int
    cpu_s: float


# ---------------------------------------------------------------------------------------
# Memory growth


@dataclass(frozen=True)
class Growth:
    """Least-squares slope of RSS over time, per hour, and its standard error."""

    per_hour_bytes: float
    stderr_per_hour_bytes: float
    samples: int
    span_s: float


def growth_per_hour(points: Sequence[tuple[float, float]]) -> Optional[Growth]:
    """Slope of ``(t_s, bytes)`` points by ordinary least squares
    (``scipy.stats.linregress``) times 3600, with the slope's standard error
    (which assumes independent residuals: memory that steps up now and then gives
    correlated residuals, so read the error as a lower bound). None with fewer
    than :data:`MIN_FIT_SAMPLES` points or no time between them."""
    if len(points) < MIN_FIT_SAMPLES:
        return None
    t = [float(p[0]) for p in points]
    y = [float(p[1]) for p in points]
    span_s = max(t) - min(t)
    if span_s <= 0:
        return None
    from scipy.stats import linregress   # slow to import: only for a fit (the runner imports this module's types)

    fit = linregress(t, y)
    stderr = float(fit.stderr) if math.isfinite(fit.stderr) else 0.0
    return Growth(float(fit.slope) * SECONDS_PER_HOUR, stderr * SECONDS_PER_HOUR, len(points), span_s)


@dataclass
class ProcessSummary:
    name: str
    kind: str
    pid: int
    samples: int
    rss_first_bytes: Optional[int]      # the first sample (agents: still starting)
    rss_start_bytes: Optional[int]      # the first sample at or after the warm-up
    rss_end_bytes: Optional[int]        # the last sample
    growth: Optional[Growth]            # over the samples from the warm-up on
    anon_growth: Optional[Growth]
    cpu_s: Optional[float]              # CPU seconds between the first and last sample
    first_t_s: Optional[float] = None
    last_t_s: Optional[float] = None
    exited: Optional[str] = None        # how it ended before the soak did, if it did


def summarize_process(p: Watched, samples: Sequence[Sample], warmup_s: float,
                      exited: Optional[str] = None) -> ProcessSummary:
    """RSS at start (first sample from ``warmup_s`` on) and end, growth per hour
    fitted over the samples from ``warmup_s`` on, CPU seconds over the samples."""
    fitted = [s for s in samples if s.t_s >= warmup_s]
    return ProcessSummary(
        name=p.name, kind=p.kind, pid=p.pid, samples=len(samples),
        rss_first_bytes=samples[0].rss_bytes if samples else None,
        rss_start_bytes=fitted[0].rss_bytes if fitted else None,
        rss_end_bytes=samples[-1].rss_bytes if samples else None,
        growth=growth_per_hour([(s.t_s, s.rss_bytes) for s in fitted]),
        anon_growth=growth_per_hour([(s.t_s, s.anon_bytes) for s in fitted]),
        cpu_s=round(samples[-1].cpu_s - samples[0].cpu_s, 2) if samples else None,
        first_t_s=samples[0].t_s if samples else None,
        last_t_s=samples[-1].t_s if samples else None,
        exited=exited)


# ---------------------------------------------------------------------------------------
# Bytes: handed over, acknowledged, delivered, lost


@dataclass
class FlowBytes:
    """One flow's bytes. ``handed_over``: the stream the sending application gave
    the transport (``stream_bytes`` of bwn-send's summary: fixed when the stream
    ended, at ``--duration`` or at a SIGINT); ``acked``: the part the receiver
    acknowledged cumulatively (the summary's ``bytes``); ``delivered``: what the
    receiver passed on in order (bwn-recv's ``bytes``, summed over its records of
    this flow id; None: no record)."""

    flow: str
    flow_id: Optional[int]
    algo: Optional[str]
    sender_status: Optional[str]
    handed_over_bytes: Optional[int]
    acked_bytes: Optional[int]
    delivered_bytes: Optional[int]
    receiver: Optional[str] = None
    receiver_status: Optional[str] = None
    receiver_records: int = 0

    @property
    def lost_bytes(self) -> Optional[int]:
        """Acknowledged to the sender but never delivered by the receiver: what a
        reliable transport must never lose. None when there is no sender summary."""
        if self.acked_bytes is None:
            return None
        return max(self.acked_bytes - (self.delivered_bytes or 0), 0)

    @property
    def excess_bytes(self) -> Optional[int]:
        """Delivered beyond the stream handed over (a byte delivered twice or made up)."""
        if self.handed_over_bytes is None or self.delivered_bytes is None:
            return None
        return max(self.delivered_bytes - self.handed_over_bytes, 0)

    @property
    def unconfirmed_bytes(self) -> Optional[int]:
        """Handed over but never acknowledged: still in flight when the flow was
        ended (0 for a flow that completed). Not lost: no one was told they arrived."""
        if self.handed_over_bytes is None or self.acked_bytes is None:
            return None
        return max(self.handed_over_bytes - self.acked_bytes, 0)

    @property
    def problems(self) -> list[str]:
        out = []
        if self.acked_bytes is None:
            out.append("no sender summary")
        elif self.sender_status and self.sender_status.startswith("failed"):
            out.append(f"sender {self.sender_status}")
        if self.acked_bytes and self.delivered_bytes is None:
            out.append("no receiver record")
        if self.lost_bytes:
            out.append(f"{self.lost_bytes} bytes lost")
        if self.excess_bytes:
            out.append(f"{self.excess_bytes} bytes delivered beyond the stream")
        return out

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(lost_bytes=self.lost_bytes, excess_bytes=self.excess_bytes,
                   unconfirmed_bytes=self.unconfirmed_bytes, problems=self.problems)
        return out


def account_flows(flows: Sequence[tuple[str, Optional[int], Optional[str]]],
                  sender_summaries: Mapping[str, Optional[Mapping[str, Any]]],
                  receiver_summaries: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[FlowBytes]:
    """``flows``: (name, flow id, receiving host) per flow of the run;
    ``sender_summaries``: flow name -> bwn-send's ``--summary-json`` (None: missing);
    ``receiver_summaries``: receiving host -> bwn-recv's ``--summary-json`` list."""
    out = []
    for name, flow_id, receiver in flows:
        s = sender_summaries.get(name) or {}
        if flow_id is None and s.get("flow_id") is not None:
            flow_id = int(s["flow_id"])
        records = [r for r in receiver_summaries.get(receiver or "", ())
                   if flow_id is not None and _int(r.get("flow_id")) == flow_id]
        delivered = sum(_int(r.get("bytes")) or 0 for r in records) if records else None
        out.append(FlowBytes(
            flow=name, flow_id=flow_id, algo=s.get("algo"), sender_status=s.get("status"),
            handed_over_bytes=_int(s.get("stream_bytes")),
            acked_bytes=_int(s.get("bytes")) if s else None,
            delivered_bytes=delivered, receiver=receiver,
            receiver_status=",".join(str(r.get("status")) for r in records) or None,
            receiver_records=len(records)))
    return out


def _int(value: Any) -> Optional[int]:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------------------
# The fidelity sampler's own memory


def deep_size_bytes(obj: Any) -> int:
    """Bytes held by a container of tuples of numbers (the fidelity Monitor's
    samples): the containers, the tuples and their elements (``sys.getsizeof``;
    shared small ints counted each time, so an upper bound)."""
    if isinstance(obj, Mapping):
        return sys.getsizeof(obj) + sum(sys.getsizeof(k) + deep_size_bytes(v) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return sys.getsizeof(obj) + sum(deep_size_bytes(v) for v in obj)
    return sys.getsizeof(obj)


# ---------------------------------------------------------------------------------------
# The printed table


def _mib(value: Optional[float]) -> str:
    return "-" if value is None else f"{value / MIB:.1f}"


def _growth(g: Optional[Growth]) -> str:
    if g is None:
        return "-"
    return f"{g.per_hour_bytes / MIB:+.2f} ± {g.stderr_per_hour_bytes / MIB:.2f}"


@dataclass
class Report:
    processes: list[ProcessSummary]
    flows: list[FlowBytes]
    wall_s: float
    warmup_s: float
    fidelity_summary: str
    status: str
    problems: list[str] = field(default_factory=list)

    @property
    def lost_bytes(self) -> Optional[int]:
        lost = [f.lost_bytes for f in self.flows]
        return None if any(v is None for v in lost) else sum(v for v in lost if v is not None)

    def lost_by_process(self) -> dict[str, int]:
        """Lost bytes of each sender (its flow) and receiver (its flows), by process name."""
        out: dict[str, int] = {}
        for f in self.flows:
            lost = f.lost_bytes or 0
            out[f"send-{f.flow}"] = out.get(f"send-{f.flow}", 0) + lost
            if f.receiver:
                out[f"recv-{f.receiver}"] = out.get(f"recv-{f.receiver}", 0) + lost
        return out

    def table(self) -> str:
        lost = self.lost_by_process()
        head = (f"{'process':<16} {'kind':<9} {'pid':>7} {'samples':>7} {'RSS start':>9} {'RSS end':>8} "
                f"{'growth MiB/h ± SE':>18} {'anon MiB/h ± SE':>16} {'CPU s':>8} {'CPU %':>6} {'lost B':>7}")
        lines = [head, "-" * len(head)]
        for p in self.processes:
            share = (f"{100 * p.cpu_s / self.wall_s:.1f}" if p.cpu_s is not None and self.wall_s > 0 else "-")
            lines.append(
                f"{p.name:<16} {p.kind:<9} {p.pid:>7} {p.samples:>7} {_mib(p.rss_start_bytes):>9} "
                f"{_mib(p.rss_end_bytes):>8} {_growth(p.growth):>18} {_growth(p.anon_growth):>16} "
                f"{'-' if p.cpu_s is None else f'{p.cpu_s:.1f}':>8} {share:>6} "
                f"{str(lost[p.name]) if p.name in lost else '-':>7}"
                + (f"  ENDED EARLY: {p.exited}" if p.exited else ""))
        lines.append("")
        fhead = (f"{'flow':<10} {'algo':<9} {'sender':<12} {'handed over B':>14} {'acked B':>12} "
                 f"{'delivered B':>12} {'lost B':>7} {'unconfirmed B':>14}")
        lines += [fhead, "-" * len(fhead)]
        for f in self.flows:
            status = (f.sender_status or "-").split(":")[0]     # the reason is in the problems
            lines.append(f"{f.flow:<10} {f.algo or '-':<9} {status:<12} "
                         f"{_num(f.handed_over_bytes):>14} {_num(f.acked_bytes):>12} "
                         f"{_num(f.delivered_bytes):>12} {_num(f.lost_bytes):>7} {_num(f.unconfirmed_bytes):>14}"
                         + (f"  {'; '.join(f.problems)}" if f.problems else ""))
        handed = sum(f.handed_over_bytes or 0 for f in self.flows)
        lines += ["",
                  f"RSS start: first sample from {self.warmup_s:g} s on (the fit's first point); "
                  f"growth: least-squares slope over those samples, ± its standard error; "
                  f"CPU: seconds over {self.wall_s:.0f} s (% of one core)",
                  f"bytes lost: {_num(self.lost_bytes)} of {handed} handed over",
                  f"fidelity: {self.fidelity_summary}",
                  f"soak: {self.status}" + (f" ({'; '.join(self.problems)})" if self.problems else "")]
        return "\n".join(lines)


def _num(value: Optional[int]) -> str:
    return "-" if value is None else str(value)
