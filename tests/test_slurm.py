"""Sweeps on Slurm (bwn/reproduce/slurm.py, slurm_node.py), against a real single-node
Slurm from Debian's packages (tests/slurm_cluster.py) where the test says so.

What a user relies on: every task of the array runs and reports its node; a task
whose process dies is submitted again and completes; a task that keeps failing is
reported failed after its tries, never dropped; a node whose code differs is
refused, by name, and the sweep cancelled; without a shared filesystem the run
folders come home; an interrupted driver follows its jobs instead of submitting
them twice; and a cluster's teardown leaves no daemon, process, file or port.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

from needs import missing
from slurm_cluster import (SlurmCluster, marked_pids, slurm_cluster, slurm_missing,  # noqa: F401 (fixture)
                           system_places_snapshot)

from bwn.reproduce import fingerprint as fp
from bwn.reproduce import slurm as sl
from bwn.reproduce import slurm_sweep as sweep

REPO = Path(__file__).resolve().parents[1]


def _clean_checkout() -> None:
    """The driver checks nodes against its commit, so its run code must be committed."""
    try:
        dirty = fp.code_state().dirty
    except fp.FingerprintError as exc:
        missing(str(exc), "Slurm sweeps")
        return
    missing(f"run code differs from the commit ({', '.join(dirty)}): commit to test sweeps" if dirty else None,
            "Slurm sweeps")


def _options(cluster: SlurmCluster, **kw) -> sl.SlurmOptions:
    return sl.SlurmOptions(**{"poll_s": 0.3, "lost_grace_s": 3.0, "env": cluster.env, **kw})


def _sweep(cluster: SlurmCluster, tasks, out: Path, lines: list[str] | None = None, **kw) -> sl.SweepOutcome:
    log = lines if lines is not None else []
    return sweep.run_sweep(tasks, out, out / "slurm", _options(cluster, **kw), progress=log.append)


def _attempts(out: Path) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for key, att in sweep.iter_attempts(out / "slurm"):
        found.setdefault(key, []).append(att)
    return found


def _job_gone(cluster: SlurmCluster, timeout_s: float = 60) -> None:
    """Wait until Slurm runs nothing (a task's own cleanup ends after the driver returns)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = subprocess.run(["squeue", "-h", "-o", "%T"], env=cluster.env, capture_output=True,
                                text=True).stdout.split()
        if not states:
            return
        time.sleep(0.3)
    raise AssertionError(f"jobs still in Slurm: {states}")


def _clone(tmp_path: Path) -> Path:
    """A git clone of this commit, with this working tree's node-side script."""
    node = tmp_path / "node-checkout"
    subprocess.run(["git", "clone", "--quiet", "--shared", str(REPO), str(node)], check=True)
    (node / "bwn" / "reproduce").mkdir(exist_ok=True)
    shutil.copy(REPO / "bwn" / "reproduce" / "slurm_node.py", node / "bwn" / "reproduce" / "slurm_node.py")
    return node


# ---------------------------------------------------------------------------------------
# Without Slurm


def test_batch_script_runs_the_task_of_its_array_index_and_records_its_node(tmp_path):
    _clean_checkout()
    out, state = tmp_path / "out", tmp_path / "out" / "slurm"
    tasks = [sl.Task(f"k{i}", ("sh", "-c", f"mkdir -p {{run}} && echo k{i} > {{run}}/who"), f"runs/k{i}")
             for i in range(3)]
    opts = sl.SlurmOptions()
    script = tmp_path / "s.sh"
    script.write_text(sl.batch_script(tasks, opts, fp.code_state().fingerprint, out, state))
    env = {**os.environ, "SLURM_ARRAY_JOB_ID": "41", "SLURM_ARRAY_TASK_ID": "1", "SLURMD_NODENAME": "nodeX"}
    res = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (out / "runs" / "k1" / "who").read_text() == "k1\n"
    assert not (out / "runs" / "k0").exists() and not (out / "runs" / "k2").exists()
    result = json.loads((state / "results" / "41_1.json").read_text())
    assert (result["key"], result["status"], result["node"], result["exit_code"]) == ("k1", "ok", "nodeX", 0)
    assert json.loads((out / "runs" / "k1" / "slurm-task.json").read_text())["node"] == "nodeX"


