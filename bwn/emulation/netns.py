"""Network namespaces and veth pairs that a run creates and always removes.

Names carry a short per-run tag so that parallel runs never clash, and
everything created is recorded so that cleanup removes exactly that (never
anything else on the machine).
"""
from __future__ import annotations


import shutil
import subprocess
import uuid
from dataclasses import dataclass, field


def run(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({res.returncode}): {res.stderr.strip()}")
    return res


def short_tag() -> str:
    return uuid.uuid4().hex[:6]


@dataclass
class NetnsSet:
    """Namespaces and links of one run; `close()` removes all of them."""

    tag: str = field(default_factory=short_tag)
    namespaces: list[str] = field(default_factory=list)
    root_links: list[str] = field(default_factory=list)

    def add_netns(self, name: str) -> str:
        full = f"{name}{self.tag}"
        run(["ip", "netns", "add", full])
        self.namespaces.append(full)
        self.exec(full, ["ip", "link", "set", "lo", "up"])
        return full

    def exec(self, netns: str | None, cmd: list[str], check: bool = True) -> subprocess.CompletedProcess:
        if netns is None:
            return run(cmd, check)
        return run(["ip", "netns", "exec", netns] + cmd, check)

    def veth(self, a: str, b: str, netns_a: str | None = None, netns_b: str | None = None,
             mtu: int = 1500) -> tuple[str, str]:
        """A veth pair a<->b (names <= 15 chars), each end moved to its namespace and up,
        with IPv6 and offloads off so frames are real and quiet."""
        for name in (a, b):
            if len(name) > 15:
                raise ValueError(f"interface name {name!r} is longer than 15 characters")
        run(["ip", "link", "add", a, "type", "veth", "peer", "name", b])
        if netns_a is None or netns_b is None:
            self.root_links.append(a)
        for name, ns in ((a, netns_a), (b, netns_b)):
            if ns is not None:
                run(["ip", "link", "set", name, "netns", ns])
            self.exec(ns, ["ip", "link", "set", name, "mtu", str(mtu), "up"])
            self.exec(ns, ["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"], check=False)
            if shutil.which("ethtool"):
                self.exec(ns, ["ethtool", "-K", name, "rx", "off", "tx", "off", "tso", "off",
                               "gso", "off", "gro", "off"], check=False)
        return a, b

    def close(self) -> None:
        for link in self.root_links:
            run(["ip", "link", "del", link], check=False)
        self.root_links.clear()
        for ns in reversed(self.namespaces):
            run(["ip", "netns", "del", ns], check=False)
        self.namespaces.clear()

    def __enter__(self) -> "NetnsSet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
