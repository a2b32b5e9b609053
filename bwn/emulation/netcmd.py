"""The `bwn` commands of `bwn net`'s CLI: parsing, carrying them out on the
running controller, and the status table (bwn/emulation/session.py runs the CLI).

    bwn status              each switch port: capacity, AB, EBN share, flows, queue
    bwn rate LINK MBIT      LINK's capacity now; its schedule pauses
    bwn rate LINK schedule  LINK back on its schedule
    bwn loss LINK P         LINK's random loss probability now
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

from bwn.cliargs import number
from bwn.protocol import dataplane_math as dm
from bwn.protocol.wire import ebn_decode_kbps
from bwn.scenario.schedule import DEFAULT_FRAME_BYTES

# Frames the queue rates are converted with (BMv2 rates queues in packets/s): the
# MTU-sized frames of iperf3, `ping -s 1472` and bwn-send's default --mss 1412.
SESSION_FRAME_BYTES = DEFAULT_FRAME_BYTES

BWN_HELP = """\
bwn status              each switch port: what the controller set (schedule, pinned
                        by hand or unlimited; the rate it applied; loss), then the
                        capacity, AB (OBP's available bandwidth), EBN share, flows
                        and queue the switch measured in the port's last window
                        that had traffic, and how long ago that window ended
                        (a window is reported when the next packet leaves by the
                        port: an idle port shows its last busy window)
bwn rate LINK MBIT      set LINK's capacity to MBIT Mb/s now (the dataplane's capacity
                        and the BMv2 queue rate, at every switch port that limits it);
                        LINK's schedule pauses until `bwn rate LINK schedule`
bwn rate LINK schedule  LINK back on its schedule
bwn loss LINK P         random loss with probability P (0..1, 0.01 = 1 %) on LINK now,
                        where a switch sends onto it (as the scenario's `loss`)
"""


class CommandError(ValueError):
    """A `bwn` command line that cannot be run; the message says what to type."""


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class Status:
    pass


@dataclass(frozen=True)
class SetRate:
    link: str
    rate_bps: Optional[float]   # None: back to the link's schedule


@dataclass(frozen=True)
class SetLoss:
    link: str
    probability: float


Command = Union[Help, Status, SetRate, SetLoss]

_MBIT = number(float, 0, low_open=True)
_PROBABILITY = number(float, 0, 1)


def _value(parse: Callable[[str], float], text: str, what: str) -> float:
    try:
        return parse(text)
    except argparse.ArgumentTypeError as exc:
        raise CommandError(f"{what} {exc}") from None


def parse_command(line: str, links: Sequence[str], window_us: int = 16_384) -> Command:
    """One `bwn ...` line (without the leading `bwn`) -> a command; `links` are the
    names a LINK may take, `window_us` the dataplane's rate window (which bounds
    the capacity it holds). Raises CommandError with the usage or the reason."""
    words = line.split()
    if not words or words[0] in ("help", "-h", "--help"):
        if len(words) > 1:
            raise CommandError("usage: bwn help")
        return Help()
    verb, args = words[0], words[1:]
    if verb == "status":
        if args:
            raise CommandError("usage: bwn status (no arguments)")
        return Status()
    if verb not in ("rate", "loss"):
        raise CommandError(f"unknown command {verb!r}: bwn status | bwn rate LINK MBIT | "
                           f"bwn rate LINK schedule | bwn loss LINK P")
    usage = "bwn rate LINK MBIT  or  bwn rate LINK schedule" if verb == "rate" else "bwn loss LINK P"
    if len(args) != 2:
        raise CommandError(f"usage: {usage}")
    link, value = args
    if link not in links:
        raise CommandError(f"unknown link {link!r}; links: {', '.join(links)}")
    if verb == "loss":
        return SetLoss(link, _value(_PROBABILITY, value, "P (a probability: 0.01 is 1 %)"))
    if value == "schedule":
        return SetRate(link, None)
    rate_bps = _value(_MBIT, value, "MBIT (Mb/s)") * 1e6
    try:
        dm.PortCapacity.from_bps(rate_bps, window_us)
    except dm.ConfigError as exc:
        raise CommandError(str(exc)) from None
    return SetRate(link, rate_bps)


def _mbit(value: Optional[float], per_mbit: float) -> str:
    return "-" if value is None else f"{value / per_mbit:.3f}"


def format_status(rows: Sequence[Any]) -> str:
    """A table of :class:`controller.switchctl.PortStatus` rows: what the
    controller set (how, rate, loss), then the port's latest telemetry."""

    table = [("switch", "port", "link", "set", "applied", "loss", "capacity", "AB", "EBN share",
              "flows", "queue", "window"),
             ("", "", "", "", "Mb/s", "%", "Mb/s", "Mb/s", "Mb/s", "", "pkts", "age s")]
    for r in rows:
        t = r.telemetry
        if t is None:
            seen = ("-", "-", "-", "-", "-", "none yet")
        else:
            seen = (_mbit(t.capacity_kbps, 1e3), _mbit(t.avail_kbps, 1e3), _mbit(ebn_decode_kbps(t.ebn_code), 1e3),
                    str(t.flows), str(t.queue_pkts), f"{r.window_age_s:.1f}")
        table.append((r.switch, str(r.port), r.link, r.mode, _mbit(r.applied_bps, 1e6), f"{r.loss * 100:g}")
                     + seen)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "".join("  ".join(cell.ljust(w) if i < 4 else cell.rjust(w)
                             for i, (cell, w) in enumerate(zip(row, widths))).rstrip() + "\n"
                   for row in table)


def _describe_rates(applied: Sequence[Any], frame_bytes: int) -> str:
    return ", ".join(f"{a.switch} port {a.port} ({a.queue_pps:.1f} packets/s of {frame_bytes}-byte frames "
                     f"in its BMv2 queue)" for a in applied)


def run_command(cmd: Command, controller: Any, call: Callable[[Any], Any],
                frame_bytes: int = SESSION_FRAME_BYTES) -> str:
    """Carry out `cmd` on the running controller (`call` runs a coroutine on its
    loop) and say what was done."""
    if isinstance(cmd, Help):
        return BWN_HELP + f"links: {', '.join(controller.links())}\n"
    if isinstance(cmd, Status):
        return format_status(call(controller.port_status()))
    if isinstance(cmd, SetRate):
        applied = call(controller.set_link_rate(cmd.link, cmd.rate_bps))
        where = _describe_rates(applied, frame_bytes)
        if cmd.rate_bps is None:
            return f"{cmd.link}: back on its schedule: {applied[0].rate_bps / 1e6:g} Mb/s now at {where}\n"
        return (f"{cmd.link}: capacity {cmd.rate_bps / 1e6:g} Mb/s now at {where}; its schedule is paused "
                f"(`bwn rate {cmd.link} schedule` resumes it)\n")
    if isinstance(cmd, SetLoss):
        ports = call(controller.set_link_loss(cmd.link, cmd.probability))
        idle = [f"{sw} port {port}" for sw, port, routes in ports if routes == 0]
        return (f"{cmd.link}: random loss {cmd.probability * 100:g} % now on what "
                f"{', '.join(f'{sw} port {port}' for sw, port, _ in ports)} sends onto it"
                + (f" (no route leaves by {', '.join(idle)}: nothing is sent there)" if idle else "") + "\n")
    raise TypeError(f"not a bwn command: {cmd!r}")