def test_sbatch_arguments_pass_partition_time_limit_concurrency_and_extra_arguments(tmp_path):
    opts = sl.SlurmOptions(partition="p4", time_limit="0:30:00", max_parallel=4,
                           sbatch_args=("--constraint=bmv2", "--account=x"))
    argv = sl.sbatch_arguments(10, opts, tmp_path / "s.sh", tmp_path)
    assert "--array=0-9%4" in argv and "--exclusive" in argv and "--requeue" in argv
    assert "--partition=p4" in argv and "--time=0:30:00" in argv
    assert argv[-3:] == ["--constraint=bmv2", "--account=x", str(tmp_path / "s.sh")]
    assert "--array=0-2" in sl.sbatch_arguments(3, sl.SlurmOptions(), tmp_path / "s.sh", tmp_path)


@pytest.mark.parametrize("make, words", [
    (lambda: sl.Task("", ("true",), "a"), "key"),
    (lambda: sl.Task("k", (), "a"), "empty argv"),
    (lambda: sl.Task("k", ("true",), "../a"), "inside the output folder"),
    (lambda: sl.Task("k", ("true",), "/abs"), "inside the output folder"),
    (lambda: sl.SlurmOptions(max_tries=0), "max_tries"),
    (lambda: sl.SlurmOptions(max_parallel=0), "max_parallel"),
    (lambda: sl.SlurmOptions(transfer="scp"), "transfer"),
    (lambda: sl.SlurmOptions(transfer="srun"), "node_spool"),
    (lambda: sl.SlurmOptions(job_name="a b"), "job name"),
])
def test_bad_tasks_and_options_are_refused_with_the_reason(make, words):
    with pytest.raises(ValueError, match=words):
        make()


def test_duplicate_keys_are_refused(tmp_path):
    tasks = [sl.Task("k", ("true",), "a"), sl.Task("k", ("true",), "b")]
    with pytest.raises(ValueError, match="unique: k"):
        sweep.run_sweep(tasks, tmp_path, tmp_path / "s", sl.SlurmOptions())


def test_a_bundle_that_would_write_outside_its_folder_is_refused(tmp_path):
    bundle = tmp_path / "b.tar"
    (tmp_path / "evil").write_text("x")
    with tarfile.open(bundle, "w") as tar:
        tar.add(tmp_path / "evil", arcname="../evil")
    with pytest.raises(tarfile.TarError, match="unsafe"):
        sweep._unpack(bundle, tmp_path / "dest")
    assert not (tmp_path / "dest").exists() or not any((tmp_path / "dest").iterdir())


# ---------------------------------------------------------------------------------------
# On a real single-node Slurm


def _writer(key: str, extra: str = "") -> sl.Task:
    """A task that appends one line per run to its run folder's ``runs``."""
    return sl.Task(key, ("sh", "-c", f"mkdir -p {{run}} && {extra} echo \"$SLURMD_NODENAME\" >> {{run}}/runs"),
                   f"grid/{key}")


def test_a_job_array_runs_every_task_on_the_node(slurm_cluster, tmp_path):
    _clean_checkout()
    out = tmp_path / "out"
    lines: list[str] = []
    outcome = _sweep(slurm_cluster, [_writer(f"t{i}") for i in range(3)], out, lines, max_parallel=2)
    assert outcome.ok and sorted(outcome.done) == ["t0", "t1", "t2"]
    assert outcome.nodes == {f"t{i}": slurm_cluster.node for i in range(3)}
    for i in range(3):
        assert (out / "grid" / f"t{i}" / "runs").read_text() == f"{slurm_cluster.node}\n"
        assert json.loads((out / "grid" / f"t{i}" / "slurm-task.json").read_text())["node"] == slurm_cluster.node
    script = (out / "slurm" / "submissions" / "0001.sh").read_text()
    assert script.count('"key": ') == 3
    assert any("submitted 3 task(s)" in line and "at most 2 at a time" in line for line in lines)
    assert lines[-1] == "slurm: 0 queued, 0 running, 3 done, 0 failed of 3"


