"""A real single-node Slurm for tests: munged, slurmctld and slurmd from Debian's
packages (slurm-wlm, munge), started directly (no systemd) with a generated
config in a temporary folder, and stopped with nothing left behind.

Everything the cluster writes (munge key and socket, slurm.conf, state, spool,
pid and log files) is under one folder; every process it starts carries
``BWN_TEST_SLURM=<that folder>`` in its environment (the daemons, and through
``sbatch --export=ALL`` every job), which is how :meth:`SlurmCluster.stop`
finds a job process Slurm did not end: it ends it by pid and reports it.
The config is the one docs/cluster.md shows: ``proctrack/linuxproc`` and
``task/none`` (no cgroups), ``SlurmUser=root``, accounting off, its own ports.

``SlurmCluster`` is a context manager; ``slurm_cluster`` a pytest fixture.
``python tests/slurm_cluster.py`` (root) starts one and holds it until Ctrl-C,
printing the ``SLURM_CONF`` to export for sbatch, squeue and srun.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional

import pytest

#: The Debian packages' daemons and clients.
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "srun", "sinfo", "scontrol")
#: Places a packaged daemon would write by default; a cluster must leave them as it found them.
SYSTEM_PLACES = ("/run/munge", "/var/run/munge", "/var/log/munge", "/var/lib/munge", "/run/slurm",
                 "/var/run/slurm", "/var/spool/slurmd", "/var/spool/slurmctld", "/var/spool/slurm",
                 "/var/log/slurm", "/var/lib/slurm", "/etc/slurm")
MARKER = "BWN_TEST_SLURM"


def slurm_missing() -> Optional[str]:
    """Why a test Slurm cannot start here, or None."""
    if os.geteuid() != 0:
        return "a test Slurm needs root (slurmd runs jobs as their user)"
    gone = [t for t in (*DAEMONS, *CLIENTS, "munge") if shutil.which(t) is None]
    if gone:
        return f"{', '.join(gone)} not installed (apt-get install slurm-wlm munge; make deps does)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def system_places_snapshot() -> dict[str, list[str]]:
    """The entries of SYSTEM_PLACES (what a cluster must not add to or leave in)."""
    found = {}
    for place in SYSTEM_PLACES:
        p = Path(place)
        found[place] = sorted(x.name for x in p.iterdir()) if p.is_dir() else []
    return found


def marked_pids(base: Path) -> list[int]:
    """Processes whose environment carries this cluster's marker."""
    needle = f"{MARKER}={base}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            env = (proc / "environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            pids.append(int(proc.name))
    return pids


