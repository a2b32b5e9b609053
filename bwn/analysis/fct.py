"""Flow completion time (FCT) of the flows that send a byte count (``bytes = N`` in the
scenario; docs/config.md), and how far each is from processor sharing's.

**FCT**, per flow, at the sender: from its SYN to the acknowledgement of its last
byte. ``bwn-send`` records both ends: the flow log's time counts from the SYN, and
its first row is written when the SYN-ACK arrives (the handshake, one round trip);
the summary's ``duration_s`` runs from the SYN-ACK to the ACK of the last byte
(docs/transport.md, "Summary"). So ``FCT = first log row's t_s + duration_s``.

RCP's papers (Dukkipati and McKeown, "Why Flow-Completion Time is the Right Metric
for Congestion Control", CCR 2006; Dukkipati et al., "Processor Sharing Flows in the
Internet", IWQoS 2005) measure it from the SYN until the last packet *arrives*, and
give processor sharing's (PS) FCT of a flow of ``L`` bytes that gets rate ``r`` as
``1.5 RTT + L / r``: one RTT of handshake, ``L / r`` of sending, half an RTT for the
last byte to arrive. Ours ends half an RTT later (its ACK back at the sender), so
the **ideal** here is ``2 RTT + L / r``, with

* ``RTT`` the flow's propagation round trip (the scenario's link delays on its path:
  no serialization, no queue), and
* ``r`` the flow's max-min fair share (payload b/s) at its start, among the flows
  active then (:class:`bwn.analysis.report.rates.FairShares`): PS's rate on arrival,
  held for the whole flow (exact PS would re-share as other flows come and go).

The **slowdown** is ``FCT / ideal`` (1 = as fast as PS; RCP's papers plot FCT against
PS's the same way).

A flow **completed** when its sender says ``complete`` and the bytes acknowledged are
at least its size. Any other flow (interrupted at the run's end, failed, no summary
or no log at all) has no FCT and is counted, by group, as not completed; a mean over
a group that has one is not taken (:func:`fct_value`). A flow's **group** is its
name without the trailing digits (``short3`` -> ``short``).
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Optional, Sequence

from bwn.analysis.report.load import FlowLog, SchemeRun
from bwn.analysis.report.rates import FairShares

COMPLETE = "complete"
#: Status of a sized flow the run left no sender record of (no summary, no log).
NO_RECORD = "no record"


@dataclass(frozen=True)
class FlowFct:
    flow: str
    group: str
    size_bytes: int
    status: str                    # the sender's status, or NO_RECORD
    fct_s: Optional[float]         # None unless the flow completed
    ideal_s: Optional[float]       # 2 RTT + L / r; None without RTT or fair share
    start_s: Optional[float] = None

    @property
    def completed(self) -> bool:
        return self.fct_s is not None

    @property
    def slowdown(self) -> Optional[float]:
        if self.fct_s is None or not self.ideal_s:
            return None
        return self.fct_s / self.ideal_s


@dataclass(frozen=True)
class GroupFct:
    group: str
    flows: int
    completed: int
    mean_s: Optional[float]         # over the completed flows
    median_s: Optional[float]
    mean_slowdown: Optional[float]
    median_slowdown: Optional[float]
    not_completed: tuple[str, ...] = ()

    @property
    def incomplete(self) -> int:
        return self.flows - self.completed


def group_of(name: str) -> str:
    """``short3`` -> ``short``; ``long`` -> ``long``; ``f#17`` -> ``f``."""
    base = name.split("#")[0]
    return re.sub(r"\d+$", "", base) or base


def ideal_fct_s(size_bytes: float, share_bps: float, base_rtt_s: float) -> float:
    """Processor sharing's FCT at the sender (module docstring): 2 RTT + L / r."""
    return 2 * base_rtt_s + size_bytes * 8 / share_bps


def flow_fct(flow: FlowLog, size_bytes: int) -> tuple[str, Optional[float]]:
    """(status, FCT in s or None) of one sized flow from its sender's records."""
    status = str(flow.summary.get("status") or ("unknown" if flow.summary else "no summary"))
    delivered = flow.summary.get("bytes")
    duration = flow.summary.get("duration_s")
    if status != COMPLETE or delivered is None or float(delivered) < size_bytes:
        return status, None
    if duration is None or not flow.samples:
        return f"{status}, without the log's handshake row", None
    handshake_s = float(flow.samples[0]["t_s"])     # the row written at the SYN-ACK
    return status, handshake_s + float(duration)


def fcts(run: SchemeRun) -> list[FlowFct]:
    """Every sized flow of the run (``run.flow_sizes``, in the scenario's order),
    completed or not."""
    by_name = {f.name: f for f in run.flows}
    shares: Optional[FairShares] = None
    out = []
    for name, size in run.flow_sizes.items():
        flow = by_name.get(name)
        if flow is None:
            out.append(FlowFct(name, group_of(name), size, NO_RECORD, None, None))
            continue
        status, fct = flow_fct(flow, size)
        ideal = None
        rtt = run.flow_base_rtt_s.get(name)
        if rtt is not None:
            shares = shares or FairShares(run)
            share = shares.share_bps(flow, flow.start_s)
            if share and share > 0:
                ideal = ideal_fct_s(size, share, rtt)
        out.append(FlowFct(name, group_of(name), size, status, fct, ideal, flow.start_s))
    return out


def _mean(values: Sequence[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


def _median(values: Sequence[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def by_group(flows: Sequence[FlowFct]) -> list[GroupFct]:
    """Per group (first appearance order): counts, and mean and median FCT and slowdown
    of its completed flows; the names of those that did not complete."""
    groups: dict[str, list[FlowFct]] = {}
    for f in flows:
        groups.setdefault(f.group, []).append(f)
    out = []
    for group, members in groups.items():
        done = [f.fct_s for f in members if f.fct_s is not None]
        slow = [s for s in (f.slowdown for f in members) if s is not None]
        out.append(GroupFct(group, len(members), len(done), _mean(done), _median(done), _mean(slow),
                            _median(slow), tuple(f.flow for f in members if not f.completed)))
    return out


def select(flows: Sequence[FlowFct], selector: str) -> list[FlowFct]:
    """As the metrics' flow selectors: ``""``/``all``/``mean`` every sized flow, ``P*`` a
    name prefix, else one flow's name."""
    if selector in ("", "all", "mean"):
        return list(flows)
    if selector.endswith("*"):
        return [f for f in flows if f.flow.startswith(selector[:-1])]
    return [f for f in flows if f.flow == selector]


def fct_value(flows: Sequence[FlowFct], what: str) -> Optional[float]:
    """A metric of the selected sized flows: ``"fct_s"`` their mean FCT, ``"fct_slowdown"``
    their mean slowdown, ``"fct_incomplete"`` how many did not complete. The means are
    None when a selected flow did not complete (a mean over the flows that happened to
    finish would flatter the scheme that left the others) or there is none."""
    if what == "fct_incomplete":
        return float(sum(1 for f in flows if not f.completed)) if flows else None
    if not flows or any(not f.completed for f in flows):
        return None
    values = [f.fct_s if what == "fct_s" else f.slowdown for f in flows]
    if any(v is None or not math.isfinite(v) for v in values):
        return None
    return sum(values) / len(values)  # type: ignore[arg-type]
