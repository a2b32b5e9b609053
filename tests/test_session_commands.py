"""`bwn net`'s own CLI commands: parsing, the status table, the switch clock behind
its window ages, and the signal handling around the network's build."""
from __future__ import annotations

import os
import signal

import pytest

from controller.entries import PortTelemetry
from controller.switchctl import PortStatus, SwitchClock
from bwn.emulation.netcmd import CommandError, Help, SetLoss, SetRate, Status, format_status, parse_command
from bwn.emulation.session import Terminated, _deferred_signals

LINKS = ["h1-s1", "bottleneck"]


@pytest.mark.parametrize("line, command", [
    ("status", Status()),
    ("  status  ", Status()),
    ("", Help()),
    ("help", Help()),
    ("rate bottleneck 3", SetRate("bottleneck", 3e6)),
    ("rate bottleneck 0.25", SetRate("bottleneck", 0.25e6)),
    ("rate h1-s1 100", SetRate("h1-s1", 100e6)),
    ("rate bottleneck schedule", SetRate("bottleneck", None)),
    ("loss bottleneck 0.01", SetLoss("bottleneck", 0.01)),
    ("loss bottleneck 0", SetLoss("bottleneck", 0.0)),
    ("loss bottleneck 1", SetLoss("bottleneck", 1.0)),
])
def test_commands_parse(line, command):
    assert parse_command(line, LINKS) == command


@pytest.mark.parametrize("line, says", [
    ("rate nosuch 3", "unknown link 'nosuch'; links: h1-s1, bottleneck"),
    ("loss nosuch 0.1", "unknown link 'nosuch'"),
    ("rate bottleneck -1", "MBIT (Mb/s) must be positive, got '-1'"),
    ("rate bottleneck 0", "must be positive"),
    ("rate bottleneck fast", "not a number: 'fast'"),
    ("rate bottleneck nan", "finite"),
    ("rate bottleneck inf", "finite"),
    ("rate bottleneck 0.0001", "at least 1 kb/s"),       # below the dataplane's 1 kb/s
    ("rate bottleneck 1e6", "too large for a 16384 us window"),   # above what port_config holds
    ("loss bottleneck 5", "P (a probability: 0.01 is 1 %) must be 0..1, got '5'"),
    ("loss bottleneck -0.1", "must be 0..1"),
    ("loss bottleneck 1%", "not a number"),
    ("rate bottleneck", "usage: bwn rate LINK MBIT"),
    ("rate bottleneck 3 4", "usage: bwn rate LINK MBIT"),
    ("loss bottleneck", "usage: bwn loss LINK P"),
    ("status now", "usage: bwn status"),
    ("rates bottleneck 3", "unknown command 'rates'"),
    ("help me", "usage: bwn help"),
])
def test_bad_commands_say_what_to_type(line, says):
    with pytest.raises(CommandError, match=None) as err:
        parse_command(line, LINKS)
    assert says in str(err.value)


def test_the_window_bounds_the_rate():
    """The dataplane holds a window's capacity in int32 bytes: a shorter window
    takes a higher rate (docs/dataplane.md)."""
    with pytest.raises(CommandError, match="too large for a 16384 us window"):
        parse_command("rate bottleneck 1e6", LINKS, window_us=16_384)
    assert parse_command("rate bottleneck 1e6", LINKS, window_us=1_024) == SetRate("bottleneck", 1e12)


def _telemetry(**kw) -> PortTelemetry:
    base = dict(port=2, window_start_us=0, capacity_kbps=3000.0, rate_kbps=2500.0, avail_kbps=-250.0,
                queue_pkts=12, flows=2, ebn_code=84)
    base.update(kw)
    return PortTelemetry(**base)


def test_status_table_shows_each_port_with_its_numbers():
    rows = [PortStatus("s1", 1, "h1-s1", "schedule", 20e6, 0.0, None, None),
            PortStatus("s1", 2, "bottleneck", "pinned", 3e6, 0.01, 0.43, _telemetry())]
    lines = format_status(rows).splitlines()
    assert lines[0].split() == ["switch", "port", "link", "set", "applied", "loss", "capacity", "AB",
                                "EBN", "share", "flows", "queue", "window"]
    assert lines[2].split() == ["s1", "1", "h1-s1", "schedule", "20.000", "0", "-", "-", "-", "-", "-",
                                "none", "yet"]
    # EBN code 84 is 2 ** (84 / 8) kb/s = 1.448 Mb/s (docs/wire-format.md).
    assert lines[3].split() == ["s1", "2", "bottleneck", "pinned", "3.000", "1", "3.000", "-0.250", "1.448",
                                "2", "12", "0.4"]


def test_switch_clock_ages_windows_through_the_32_bit_wrap():
    wrap, window = 1 << 32, 16_384
    clock = SwitchClock()
    # An idle port's digest arrives 2 s after its window ended (the offset guess is
    # 2 s off), then a busy port's 0.1 ms after: the guess becomes that close.
    w0 = wrap - 1_100_000
    e0 = clock.observe(w0, window, arrival_s=50.0)
    assert clock.age_s(e0, 50.0) == pytest.approx(0.0)
    w1 = wrap - 60_000                                   # ends 1.04 s after w0's end
    t1 = 50.0 - 2.0 + 1.04 + 0.0001
    e1 = clock.observe(w1, window, arrival_s=t1)
    assert e1 - e0 == pytest.approx(1.04)
    assert clock.age_s(e0, t1) == pytest.approx(1.04 + 0.0001, abs=0.0002)   # not the 2 s guess
    # Past the wrap the switch's clock restarts at 0; the windows go on.
    w2 = (w1 + 100_000) % wrap
    e2 = clock.observe(w2, window, arrival_s=t1 + 0.1)
    assert e2 - e1 == pytest.approx(0.1)
    assert clock.age_s(e2, t1 + 1.1) == pytest.approx(1.0)
    # A window from before the wrap reported late is still the old one.
    assert clock.observe(w1, window, arrival_s=t1 + 5.0) == pytest.approx(e1)
    assert clock.age_s(e1, t1 + 5.0) == pytest.approx(5.0)


def test_signals_during_the_build_are_held_then_acted_on():
    reached_end = False
    with pytest.raises(Terminated) as err:
        try:
            with _deferred_signals():
                os.kill(os.getpid(), signal.SIGTERM)
                reached_end = True     # the build is not cut short
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    assert reached_end
    assert err.value.signum == signal.SIGTERM
    with pytest.raises(KeyboardInterrupt):
        with _deferred_signals():
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
