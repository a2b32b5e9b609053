"""The node's side of a Slurm sweep (bwn/reproduce/slurm.py): one array task.

The batch script the driver writes runs ``python -m bwn.reproduce.slurm_node``
in the node's own checkout (its folder first on the import path, so the node's
code is what runs and what is fingerprinted), with the submission's tasks as
JSON on standard input. For the task of its ``SLURM_ARRAY_TASK_ID`` it

1. computes the node's code fingerprint (bwn.reproduce.fingerprint) and, when
   it differs from the driver's or the node's run code differs from its commit,
   refuses to run (result ``refused``, naming the node, exit 78);
2. runs the task's argv (``{out}`` and ``{run}`` replaced by the output folder
   and the task's run folder on this node), its output in a task log;
3. writes the result (status, exit code, node, Slurm job, times) and
   ``slurm-task.json`` in the run folder (so the run says where it ran);
4. brings the result home: with ``transfer = "shared"`` the output folder is the
   driver's, on a filesystem every node mounts at the same path, and the result
   goes to the driver's state folder; with ``transfer = "srun"`` everything is
   in a node-local spool, packed into one tar file, and the task marks its job
   (``Comment=bwn-ready``) and waits while the driver reads the file through
   ``srun --jobid=JOB --overlap cat`` (Slurm's own I/O forwarding: no shared
   filesystem, no ssh) and acknowledges it; then the spool is removed (also
   when Slurm ends the task first: a cancelled or requeued run hands nothing over).

``python -m bwn.reproduce.slurm_node fingerprint`` prints the checkout's
fingerprint, to compare a node with the driver by hand.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any, Optional

from bwn.paths import REPO
from bwn.reproduce import fingerprint as fp

#: Exit code of a task refused for its node's code fingerprint (sysexits EX_CONFIG).
EXIT_REFUSED = 78
#: Exit code of a task whose bundle the driver did not fetch in time (srun transfer).
EXIT_NOT_FETCHED = 75
#: The job comment that tells the driver a bundle is ready to fetch (":RESTARTS" follows).
READY_COMMENT = "bwn-ready"
#: Seconds a terminated task's command has to end after SIGTERM (Slurm's KillWait is 30 s).
TERM_GRACE_S = 20.0


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def _utc() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Written whole or not at all (a reader on another machine never sees half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def job_tag() -> str:
    """ARRAYJOB_INDEX: one attempt's name (a Slurm requeue keeps it, and counts restarts)."""
    return f"{os.environ.get('SLURM_ARRAY_JOB_ID', os.environ.get('SLURM_JOB_ID', 'nojob'))}_" \
           f"{os.environ.get('SLURM_ARRAY_TASK_ID', '0')}"


def substitute(argv: list[str], out_root: Path, run: Path) -> list[str]:
    return [a.replace("{out}", str(out_root)).replace("{run}", str(run)) for a in argv]


def _run_command(argv: list[str], log_path: Path, cwd: Path) -> tuple[int, bool]:
    """The task's command, its output in ``log_path``: its exit code (128 + N when
    signal N ended it) and whether Slurm terminated it. SIGTERM (Slurm's cancel,
    preemption or time limit) is passed on, and the command has TERM_GRACE_S to end."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        log.write(f"== {_utc()} {node_name()}: {' '.join(argv)}\n".encode())
        log.flush()
        try:
            child = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
        except OSError as exc:
            log.write(f"cannot start the task's command: {exc}\n".encode())
            return 127, False
        terminated = False

        def on_term(signum: int, frame: object) -> None:
            nonlocal terminated
            terminated = True
            child.send_signal(signal.SIGTERM)
        previous = signal.signal(signal.SIGTERM, on_term)
        killed_at: Optional[float] = None
        try:
            while True:
                try:
                    rc = child.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    if terminated and killed_at is None:
                        killed_at = time.monotonic() + TERM_GRACE_S
                    if killed_at is not None and time.monotonic() > killed_at:
                        child.kill()
        finally:
            signal.signal(signal.SIGTERM, previous)
        log.write(f"== {_utc()} exit {rc}{' (terminated by Slurm)' if terminated else ''}\n".encode())
    rc = rc if rc >= 0 else 128 - rc                 # killed by a signal: the shell's convention
    return (rc, terminated)


def batch_exit(result: dict[str, Any]) -> int:
    """The batch script's exit code, as Slurm shows it: 0 when the task did its
    work (its command's exit code was one of the task's ``ok_exit_codes``), else
    the command's (at least 1)."""
    return 0 if result["status"] == "ok" else max(1, int(result["exit_code"]))


