"""Is the kernel's ``netem`` qdisc usable here?

Topologies may prefer netem (in-kernel, cheaper) where it exists and fall back
to the user-space emulator otherwise.  The probe is a throwaway
``tc qdisc add dev <veth> root netem delay 1ms`` on a veth inside a scratch
namespace, so it never touches a real interface and loads nothing the kernel
would not load on its own.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from .netns import new_tag

__all__ = ["netem_available"]


@functools.lru_cache(maxsize=1)
def netem_available() -> bool:
    """True if ``tc ... netem`` works (needs root, ``ip`` and ``tc``); cached.

    Returns False when it cannot be checked (not root, tools missing), since
    a caller could not use netem then either.
    """
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None:
        return False
    tag = new_tag()
    ns = f"{tag}-{os.getpid()}-e"
    run = lambda *a: subprocess.run(list(a), capture_output=True, text=True)  # noqa: E731
    if run("ip", "netns", "add", ns).returncode != 0:
        return False
    try:
        if run("ip", "-n", ns, "link", "add", f"{tag}n0", "type", "veth", "peer", "name",
               f"{tag}n1").returncode != 0:
            return False
        return run("tc", "-n", ns, "qdisc", "add", "dev", f"{tag}n0", "root", "netem",
                   "delay", "1ms").returncode == 0
    finally:
        run("ip", "netns", "del", ns)
