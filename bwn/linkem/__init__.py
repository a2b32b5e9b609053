"""User-space link emulator (a netem replacement for kernels without netem).

``bwn-link IFACE_A IFACE_B --delay-ms D ...`` bridges two interfaces with
AF_PACKET raw sockets and applies, per direction, delay, jitter (order
preserving by default), loss, reordering, duplication and a rate limit with a
drop-tail queue.  See docs/linkem.md for the model, the CLI and measured
precision.

Python API:

* :class:`LinkEmulator` -- run the emulator in this process (threads);
* :class:`LinkGroup` -- several links (each in any network namespace) served by
  one thread; ``bwn-links SPEC.json`` runs one as a process;
* :class:`Impairment`, :class:`LinkConfig` -- what to do per direction;
* :mod:`bwn.linkem.netns` -- ``Topology``: hostA --veth-- [emulator ns] --veth--
  hostB with guaranteed cleanup, and ``linkem_command`` for Mininet nodes;
* :func:`netem_available` -- whether the kernel's netem could be used instead.
"""

from .config import DIRECTIONS, Impairment, LinkConfig
from .engine import LinkEmulator, LinkGroup
from .scheduler import Counters, DirectionScheduler

__all__ = [
    "DIRECTIONS",
    "Impairment",
    "LinkConfig",
    "LinkEmulator",
    "LinkGroup",
    "Counters",
    "DirectionScheduler",
    "netem_available",
]


def netem_available() -> bool:
    """True if the kernel's netem qdisc works here (see :mod:`bwn.linkem.netem`)."""
    # imported when first asked: the probe makes a namespace, and most users never ask
    from .netem import netem_available as probe

    return probe()