def run_task(config: dict[str, Any], index: int) -> int:
    """Run the task ``index`` of a submission (``config``: the JSON the batch script
    carries); returns the batch script's exit code."""
    task = config["tasks"][index]
    transfer = config["transfer"]
    tag = job_tag()
    node = node_name()
    if transfer == "shared":
        out_root = Path(config["out"])
        work = Path(config["state"]) / "logs"
        log_path = work / f"{tag}.task.log"
    elif transfer == "srun":
        work = Path(config["spool"]) / tag
        if work.exists():
            shutil.rmtree(work)                    # a Slurm requeue of this attempt starts over
        out_root = work / "out"
        log_path = work / "task.log"
    else:
        raise SystemExit(f"bwn slurm task: unknown transfer {transfer!r}")
    run = out_root / task["run_folder"]
    started = time.monotonic()
    result: dict[str, Any] = {
        "key": task["key"], "node": node, "job": tag, "job_id": os.environ.get("SLURM_JOB_ID", ""),
        "restart_count": int(os.environ.get("SLURM_RESTART_COUNT") or 0),
        "expected_fingerprint": config["fingerprint"], "started_utc": _utc()}
    try:
        state = fp.code_state(REPO)
        fingerprint, dirty = state.fingerprint, state.dirty
        why = (f"its run code differs from its commit ({', '.join(dirty[:5])}{' ...' if len(dirty) > 5 else ''})"
               if dirty else f"code fingerprint {fingerprint}, the driver's is {config['fingerprint']}"
               if fingerprint != config["fingerprint"] else "")
    except fp.FingerprintError as exc:
        fingerprint, why = "", f"no code fingerprint: {exc}"
    result["fingerprint"] = fingerprint
    if why:
        result.update(status="refused", exit_code=EXIT_REFUSED, detail=f"node {node} ({REPO}): {why}")
        print(f"bwn: refused: {result['detail']}", file=sys.stderr)
    else:
        argv = substitute(list(task["argv"]), out_root, run)
        rc, terminated = _run_command(argv, log_path, REPO)
        ok_codes = task.get("ok_exit_codes") or [0]
        result.update(status="terminated" if terminated else "ok" if rc in ok_codes else "failed", exit_code=rc)
    result["ended_utc"] = _utc()
    result["wall_s"] = round(time.monotonic() - started, 1)
    if run.is_dir():
        _write_json(run / "slurm-task.json", {k: result[k] for k in ("node", "job", "job_id", "restart_count",
                                                                     "fingerprint", "started_utc", "ended_utc")})
    if transfer == "shared":
        _write_json(Path(config["state"]) / "results" / f"{tag}.json", result)
        return batch_exit(result)
    if result["status"] == "terminated":           # cancelled, preempted or requeued: nothing to hand over
        shutil.rmtree(work, ignore_errors=True)
        return batch_exit(result)
    return _hand_over(config, work, run, log_path, result, tag)


def _hand_over(config: dict[str, Any], work: Path, run: Path, log_path: Path,
               result: dict[str, Any], tag: str) -> int:
    """Pack result, log and run folder into ``work/bundle.tar``, mark the job ready,
    wait for the driver's acknowledgement (``work/fetched``), then remove ``work``."""
    _write_json(work / "result.json", result)
    partial = work.parent / f".{tag}.tar"
    with tarfile.open(partial, "w") as tar:
        tar.add(work / "result.json", arcname="result.json")
        if log_path.exists():
            tar.add(log_path, arcname="task.log")
        if run.is_dir():
            tar.add(run, arcname="run")
    os.replace(partial, work / "bundle.tar")

    class Ended(Exception):
        pass

    def on_term(signum: int, frame: object) -> None:
        raise Ended
    signal.signal(signal.SIGTERM, on_term)         # cancelled or requeued while waiting: clean up
    try:
        # The restart count tells this run's mark from one a requeued run left on the job.
        mark = subprocess.run(["scontrol", "update", f"JobId={tag}",
                               f"Comment={READY_COMMENT}:{result['restart_count']}"], capture_output=True, text=True)
        if mark.returncode != 0:
            print(f"bwn: cannot mark the job ready for the driver: {mark.stderr.strip()}", file=sys.stderr)
        deadline = time.monotonic() + float(config.get("fetch_wait_s", 1800))
        while time.monotonic() < deadline and not (work / "fetched").exists():
            time.sleep(1.0)
        fetched = (work / "fetched").exists()
    except Ended:
        shutil.rmtree(work, ignore_errors=True)
        return 143
    shutil.rmtree(work, ignore_errors=True)
    if not fetched:
        print(f"bwn: the driver did not fetch {tag}'s result within {config.get('fetch_wait_s')} s; "
              "removed (the driver counts the attempt as lost and runs it again)", file=sys.stderr)
        return EXIT_NOT_FETCHED
    return batch_exit(result)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bwn.reproduce.slurm_node",
        description="The node's side of a bwn Slurm sweep (run by the batch script bwn/reproduce/slurm.py writes).")
    sub = parser.add_subparsers(dest="command", required=True)
    task = sub.add_parser("task", help="run one array task; the submission's JSON on standard input")
    task.add_argument("--index", type=int, required=True, help="the array index (SLURM_ARRAY_TASK_ID)")
    sub.add_parser("fingerprint", help="print this checkout's code fingerprint and its uncommitted run code")
    args = parser.parse_args(argv)
    if args.command == "fingerprint":
        state = fp.code_state(REPO)
        print(state.fingerprint, *(f"uncommitted run code: {d}" for d in state.dirty), sep="\n")
        return 0
    config = json.load(sys.stdin)
    if not 0 <= args.index < len(config["tasks"]):
        print(f"bwn: array index {args.index} out of range ({len(config['tasks'])} tasks)", file=sys.stderr)
        return 2
    return run_task(config, args.index)


if __name__ == "__main__":
    sys.exit(main())
