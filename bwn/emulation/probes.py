"""Reading the machine while a run runs: /proc, the switches' packet sockets and P4 counters.

The probes the fidelity monitor (:mod:`bwn.emulation.monitor`) and the soak
(benchmarks/soak.py) sample; what they read is judged elsewhere
(:mod:`bwn.analysis.fidelity`, :mod:`bwn.analysis.soak`), from the numbers alone.

* CPU: :func:`read_proc_stat` (the machine's ticks), :func:`read_cpu_times` (the
  machine's CPU time by kind: softirq is where the eBPF switch runs), :func:`process_cpu_s` and
  :func:`process_run_delay_s` (one process's CPU time, and its time runnable
  without a CPU);
* interfaces: :func:`read_net_dev` (/proc/net/dev of this namespace);
* the switches: :func:`packet_socket_stats` (frames the kernel dropped because
  a switch did not read its receive ring in time, through ``pidfd_getfd``),
  :func:`read_p4_drops` and :func:`counter_reader` (the P4 program's counters:
  :class:`CounterReader` over BMv2's Thrift, :class:`NikssCounterReader` through
  libnikss for an eBPF switch);
* memory: :func:`read_process` and the soak's :class:`Recorder`.
"""
from __future__ import annotations

import csv
import ctypes
import os
import socket
import struct
import time
from pathlib import Path
from typing import Any, Iterable, Optional

from bwn.analysis.soak import SAMPLE_FIELDS, Sample, Watched
from controller.entries import (
    DROP_COUNTER,
    DROP_REASONS,
    PORT_DEQUEUED_COUNTER,
    PORT_DROPS_COUNTER,
    PORT_ENQUEUED_COUNTER,
    QUEUE_EMPTIED_COUNTER,
    RED_DROPPED_COUNTER,
    RED_MARKED_COUNTER,
    port_drops_index,
)

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def read_proc_stat() -> tuple[float, float]:
    """(total, idle) CPU ticks over all CPUs; idle includes iowait, steal counts as busy."""
    with open("/proc/stat", "rb") as fh:
        fields = fh.readline().split()[1:]
    values = [int(v) for v in fields[:8]]
    return float(sum(values)), float(values[3] + values[4])


CPU_TIME_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def read_cpu_times() -> dict[str, float]:
    """Seconds each kind of CPU time took since boot, over all CPUs (/proc/stat):
    softirq is where the kernel's packet paths run, the eBPF switch's included
    (sampled at each tick when the kernel does not account it exactly)."""
    with open("/proc/stat", "rb") as fh:
        fields = fh.readline().split()[1:]
    tick = os.sysconf("SC_CLK_TCK")
    return {name: int(v) / tick for name, v in zip(CPU_TIME_FIELDS, fields)}


def read_net_dev(names: Iterable[str]) -> dict[str, tuple[int, int, int, int]]:
    """Interface -> (rx_packets, rx_dropped, tx_packets, tx_dropped) of this namespace."""
    wanted = set(names)
    out = {}
    with open("/proc/net/dev", "rb") as fh:
        for line in fh.read().decode().splitlines()[2:]:
            name, _, rest = line.partition(":")
            name = name.strip()
            if name in wanted:
                f = rest.split()
                out[name] = (int(f[1]), int(f[3]), int(f[9]), int(f[11]))
    return out


