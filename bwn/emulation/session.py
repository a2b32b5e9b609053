"""`bwn net SCENARIO`: the scenario's network with the Mininet CLI, to try things by hand.

The network is the one `bwn run` builds (:class:`bwn.emulation.network.ScenarioNetwork`):
BMv2 switches programmed by the controller, `bwn-link` nodes for delayed links,
hosts with static ARP, and the controller applying the links' schedules and
recording telemetry while the prompt is open. The scenario's flows are not
started: the user starts traffic (`h1 iperf3 ...`, `h1 bwn-send ...`).

The CLI is Mininet's, with one more command, ``bwn`` (bwn/emulation/netcmd.py):

    bwn status              each switch port: capacity, AB, EBN share, flows, queue
    bwn rate LINK MBIT      LINK's capacity now; its schedule pauses
    bwn rate LINK schedule  LINK back on its schedule
    bwn loss LINK P         LINK's random loss probability now

Leaving: `exit`, Ctrl-D or Ctrl-C at the prompt, SIGTERM or SIGHUP tear
everything down (a Ctrl-C while a command runs interrupts that command, as in
Mininet). The machine's experiment lock is held from before the build to after
the teardown.
"""
from __future__ import annotations

import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from select import POLLIN, poll
from typing import Any, Callable, Iterator, Optional, TextIO

from bwn.emulation.netcmd import BWN_HELP, SESSION_FRAME_BYTES, CommandError, parse_command, run_command
from bwn.emulation.network import ScenarioNetwork, start_link_schedules
from bwn.emulation.pipedinput import PipedInput, has_fd, is_tty
from bwn.emulation.runlock import experiment_lock
from bwn.scenario.resolved import ExperimentConfig, LinkConfig
from bwn.scenario.schedule import ConstantSchedule

