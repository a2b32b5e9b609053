"""The code a run executes, as one fingerprint: which runs may be pooled.

A claim's runs are pooled only when they were made by the same code: the P4
program, the agents, the controller, the link emulator, the runner and the
topology (:data:`RUN_CODE`). The fingerprint is a hash of those files' git blob
ids, so it is the same on every machine and at every commit where those files
are the same, and it ignores everything a run does not execute (the analysis,
``bwn reproduce`` itself, docs, tests). A tree where one of them differs from
the commit (modified or untracked) has no fingerprint a later run can match:
:func:`dirty_files` names them, and ``bwn reproduce`` refuses to run there.
"""
from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from bwn.paths import REPO

#: What a run executes (git pathspecs, from the repository root): the P4 programs
#: of both targets a grid case may run on (BMv2's v1model, the eBPF switch's PSA),
#: the controller with both targets' adapters, the agents, the Mininet nodes, and
#: bwn's run-time layers (the scenario resolver, the link emulator, the runner).
#: One fingerprint covers both targets, so a change to either one's code starts a
#: new pool for every run: stricter than needed for a BMv2 run, never looser.
RUN_CODE: tuple[str, ...] = (
    "p4src/shared", "p4src/v1model", "p4src/psa", "controller", "hosts", "topologies/nodes.py", "bwn",
)
#: ... except what reads or judges runs but never makes one (the analysis, this
#: package, the command line), and Tofino's adapter (no grid runs on Tofino). The
#: scenario a run was made with has a fingerprint of its own (bwn.reproduce.plan).
NOT_RUN_CODE: tuple[str, ...] = ("bwn/analysis", "bwn/reproduce", "bwn/cli", "controller/tofino.py")


class FingerprintError(RuntimeError):
    """The checkout cannot say what code it holds (not a git checkout, git missing)."""


def is_run_code(path: str) -> bool:
    """Is this repository path part of what a run executes?"""
    def under(prefix: str) -> bool:
        return path == prefix or path.startswith(prefix + "/")
    return any(under(p) for p in RUN_CODE) and not any(under(p) for p in NOT_RUN_CODE)


def _git(*words: str, repo: Path = REPO) -> str:
    try:
        res = subprocess.run(["git", "-C", str(repo), *words], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FingerprintError(f"git failed: {exc}") from exc
    if res.returncode != 0:
        raise FingerprintError(f"`git {' '.join(words)}` failed: {res.stderr.strip()}")
    return res.stdout


@dataclass(frozen=True)
class CodeState:
    """The run code of a checkout: its fingerprint, commit and what is uncommitted."""

    fingerprint: str
    commit: str
    dirty: tuple[str, ...]

    @property
    def clean(self) -> bool:
        return not self.dirty


def blobs(commit: str = "HEAD", repo: Path = REPO) -> dict[str, str]:
    """path -> git blob id of every run-code file at ``commit``."""
    out = _git("ls-tree", "-r", "--full-tree", commit, "--", *RUN_CODE, repo=repo)
    found: dict[str, str] = {}
    for line in out.splitlines():
        meta, _, path = line.partition("\t")
        if is_run_code(path):
            found[path] = meta.split()[2]
    return found


def fingerprint_of(blob_ids: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for path in sorted(blob_ids):
        digest.update(f"{path}\0{blob_ids[path]}\n".encode())
    return digest.hexdigest()[:16]


def dirty_files(repo: Path = REPO) -> tuple[str, ...]:
    """Run-code files that differ from HEAD: modified, staged, deleted or untracked."""
    out = _git("status", "--porcelain", "--untracked-files=all", "--", *RUN_CODE, repo=repo)
    paths = (line[3:].split(" -> ")[-1] for line in out.splitlines() if line.strip())
    return tuple(sorted(p for p in paths if is_run_code(p)))


def code_state(repo: Path = REPO) -> CodeState:
    commit = _git("rev-parse", "--short=12", "HEAD", repo=repo).strip()
    return CodeState(fingerprint_of(blobs("HEAD", repo)), commit, dirty_files(repo))


def files_differing(commit: str, repo: Path = REPO) -> Optional[list[str]]:
    """Run-code files that differ between ``commit`` and HEAD, or None when
    ``commit`` is not in this repository (a run made from a commit never pushed)."""
    try:
        _git("cat-file", "-e", f"{commit}^{{commit}}", repo=repo)
    except FingerprintError:
        return None
    out = _git("diff", "--name-only", commit, "HEAD", "--", *RUN_CODE, repo=repo)
    return sorted(line for line in out.splitlines() if line and is_run_code(line))
