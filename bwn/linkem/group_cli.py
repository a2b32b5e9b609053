"""``bwn-links``: several links emulated by one process (:class:`bwn.linkem.LinkGroup`).

    bwn-links SPEC.json [--rt-priority N] [--duration-s T] [--quiet]

SPEC.json names the links; each is what one ``bwn-link`` would be given, plus the
network namespace its two interfaces are in::

    {"links": [
      {"name": "em0", "netns": "/proc/4242/ns/net",
       "args": ["em0-eth0", "em0-eth1", "--delay-ms", "10", "--seed", "7",
                "--stats-json", "out/em0-linkem.json"]},
      ...]}

``args`` are parsed by ``bwn-link``'s own parser (the same options, checks and
messages); the run-control options that belong to the process (``--rt-priority``,
``--duration-s``, ``--quiet``) are given once, on this command line. ``netns``
(optional) is a network namespace file; without it the interfaces are looked up
in this process's namespace. Each link writes its ``--stats-json`` on exit, with
the shared thread's CPU and wake-ups under ``group``. One thread serves every
direction of every link: frames of different links share its wake-ups (measured:
10 % less CPU per frame in a 9-link parking lot; docs/linkem.md, "One process for
many links").

Usage errors print one line and exit with status 2; a runtime failure exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Dict, List, NoReturn, Optional, Sequence

from .cli import (READY_MARKER, _nonneg_int, _seconds, build_parser as link_parser, config_from_args,
                  format_stats, handle_signals, run_until_stopped, write_stats_json)
from .engine import LinkEmulator, LinkGroup

__all__ = ["main", "build_parser", "load_spec", "LinkSpec"]

_PROG = "bwn-links"

#: A link's args may not carry these: they belong to the process (give them once).
_PROCESS_OPTIONS = ("rt_priority", "duration_s", "quiet")


class SpecError(ValueError):
    """What is wrong with SPEC.json, worded for the person who wrote it."""


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise SpecError(message)


class LinkSpec:
    """One link of the spec: its name, namespace, interfaces, configuration and
    where its statistics go."""

    def __init__(self, name: str, netns: Optional[str], args: argparse.Namespace) -> None:
        self.name = name
        self.netns = netns
        self.iface_a: str = args.iface_a
        self.iface_b: str = args.iface_b
        self.promiscuous = not args.no_promisc
        self.stats_json: Optional[str] = args.stats_json
        self.config = config_from_args(args)


def _link_args(name: str, argv: Sequence[str]) -> argparse.Namespace:
    parser = link_parser()
    raising = _RaisingParser(prog=f"{_PROG}: link {name!r}", add_help=False,
                             parents=[parser], conflict_handler="resolve")
    args = raising.parse_args(list(argv))
    if args.iface_a == args.iface_b:
        raise SpecError(f"IFACE_A and IFACE_B are the same interface ({args.iface_a!r})")
    given = [opt for opt in _PROCESS_OPTIONS
             if getattr(args, opt) != parser.get_default(opt)]
    if given:
        flags = ", ".join("--" + opt.replace("_", "-") for opt in given)
        raise SpecError(f"{flags} belong to the process: give them once on the {_PROG} command line")
    return args


def load_spec(path: str) -> List[LinkSpec]:
    """The links of SPEC.json, each checked as ``bwn-link`` checks its arguments
    (:class:`SpecError` names the link and what to fix)."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise SpecError(f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise SpecError(f"{path} is not JSON: {exc}") from None
    links = data.get("links") if isinstance(data, dict) else None
    if not isinstance(links, list) or not links:
        raise SpecError(f'{path}: expected {{"links": [{{"name": ..., "args": [...]}}, ...]}} '
                        "with at least one link")
    specs: List[LinkSpec] = []
    seen_names: set = set()
    seen_ifaces: Dict[tuple, str] = {}
    for i, entry in enumerate(links):
        if not isinstance(entry, dict):
            raise SpecError(f"{path}: link {i} is not an object")
        unknown = sorted(set(entry) - {"name", "netns", "args"})
        if unknown:
            raise SpecError(f"{path}: link {i}: unknown key(s) {', '.join(unknown)} (name, netns, args)")
        name = entry.get("name", f"link{i}")
        netns = entry.get("netns")
        argv = entry.get("args")
        if not isinstance(name, str) or not name:
            raise SpecError(f"{path}: link {i}: name must be a non-empty string")
        if name in seen_names:
            raise SpecError(f"{path}: link name {name!r} given twice")
        if netns is not None and not isinstance(netns, str):
            raise SpecError(f"{path}: link {name!r}: netns must be a path (/proc/PID/ns/net)")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise SpecError(f"{path}: link {name!r}: args must be a list of strings "
                            "(bwn-link's arguments: IFACE_A IFACE_B [options])")
        try:
            args = _link_args(name, argv)
            spec = LinkSpec(name, netns, args)
        except ValueError as exc:
            raise SpecError(f"{path}: link {name!r}: {exc}") from None
        for iface in (spec.iface_a, spec.iface_b):
            other = seen_ifaces.get((netns, iface))
            if other is not None:
                raise SpecError(f"{path}: interface {iface!r} is in links {other!r} and {name!r}: "
                                "each interface belongs to one link")
            seen_ifaces[(netns, iface)] = name
        seen_names.add(name)
        specs.append(spec)
    return specs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description=("Several emulated links in one process: each link of SPEC.json is "
                     "what one bwn-link would be (its interfaces, in any network namespace, "
                     "and bwn-link's options), and one thread serves them all. Runs until "
                     "SIGINT/SIGTERM (or --duration-s); SIGUSR1 starts every link's rate "
                     "schedules. Needs root (CAP_NET_RAW, and CAP_SYS_ADMIN for netns)."),
        epilog=('SPEC.json: {"links": [{"name": "em0", "netns": "/proc/PID/ns/net", '
                '"args": ["IFACE_A", "IFACE_B", "--delay-ms", "10", "--stats-json", "em0.json"]}, ...]}. '
                "Exit status: 0 after a clean stop, 2 on a usage error, 1 on a runtime failure. "
                "See docs/linkem.md."),
    )
    parser.add_argument("spec", metavar="SPEC.json", help="the links (see below)")
    parser.add_argument("--rt-priority", type=_nonneg_int, default=0, metavar="N",
                        help="run the thread with SCHED_FIFO priority N (1-99; default 0: normal)")
    parser.add_argument("--duration-s", type=_seconds, default=None, metavar="T",
                        help="stop by itself after T seconds")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.rt_priority > 99:
        parser.error("--rt-priority must be between 0 and 99")
    try:
        specs = load_spec(args.spec)
    except SpecError as exc:
        parser.error(str(exc))
    group = LinkGroup({s.name: LinkEmulator(s.iface_a, s.iface_b, config=s.config,
                                            promiscuous=s.promiscuous, netns=s.netns)
                       for s in specs}, rt_priority=args.rt_priority)
    stop = handle_signals(group)
    try:
        group.start()
    except PermissionError:
        print(f"{_PROG}: error: raw packet sockets and network namespaces need root "
              "(CAP_NET_RAW, CAP_SYS_ADMIN)", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"{READY_MARKER}: {len(specs)} links in one process ("
              + ", ".join(f"{s.name} seed {group.emulators[s.name].config.seed}" for s in specs)
              + f"; pid {os.getpid()}); SIGINT/SIGTERM to stop", file=sys.stderr, flush=True)
    run_until_stopped(group, stop, args.duration_s)
    failure = group.failed
    all_stats = group.stop()
    for spec in specs:
        stats = all_stats[spec.name]
        stats["exit"] = "error" if failure else "stopped"
        if spec.stats_json:
            write_stats_json(spec.stats_json, stats)
        if not args.quiet:
            print(f"{spec.name}: " + format_stats(stats), flush=True)
    if failure is not None:
        print(f"{_PROG}: error: the thread failed: {failure!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