class Terminated(BaseException):
    """SIGTERM or SIGHUP: leave the CLI and tear down (not an Exception, so that
    nothing on the way catches it; not a KeyboardInterrupt, which Mininet's CLI
    takes as 'interrupt the running command')."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _ignore_signals() -> None:
    """From here on the teardown runs to its end."""
    for sig in _SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def _terminate(signum: int, frame: object) -> None:
    _ignore_signals()
    raise Terminated(signum)


@contextmanager
def _deferred_signals() -> Iterator[None]:
    """Hold Ctrl-C, SIGTERM and SIGHUP while Mininet creates nodes and links (a
    node half made would escape the teardown); act on them right after."""
    pending: list[int] = []
    old = {sig: signal.signal(sig, lambda signum, frame: pending.append(signum)) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if pending:
        if pending[0] == signal.SIGINT:
            raise KeyboardInterrupt
        _terminate(pending[0], None)


def _mininet_cli() -> type:
    # Mininet when a session starts, as the network does (bwn/emulation/network.py):
    # the commands and this module's other parts are tested where it is not installed.
    from mininet.cli import CLI
    # imported here: Mininet is Debian's and needs root; the rest of the module does not
    from mininet.log import error, output
    from mininet.util import quietRun

    class BwnCLI(CLI):
        """Mininet's CLI with the `bwn` command; Ctrl-C at the prompt leaves it."""

        prompt = "mininet> "

        def __init__(self, network: Any, stdin: TextIO = sys.stdin) -> None:
            self.network = network
            self.ended_by = "exit"
            self._busy = False
            self._warned_controller = False
            if not is_tty(stdin) and has_fd(stdin):
                # A pipe: read it in slices so Ctrl-C is seen at once (bwn/emulation/pipedinput.py).
                self.use_rawinput = False
                stdin = PipedInput(stdin)  # type: ignore[assignment]
            super().__init__(network.net, stdin=stdin)   # runs the loop until the user leaves

        def run(self) -> None:
            while True:
                try:
                    self._loop_once()
                    return
                except KeyboardInterrupt:
                    if self._busy:          # a command was running: Mininet's "Interrupt"
                        self._busy = False
                        output("\nInterrupt\n")
                        continue
                    output("\n")
                    self.ended_by = "Ctrl-C"
                    return

        def _loop_once(self) -> None:
            # What Mininet's run() does before each cmdloop(), without its catch-all
            # for KeyboardInterrupt.
            for node in self.mn.values():
                while node.waiting:
                    node.sendInt()
                    node.waitOutput()
            if self.isatty():
                quietRun("stty echo sane intr ^C")
            self.cmdloop()

        def precmd(self, line: str) -> str:
            self._busy = True
            return super().precmd(line)

        def postcmd(self, stop: Any, line: str) -> Any:
            self._busy = False
            thread = self.network.controller_thread
            if thread is not None and thread.error is not None and not self._warned_controller:
                self._warned_controller = True
                error(f"warning: the controller stopped ({thread.error}); schedules and `bwn` "
                      f"commands no longer work; `exit` tears the network down\n")
            return stop

        def do_EOF(self, line: str) -> Any:
            self.ended_by = "Ctrl-D"
            return super().do_EOF(line)

        # The link emulators (em0, ...) are Mininet hosts without an address: the
        # commands that take "all hosts" take the scenario's hosts only.
        def _hosts(self) -> list[Any]:
            return [self.mn[h.name] for h in self.network.cfg.hosts]

        def do_pingall(self, line: str) -> None:
            """Ping between all the scenario's hosts (not the link emulators).
            Usage: pingall [timeout]"""
            self.mn.ping(self._hosts(), timeout=line.strip() or None)

        def do_pingallfull(self, line: str) -> None:
            """Ping between all the scenario's hosts, returns all ping results."""
            self.mn.pingFull(self._hosts())

        def do_iperf(self, line: str) -> None:
            """Mininet's iperf (iperf 2) test between two hosts (default: the scenario's first
            and last). Usage: iperf [node1 node2]"""
            if line.split():
                return super().do_iperf(line)
            hosts = self._hosts()
            self.mn.iperf([hosts[0], hosts[-1]])
            return None

        def do_bwn(self, line: str) -> None:
            """bwn status | bwn rate LINK MBIT | bwn rate LINK schedule | bwn loss LINK P
            (`bwn help` says more)"""
            controller = self.network.controller
            try:
                cmd = parse_command(line, controller.links(), controller.window.window_us)
            except CommandError as exc:
                error(f"bwn: {exc}\n")
                return
            try:
                output(run_command(cmd, controller, self.network.controller_thread.call,
                                   self.network.frame_bytes or SESSION_FRAME_BYTES))
            except KeyError as exc:
                error(f"bwn: {exc.args[0] if exc.args else exc}\n")
            except Exception as exc:  # the switch or the controller: say it, keep the CLI
                error(f"bwn {line.split()[0]}: failed: {exc}\n")

        def help_bwn(self) -> None:
            output(BWN_HELP + f"links: {', '.join(self.network.controller.links())}\n")

        def waitForNode(self, node: Any) -> None:  # noqa: N802 (Mininet's name)
            if self.isatty():
                return super().waitForNode(node)
            # Standard input is a script (a pipe, a here-doc, a file): it holds the
            # next commands, not keystrokes for this one, which Mininet would feed
            # to the node. Only print the node's output.
            poller = poll()
            poller.register(node.stdout, POLLIN)
            while node.waiting:
                try:
                    if poller.poll(200):
                        output(node.monitor())
                except KeyboardInterrupt:
                    node.sendInt()
            return None

    return BwnCLI


def _served(link: LinkConfig) -> str:
    """", serves its ..." for a link whose bwn-link applies its rate, else ""."""
    schedule = link.served_schedule
    if schedule is None:
        return ""
    if isinstance(schedule, ConstantSchedule):
        return f", serves its {schedule.rate / 1e6:g} Mb/s"
    return f", serves its {link.capacity.kind} schedule (from the moment the network was up)"