def test_a_killed_task_is_submitted_again_and_completes(slurm_cluster, tmp_path):
    _clean_checkout()
    out = tmp_path / "out"
    run = out / "grid" / "victim"
    # Each run records its pid and waits for `go`; the first is killed on the node.
    task = _writer("victim", extra="echo $$ > {run}/pid && while [ ! -e {run}/go ]; do sleep 0.1; done &&")
    killed: list[int] = []

    def kill_first_run() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (run / "pid").exists():
            time.sleep(0.1)
        time.sleep(0.3)
        pid = int((run / "pid").read_text())
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        (run / "pid").unlink()
        (run / "go").touch()
    killer = threading.Thread(target=kill_first_run, daemon=True)
    killer.start()
    lines: list[str] = []
    outcome = _sweep(slurm_cluster, [task, _writer("bystander")], out, lines, max_tries=3)
    killer.join(timeout=5)
    assert killed, "the task never started"
    assert outcome.ok, outcome.failed
    attempts = _attempts(out)["victim"]
    assert [a["state"] for a in attempts] == ["failed", "ok"]
    assert attempts[0]["result"]["exit_code"] == 128 + signal.SIGKILL
    assert attempts[1]["array_job"] != attempts[0]["array_job"]       # a new submission
    assert (run / "runs").read_text() == f"{slurm_cluster.node}\n"    # the second run's line
    assert [a["state"] for a in _attempts(out)["bystander"]] == ["ok"]
    assert any("victim: try 1/3 failed: exit 137" in line for line in lines)


def test_a_task_over_its_tries_is_reported_failed_not_dropped(slurm_cluster, tmp_path):
    _clean_checkout()
    out = tmp_path / "out"
    lines: list[str] = []
    bad = sl.Task("bad", ("sh", "-c", "echo broken >&2; exit 3"), "grid/bad")
    outcome = _sweep(slurm_cluster, [bad, _writer("good")], out, lines, max_tries=2)
    assert not outcome.ok
    assert list(outcome.failed) == ["bad"] and "exit 3" in outcome.failed["bad"]
    assert list(outcome.done) == ["good"]
    assert [a["state"] for a in _attempts(out)["bad"]] == ["failed", "failed"]
    assert any(line.startswith("bad: FAILED after 2 tries") for line in lines)
    log = Path(outcome.failed["bad"].rsplit("log ", 1)[1])
    assert "broken" in log.read_text()


def test_a_node_with_other_code_is_refused_by_name_and_the_sweep_cancelled(slurm_cluster, tmp_path):
    _clean_checkout()
    node = _clone(tmp_path)
    target = node / "controller" / "__init__.py"
    target.write_text(target.read_text() + "# another version\n")
    subprocess.run(["git", "-C", str(node), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "x"],
                   check=True)
    out = tmp_path / "out"
    tasks = [_writer(f"t{i}") for i in range(3)]
    with pytest.raises(sl.FingerprintMismatch) as err:
        _sweep(slurm_cluster, tasks, out, node_repo=str(node), node_python=sys.executable)
    assert err.value.nodes == [slurm_cluster.node]
    assert slurm_cluster.node in str(err.value) and fp.code_state(node).fingerprint in str(err.value)
    assert not (out / "grid").exists()                              # nothing ran
    states = {k: [a["state"] for a in v] for k, v in _attempts(out).items()}
    assert states["t0"] == ["refused"]
    assert all(s[-1] in ("refused", "cancelled") for s in states.values())
    _job_gone(slurm_cluster)


def test_without_a_shared_filesystem_the_run_folders_come_home_through_srun(slurm_cluster, tmp_path):
    _clean_checkout()
    out, spool = tmp_path / "out", tmp_path / "node-spool"
    spool.mkdir()
    task = sl.Task("far", ("sh", "-c", "mkdir -p {run}/sub && echo far > {run}/sub/data && pwd > {run}/where"),
                   "grid/far")
    outcome = _sweep(slurm_cluster, [task, _writer("near")], out, transfer="srun", node_spool=str(spool))
    assert outcome.ok, outcome.failed
    assert (out / "grid" / "far" / "sub" / "data").read_text() == "far\n"
    assert json.loads((out / "grid" / "far" / "slurm-task.json").read_text())["node"] == slurm_cluster.node
    assert (out / "grid" / "near" / "runs").read_text() == f"{slurm_cluster.node}\n"
    assert outcome.done["far"]["node"] == slurm_cluster.node
    _job_gone(slurm_cluster)
    # the node kept only Slurm's batch output; its work folders are gone
    assert sorted(p.name for p in spool.iterdir()) == sorted(f"bwn-{a['array_job']}_{a['index']}.out"
                                                            for v in _attempts(out).values() for a in v)