class SlurmCluster:
    """One controller and ``nodes`` slurmd's named bwn-node1.. on this machine.

    (Several slurmd on one host need Slurm built with --enable-multiple-slurmd,
    which Debian's is not: the tests use one node.)"""

    def __init__(self, parent: Optional[Path] = None, node: str = "bwn-node1"):
        self.parent = parent
        self.node = node
        self.base: Path = Path()
        self.procs: dict[str, subprocess.Popen] = {}
        self.stragglers: list[int] = []              # job processes stop() had to end itself
        self.ports: tuple[int, int] = (0, 0)

    # -- paths and environment ---------------------------------------------------------

    @property
    def conf(self) -> Path:
        return self.base / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm's clients (and through them, the jobs)."""
        return {**os.environ, "SLURM_CONF": str(self.conf), MARKER: str(self.base)}

    def config_text(self) -> str:
        host = socket.gethostname().split(".")[0]
        b = self.base
        return "\n".join([
            "# A single-node Slurm for bwn's tests (tests/slurm_cluster.py); docs/cluster.md",
            "ClusterName=bwntest",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={self.ports[0]}",
            f"SlurmdPort={self.ports[1]}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # cred_expire: a requeued job waits this + 1 s before it may start again (default 120 s)
            f"AuthInfo=socket={b}/run/munge.sock,cred_expire=10",
            f"StateSaveLocation={b}/state",
            f"SlurmdSpoolDir={b}/spool/%n",
            f"SlurmctldPidFile={b}/run/slurmctld.pid",
            f"SlurmdPidFile={b}/run/slurmd-%n.pid",
            f"SlurmctldLogFile={b}/log/slurmctld.log",
            f"SlurmdLogFile={b}/log/slurmd-%n.log",
            f"PlugStackConfig={b}/plugstack.conf",
            "MailProg=/bin/true",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "MpiDefault=none",
            "ReturnToService=2",
            "JobRequeue=1",
            "MinJobAge=600",
            "KillWait=10",
            "SlurmdParameters=config_overrides",
            f"NodeName={self.node} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} "
            "State=UNKNOWN",
            f"PartitionName=bwn Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
            ""])

    # -- start and stop ------------------------------------------------------------------

    def __enter__(self) -> "SlurmCluster":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout_s: float = 60.0) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="bwn-slurm.", dir=self.parent))
        try:
            self._start(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout_s: float) -> None:
        b = self.base
        b.chmod(0o755)                               # munged: every directory above its socket searchable
        for sub in ("run", "state", "spool", "log"):
            (b / sub).mkdir(mode=0o755)
        (b / "plugstack.conf").write_text("")
        key = b / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.ports = (_free_port(), _free_port())
        self.conf.write_text(self.config_text())
        env = self.env
        self._spawn("munged", ["munged", "--foreground", f"--key-file={key}", f"--socket={b}/run/munge.sock",
                               f"--pid-file={b}/run/munged.pid", f"--seed-file={b}/run/munged.seed",
                               f"--log-file={b}/log/munged.log"], env)
        self._wait(lambda: (b / "run" / "munge.sock").exists(), timeout_s, "munged's socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)], env)
        self._wait(lambda: self._quiet(["scontrol", "ping"]) and "UP" in self._out(["scontrol", "ping"]),
                   timeout_s, "slurmctld")
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node], env)
        self._wait(lambda: self._out(["sinfo", "-h", "-N", "-o", "%t"]).strip() == "idle", timeout_s,
                   f"{self.node} idle")

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = (self.base / "log" / f"{name}.out").open("wb")
        # Its own session: a Ctrl-C at the terminal reaches the test, which stops the daemons in order.
        self.procs[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def _wait(self, ready, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}) while waiting for {what}:\n"
                                       + self.log_tail(name))
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}:\n" + "\n".join(self.log_tail(n) for n in self.procs))

    def log_tail(self, name: str, n_bytes: int = 3000) -> str:
        path = self.base / "log" / f"{name}.out"
        return path.read_text(errors="replace")[-n_bytes:] if path.exists() else ""

    def _out(self, argv: list[str]) -> str:
        try:
            return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=20).stdout
        except subprocess.TimeoutExpired:
            return ""

    def _quiet(self, argv: list[str]) -> bool:
        try:
            return subprocess.run(argv, env=self.env, capture_output=True, timeout=20).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def stop(self) -> None:
        """Cancel every job, stop the daemons (by the pids started), end any job
        process left (found by the marker), remove the folder. Idempotent."""
        if not self.base.parts or not self.base.exists():
            return
        ctld = self.procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            jobs = self._out(["squeue", "-h", "-o", "%A"]).split()
            if jobs:
                subprocess.run(["scancel", *jobs], env=self.env, capture_output=True, timeout=30)
                deadline = time.monotonic() + 45
                while time.monotonic() < deadline and self._out(["squeue", "-h", "-o", "%A"]).split():
                    time.sleep(0.3)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for pid in marked_pids(self.base):
            self.stragglers.append(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while marked_pids(self.base) and time.monotonic() < deadline:
            time.sleep(0.1)
        shutil.rmtree(self.base, ignore_errors=True)

    def ports_open(self) -> list[int]:
        """Which of the cluster's ports still accept a connection."""
        open_ = []
        for port in self.ports:
            with socket.socket() as s:
                s.settimeout(1.0)
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    open_.append(port)
        return open_


@pytest.fixture(scope="module")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A running single-node Slurm, one per test module (skipped, or failed under
    BWN_REQUIRE_P4=1, when the packages or root are missing); SIGTERM tears it
    down as Ctrl-C does."""
    from needs import missing
    missing(slurm_missing(), "Slurm")

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, on_term)
    cluster = SlurmCluster(Path(tempfile.gettempdir()))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        signal.signal(signal.SIGTERM, previous)


def main() -> int:
    parser = argparse.ArgumentParser(description="Start a single-node test Slurm (root) and hold it until "
                                                 "Ctrl-C or SIGTERM, then stop it and remove its folder.")
    parser.parse_args()
    why = slurm_missing()
    if why:
        print(f"slurm_cluster: {why}", file=sys.stderr)
        return 3

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)   # even when started in the background
    cluster = SlurmCluster()
    try:
        cluster.start()
        print(f"ready {cluster.base}\nexport SLURM_CONF={cluster.conf}", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
        print(f"stopped; removed {cluster.base}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