def describe(network: Any, out_dir: Path) -> str:
    """What is up: switches (pid, P4Runtime, Thrift), link emulators, hosts, links."""
    cfg: ExperimentConfig = network.cfg
    net = network.net
    lines = []
    for sw in net.switches:
        pid = sw.proc.pid if sw.proc is not None else "?"
        lines.append(f"  {sw.name}: simple_switch_grpc pid {pid}, P4Runtime {sw.grpc_addr}, "
                     f"Thrift {sw.thrift_port} (simple_switch_CLI --thrift-port {sw.thrift_port})")
    group = getattr(network.built, "linkem_group", None)
    if group is not None:
        lines.append(f"  bwn-links pid {group.proc.pid if group.proc else '?'} serves every delayed link "
                     f"({', '.join(em.name for em in network.built.linkem_nodes)}; [experiment] linkem_shared)")
    for em in network.built.linkem_nodes:
        proc = group.proc if group is not None else getattr(em, "linkem_proc", None)
        lines.append(f"  {em.name}: {'bwn-links' if group is not None else 'bwn-link'} pid "
                     f"{proc.pid if proc else '?'}, link {em.link_config.name}, "
                     f"{em.link_config.delay_ms:g} ms each way"
                     + _served(em.link_config))
    lines.append("  hosts: " + ", ".join(f"{h.name} {h.ip.ip}" for h in cfg.hosts))
    lines.append("  links: " + ", ".join(
        f"{link.name} ({'' if link.name == f'{link.a}-{link.b}' else f'{link.a}-{link.b}, '}{link.capacity.kind})"
        for link in cfg.links))
    return (f"bwn net {cfg.name}: up; controller logs (capacity.csv, telemetry.csv) and switch logs in "
            f"{out_dir}\n" + "\n".join(lines) + "\n"
            "Type `help bwn` for bwn status/rate/loss, `help` for Mininet's commands; every host has "
            "bwn-send, bwn-recv, iperf3, ping and tcpdump.\n"
            "exit, Ctrl-D or Ctrl-C at the prompt tear everything down.\n")


def _restore_terminal(stdin: TextIO) -> None:
    """Mininet puts a terminal in character mode while a host command runs; a
    signal may have ended the session there."""
    try:
        if stdin.isatty():
            subprocess.run(["stty", "sane"], stdin=stdin, check=False)
    except (OSError, ValueError):
        pass


def run_session(cfg: ExperimentConfig, out_dir: Path, stdin: TextIO = sys.stdin,
                progress: Callable[[str], None] = print) -> int:
    """Bring `cfg`'s network up, hand the user the CLI, tear everything down.
    Returns the exit status: 0 after exit/Ctrl-D, 130 after Ctrl-C at the prompt,
    128 + the signal's number after SIGTERM or SIGHUP."""
    def say(message: str) -> None:
        try:
            progress(message)
        except OSError:   # the terminal is gone (SIGHUP): the teardown goes on regardless
            pass

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    # (Ctrl-C at the prompt leaves even when a shell started `bwn net` with SIGINT
    # ignored: bwn.cli.main.main takes SIGINT back for every command.)
    status = 0
    try:
        with experiment_lock(say):
            network: Optional[ScenarioNetwork] = None
            try:
                with _deferred_signals():
                    network = ScenarioNetwork(cfg, out_dir, say, frame_bytes=SESSION_FRAME_BYTES)
                network.start()
                # The links' schedules start now, on the switches and in bwn-link alike.
                assert network.controller is not None
                network.controller.schedule_origin_s = network.controller.now_s()
                start_link_schedules(network.built.linkem_nodes)
                say(describe(network, out_dir).rstrip("\n"))
                cli = _mininet_cli()(network, stdin=stdin)
                if cli.ended_by == "Ctrl-C":
                    status = 130
            finally:
                _ignore_signals()
                if network is not None:
                    say("tearing down: link emulators, controller, switches, hosts")
                    network.stop()
                _restore_terminal(stdin)
    except KeyboardInterrupt:
        say("interrupted")
        status = 130
    except Terminated as exc:
        say(f"{exc}: ended")
        status = 128 + exc.signum
    say(f"bwn net: down; logs in {out_dir}")
    return status