def process_cpu_s(pid: int) -> Optional[float]:
    """utime + stime of a process and its waited-for children, seconds."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode()
    except OSError:
        return None
    fields = data[data.rfind(")") + 2:].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def process_run_delay_s(pid: int) -> Optional[float]:
    """Seconds the threads of a process spent runnable but waiting for a CPU
    (/proc/PID/task/*/schedstat, second field), or None if unreadable."""
    total_ns = 0
    found = False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                total_ns += int(fh.read().split()[1])
                found = True
        except (OSError, IndexError, ValueError):
            continue
    return total_ns / 1e9 if found else None


_SYS_PIDFD_GETFD = 438
_SOL_PACKET = 263
_PACKET_STATISTICS = 6


def packet_socket_stats(pid: int) -> Optional[tuple[int, int]]:
    """(frames received, frames dropped) summed over the packet sockets of `pid`
    since the last call: the kernel's PACKET_STATISTICS, which reset on read
    (BMv2 never reads them). The sockets are borrowed with pidfd_getfd (root).
    None if they cannot be read (old kernel, not root, process gone)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pidfd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None
    received = dropped = 0
    found = False
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    continue
            except OSError:
                continue
            local = libc.syscall(_SYS_PIDFD_GETFD, pidfd, int(fd), 0)
            if local < 0:
                continue
            sock = None
            try:
                sock = socket.socket(fileno=local)
                if sock.family != socket.AF_PACKET:
                    continue
                raw = sock.getsockopt(_SOL_PACKET, _PACKET_STATISTICS, 12)
                packets, drops = struct.unpack("II", raw[:8])
                received += packets
                dropped += drops
                found = True
            except OSError:
                continue
            finally:
                if sock is not None:
                    sock.close()
                else:
                    os.close(local)
    except OSError:
        return None
    finally:
        os.close(pidfd)
    return (received, dropped) if found else None


def read_p4_drops(thrift_port: int, pipe_id: Optional[int] = None) -> Optional[dict[str, int]]:
    """The P4 program's drop counter by reason (BMv2's over Thrift; an eBPF
    switch's, NIKSS pipeline `pipe_id`, through libnikss), or None if unreachable."""
    reader = counter_reader(thrift_port, pipe_id)
    try:
        if not reader.open():
            return None
        counts = {name: reader.read(DROP_COUNTER, index) for index, name in DROP_REASONS.items()}
    finally:
        reader.close()
    return None if None in counts.values() else {k: v for k, v in counts.items() if v is not None}


#: A port's counts (p4src/v1model: port_counters.p4, queue.p4, red_ecn.p4), by the names
#: the per-port drop measurement uses: packets handed to the port, packets that left its
#: queue, RED's drops and marks; "af" is read from port_drops under its AF reason.
PORT_COUNTERS = {"enqueued": PORT_ENQUEUED_COUNTER, "dequeued": PORT_DEQUEUED_COUNTER,
                 "red_dropped": RED_DROPPED_COUNTER, "red_marked": RED_MARKED_COUNTER}


def read_port_counts(reader: "CounterReader", port: int) -> Optional[dict[str, int]]:
    """One port's counts (PORT_COUNTERS and "af_dropped"), or None if any is unreadable."""
    counts = {name: reader.read(counter, port) for name, counter in PORT_COUNTERS.items()}
    counts["af_dropped"] = reader.read(PORT_DROPS_COUNTER, port_drops_index(port, "af_out_of_profile"))
    return None if None in counts.values() else {k: v for k, v in counts.items() if v is not None}


class CounterReader:
    """One switch's P4 packet counters over a Thrift connection kept open (the
    sampler reads one per rate-limited port every tick). ``read`` returns None
    once the switch stops answering; the port's series then ends."""

    def __init__(self, thrift_port: int) -> None:
        self.thrift_port = thrift_port
        self._transport: Any = None
        self._client: Any = None

    def open(self) -> bool:
        try:  # BMv2's Thrift client: only where BMv2 is installed
            from bm_runtime.standard import Standard  # type: ignore[import-not-found]
            # imported here: Thrift is Debian's python3-thrift, which only /usr/bin/python3 with BMv2 installed has
            from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
            from thrift.transport import TSocket, TTransport
        except ImportError:
            return False
        transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", self.thrift_port))
        try:
            transport.open()
        except Exception:  # Thrift raises its own exception types
            return False
        self._transport = transport
        self._client = Standard.Client(TMultiplexedProtocol.TMultiplexedProtocol(
            TBinaryProtocol.TBinaryProtocol(transport), "standard"))
        return True

    def read(self, counter: str, index: int) -> Optional[int]:
        if self._client is None:
            return None
        try:
            return int(self._client.bm_counter_read(0, counter, index).packets)
        except Exception:  # no such counter (an older program), or the switch is gone
            self.close()
            return None

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._transport = self._client = None


class NikssCounterReader:
    """An eBPF switch's P4 counters through libnikss, as :class:`CounterReader`
    reads BMv2's (the same counter names; controller/ebpf.py maps them).

    Its queue-emptied counter counts the packets that find the port's virtual
    queue empty, so it moves only when the next packet arrives; the count read
    here adds 1 while the virtual queue, as the port's last packet left it, has
    run dry by now (the program's ``queue_dry`` register, on the same clock).
    The sum moves when the port runs dry, as BMv2's count of packets that
    leave their queue empty does, and not when the next packet then arrives to
    the empty queue (its arrival is counted and the queue is no longer dry)."""

    def __init__(self, pipe_id: int) -> None:
        self.pipe_id = pipe_id
        self._pipe: Any = None
        self._names: dict[str, str] = {}       # controller.entries' counter name -> the PSA program's

    def open(self) -> bool:
        try:
            # imported here: the eBPF adapters are not BMv2's run code
            # (bwn.reproduce.fingerprint), and libnikss may be missing
            from controller import ebpf as eb
            pipe = eb.Pipeline(self.pipe_id)
        except Exception:   # no libnikss here
            return False
        if not pipe.exists():
            pipe.close()
            return False
        self._pipe = pipe
        self._names = {DROP_COUNTER: eb.DROP_COUNTER, QUEUE_EMPTIED_COUNTER: eb.QUEUE_EMPTIED_COUNTER,
                       "queue_dry": eb.QUEUE_DRY_REGISTER}
        return True

    def read(self, counter: str, index: int) -> Optional[int]:
        if self._pipe is None:
            return None
        try:
            if counter == DROP_COUNTER:
                return self._pipe.counter_get(self._names[DROP_COUNTER], index)[0]
            if counter == QUEUE_EMPTIED_COUNTER:
                emptied = self._pipe.counter_get(self._names[QUEUE_EMPTIED_COUNTER], index)[0]
                dry_ns = self._pipe.register_get(self._names["queue_dry"], index)
                return emptied + (1 if time.monotonic_ns() >= dry_ns else 0)
        except Exception:   # the pipeline is gone (a teardown)
            self.close()
        return None

    def close(self) -> None:
        if self._pipe is not None:
            self._pipe.close()
        self._pipe = None


def counter_reader(thrift_port: int, pipe_id: Optional[int] = None) -> "CounterReader | NikssCounterReader":
    """The counter reader of a switch: BMv2's Thrift port, or an eBPF switch's
    NIKSS pipeline when it has one."""
    return NikssCounterReader(pipe_id) if pipe_id is not None else CounterReader(thrift_port)


def read_process(pid: int) -> Optional[tuple[int, int, float]]:
    """(RSS bytes, anonymous RSS bytes, CPU seconds) of `pid`, or None if it is gone.

    ``/proc/PID/statm``: resident pages, of which ``shared`` are file-backed or
    shared memory; resident - shared is the process's own (anonymous) memory,
    where a leak shows. CPU: utime + stime (:func:`process_cpu_s`)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            fields = fh.read().split()
    except OSError:
        return None
    cpu_s = process_cpu_s(pid)
    if cpu_s is None or len(fields) < 3:
        return None
    resident, shared = int(fields[1]), int(fields[2])
    return resident * PAGE_BYTES, max(resident - shared, 0) * PAGE_BYTES, cpu_s


class Recorder:
    """Samples every watched process into memory and appends it to a CSV (long
    format: one row per process and sample, columns :data:`SAMPLE_FIELDS`)."""

    def __init__(self, csv_path: Path) -> None:
        self.csv_path = Path(csv_path)
        self.series: dict[str, list[Sample]] = {}
        self.watched: dict[str, Watched] = {}
        self._fh = self.csv_path.open("w", newline="")
        self._writer = csv.writer(self._fh)
        self._writer.writerow(SAMPLE_FIELDS)
        self._fh.flush()

    def watch(self, processes: Iterable[Watched]) -> None:
        for p in processes:
            if p.name in self.watched:
                raise ValueError(f"two watched processes named {p.name!r}")
            self.watched[p.name] = p
            self.series[p.name] = []

    def sample(self, t_s: float) -> None:
        for name, p in self.watched.items():
            got = read_process(p.pid)
            if got is None:
                continue
            rss, anon, cpu_s = got
            self.series[name].append(Sample(round(t_s, 3), rss, anon, round(cpu_s, 2)))
            self._writer.writerow((f"{t_s:.3f}", name, p.kind, p.pid, rss, anon, f"{cpu_s:.2f}"))
        self._fh.flush()

    def ended(self) -> list[tuple[Watched, int]]:
        """The watched processes that have ended, with their exit status."""
        out = []
        for p in self.watched.values():
            code = p.poll() if p.poll is not None else None
            if code is not None:
                out.append((p, code))
        return out

    def close(self) -> None:
        self._fh.close()
