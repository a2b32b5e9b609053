#!/usr/bin/env python3
"""The eBPF switch program's own cost per packet, without a generator.

    sudo .venv/bin/python benchmarks/ebpf_prog_cost.py [--runs 200000] [--rounds 5]

p4src/psa/bwn.p4 (build/ebpf/bwn.o) is loaded by NIKSS and configured as the
controller configures it (one route, the port's capacity, its virtual queue);
then the kernel runs its TC ingress program on a fresh copy of one frame, `--runs`
times (BPF_PROG_TEST_RUN, one run per call: repeated runs inside one call would
work on the frame the run before changed, whose TTL soon expires), and each
call reports the time its run took; the table gives their mean. That is the pipeline's
work alone, per packet, on one CPU: parse, route, BR, the virtual queue, EBN's
flow slot, the stamp, the TTL; not the veth's receive and transmit around it nor
any generator, which the forwarding rate (benchmarks/switch_pps.py --target ebpf)
includes. Traffic classes as switch_pps's: `data` (BWN DATA, stamped), `plain`
(UDP, not BWN), `window-first` (every packet closes a window: 1 us windows).
The program is attached to no interface (the redirect it asks for is not done).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

BPF_OBJ_GET = 7
BPF_PROG_TEST_RUN = 10
SYS_BPF = 321            # x86_64
TC_ACT_REDIRECT = 7


class _ObjGet(ctypes.Structure):
    _fields_ = [("pathname", ctypes.c_uint64), ("bpf_fd", ctypes.c_uint32), ("file_flags", ctypes.c_uint32)]


class _TestRun(ctypes.Structure):
    _fields_ = [("prog_fd", ctypes.c_uint32), ("retval", ctypes.c_uint32), ("data_size_in", ctypes.c_uint32),
                ("data_size_out", ctypes.c_uint32), ("data_in", ctypes.c_uint64), ("data_out", ctypes.c_uint64),
                ("repeat", ctypes.c_uint32), ("duration", ctypes.c_uint32), ("ctx_size_in", ctypes.c_uint32),
                ("ctx_size_out", ctypes.c_uint32), ("ctx_in", ctypes.c_uint64), ("ctx_out", ctypes.c_uint64),
                ("flags", ctypes.c_uint32), ("cpu", ctypes.c_uint32), ("batch_size", ctypes.c_uint32),
                ("_pad", ctypes.c_uint32)]


def _bpf(cmd: int, attr: ctypes.Structure) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    rc = libc.syscall(SYS_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"bpf({cmd}): {os.strerror(err)}")
    return rc


def prog_fd(path: Path) -> int:
    name = ctypes.create_string_buffer(str(path).encode())
    return _bpf(BPF_OBJ_GET, _ObjGet(pathname=ctypes.addressof(name)))


def test_run(fd: int, frame: bytes, repeat: int = 1) -> tuple[int, int, bytes]:
    """(return code, mean ns per run, the frame as the program left it)."""
    data_in = ctypes.create_string_buffer(frame, len(frame))
    data_out = ctypes.create_string_buffer(len(frame) + 256)
    attr = _TestRun(prog_fd=fd, data_size_in=len(frame), data_size_out=len(data_out),
                    data_in=ctypes.addressof(data_in), data_out=ctypes.addressof(data_out), repeat=repeat)
    _bpf(BPF_PROG_TEST_RUN, attr)
    return attr.retval, attr.duration, data_out.raw[:attr.data_size_out]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200_000, help="runs per measurement")
    ap.add_argument("--rounds", type=int, default=5, help="measurements per class (median, min..max)")
    ap.add_argument("--classes", default="data,plain,window-first")
    ap.add_argument("--obj", type=Path, default=None, help="the BPF object (default build/ebpf/bwn.o)")
    args = ap.parse_args(argv)
    from bwn.requirements import ebpf_missing, ebpf_program_missing, netns_missing
    why = netns_missing() or ebpf_missing() or (None if args.obj else ebpf_program_missing())
    if why:
        print(f"ebpf_prog_cost: {why}", file=sys.stderr)
        return 2
    from controller import ebpf as eb
    from controller import entries as ent
    from controller.nikss import PipelineProcess, Pipeline, ensure_bpf_fs, pinned_path
    from switch_pps import H2_MAC, SW_MAC, frames

    ensure_bpf_fs()
    proc = PipelineProcess(eb.pipeline_id(97))
    proc.unload()
    proc.load(args.obj or eb.default_object())
    results: dict[str, list[int]] = {}
    try:
        with Pipeline(proc.pipe_id) as pipe:
            window = ent.WindowConfig()
            for e in eb.static_tables(window):
                e.add(pipe)
            eb.route("10.0.2.0/24", 1000, 2, H2_MAC, SW_MAC).add(pipe)
            eb.port_capacity(2, 1e9, window).add(pipe)
            eb.VirtualQueue.of(1e9, 1_000_000).entry(2).add(pipe)
            fd = prog_fd(pinned_path(proc.pipe_id) / "classifier_tc-ingress")
            for cls in [c for c in args.classes.split(",") if c]:
                wc = eb.window_config(window)
                if cls == "window-first":
                    wc = eb.Entry(wc.table, wc.action, (), ((1 << 64) - 1, 1, (1 << 32) - 1, 1))
                pipe.table_default(wc.table, wc.action, wc.params)
                frame = frames("data" if cls == "window-first" else cls)[0]
                rc, _, out = test_run(fd, frame, 1)
                if rc != TC_ACT_REDIRECT:
                    raise RuntimeError(f"{cls}: the program returned {rc}, not a redirect (dropped?)")
                if cls == "data" and out[14 + 8] != frame[14 + 8] - 1:
                    raise RuntimeError("the TTL was not decremented: the program did not run the route")
                results[cls] = [statistics.fmean(test_run(fd, frame, 1)[1] for _ in range(args.runs))
                                for _ in range(args.rounds)]
                print(f"{cls:12s} {statistics.median(results[cls]):.0f} ns/packet "
                      f"({min(results[cls]):.0f}..{max(results[cls]):.0f})", flush=True)
            os.close(fd)
    finally:
        proc.unload()
    print(f"\n| traffic | ns per packet: the median of {args.rounds} means of {args.runs} runs (min..max) "
          f"| packets/s one CPU could run |")
    print("|---|---|---|")
    for cls, ns in results.items():
        med = statistics.median(ns)
        print(f"| {cls} | {med:.0f} ({min(ns):.0f}..{max(ns):.0f}) | {1e9 / med:,.0f} |".replace(",", " "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