def test_an_interrupted_driver_follows_its_jobs_instead_of_submitting_them_again(slurm_cluster, tmp_path):
    _clean_checkout()
    out = tmp_path / "out"
    tasks = [_writer(f"t{i}", extra="sleep 1 &&") for i in range(3)]

    def interrupt_after_submitting(line: str) -> None:
        if line.startswith("submitted"):
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(tasks, out, out / "slurm", _options(slurm_cluster), progress=interrupt_after_submitting)
    lines: list[str] = []
    outcome = _sweep(slurm_cluster, tasks, out, lines)
    assert outcome.ok, outcome.failed
    assert not any(line.startswith("submitted") for line in lines)          # followed, not resubmitted
    assert sum("following its attempt from an earlier invocation" in line for line in lines) == 3
    for i in range(3):
        assert (out / "grid" / f"t{i}" / "runs").read_text() == f"{slurm_cluster.node}\n"   # ran once


def test_a_second_driver_on_the_same_sweep_is_refused(tmp_path):
    state = tmp_path / "slurm"
    with sweep._Lock(state / "driver.lock"):
        with pytest.raises(sl.SlurmError, match="another driver follows this sweep"):
            with sweep._Lock(state / "driver.lock"):
                pass


def test_a_task_preempted_and_requeued_by_slurm_counts_a_try_and_completes(slurm_cluster, tmp_path):
    _clean_checkout()
    out = tmp_path / "out"
    run = out / "grid" / "pre"
    # The first run waits until Slurm requeues it; the requeued run (SLURM_RESTART_COUNT=1) goes through.
    task = _writer("pre", extra='touch {run}/started && while [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; '
                                'do sleep 0.1; done &&')

    def requeue_first_run() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (run / "started").exists():
            time.sleep(0.1)
        (run / "started").unlink()
        job = json.loads((out / "slurm" / "state.json").read_text())["tasks"]["pre"]["attempts"][0]
        subprocess.run(["scontrol", "requeue", f"{job['array_job']}_{job['index']}"], env=slurm_cluster.env,
                       check=True, capture_output=True)
    threading.Thread(target=requeue_first_run, daemon=True).start()
    lines: list[str] = []
    outcome = _sweep(slurm_cluster, [task], out, lines, max_tries=3)
    assert outcome.ok, outcome.failed
    (attempt,) = _attempts(out)["pre"]
    assert attempt["restarts"] == 1 and attempt["result"]["restart_count"] == 1
    assert any("pre: requeued by Slurm" in line and "try 2/3" in line for line in lines)


# ---------------------------------------------------------------------------------------
# The cluster itself


def _assert_nothing_left(cluster: SlurmCluster, before: dict[str, list[str]]) -> None:
    assert all(p.poll() is not None for p in cluster.procs.values()), "a daemon still runs"
    assert marked_pids(cluster.base) == []
    assert not cluster.base.exists()
    assert cluster.ports_open() == []
    assert system_places_snapshot() == before


def test_teardown_leaves_no_daemon_job_file_or_port_even_with_a_job_running(tmp_path):
    missing(slurm_missing(), "Slurm")
    before = system_places_snapshot()
    cluster = SlurmCluster()
    with cluster:
        job = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", "--wrap", "sleep 600"], env=cluster.env,
                             capture_output=True, text=True, check=True).stdout.strip()
        deadline = time.monotonic() + 60
        while "RUNNING" not in subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], env=cluster.env,
                                              capture_output=True, text=True).stdout:
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.2)
        assert any(Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\0" + b"600\0"
                   for pid in marked_pids(cluster.base)), "the job's process carries the marker"
    _assert_nothing_left(cluster, before)
    assert cluster.stragglers == []            # Slurm ended the job itself: nothing had to be killed


def test_a_failure_inside_the_cluster_still_tears_it_down():
    missing(slurm_missing(), "Slurm")
    before = system_places_snapshot()
    cluster = SlurmCluster()
    with pytest.raises(RuntimeError, match="boom"):
        with cluster:
            raise RuntimeError("boom")
    _assert_nothing_left(cluster, before)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_to_the_process_holding_a_cluster_tears_it_down(sig):
    missing(slurm_missing(), "Slurm")
    before = system_places_snapshot()
    holder = subprocess.Popen([sys.executable, str(Path(__file__).with_name("slurm_cluster.py"))],
                              stdout=subprocess.PIPE, text=True)
    try:
        first = holder.stdout.readline().split()
        assert first[:1] == ["ready"], first
        base = Path(first[1])
        assert marked_pids(base)                                          # the daemons run
        holder.send_signal(sig)
        assert holder.wait(timeout=120) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert marked_pids(base) == []
    assert not base.exists()
    assert system_places_snapshot() == before
