"""`bwn doctor`: a line per component, exit 1 naming what a required one lacks,
and the kernel probe leaves no namespace behind."""
from __future__ import annotations

import argparse
import json
import os
import subprocess

import pytest

from bwn.cli import doctor
from bwn.cli import main as cli


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(json=kw.get("json", False))


def test_every_component_has_a_line_and_the_exit_says_if_a_required_one_is_missing(capsys):
    items = [doctor.Component("p4c", True, "p4c 1.2"),
             doctor.Component("fast BMv2", False, "not installed", required=False)]
    assert doctor.main(_args(), lambda: items) == 0            # an optional one may be absent
    out, err = capsys.readouterr()
    assert out.splitlines() == ["ok       p4c        p4c 1.2", "absent   fast BMv2  not installed"]
    assert err == ""
    items.append(doctor.Component("Mininet", False, "apt-get install mininet"))
    assert doctor.main(_args(), lambda: items) == 1
    out, err = capsys.readouterr()
    assert "MISSING  Mininet    apt-get install mininet" in out
    assert err.strip() == "bwn doctor: missing: Mininet"
    assert doctor.main(_args(json=True), lambda: items) == 1
    data = json.loads(capsys.readouterr().out)
    assert [d["mark"] for d in data] == ["ok", "absent", "MISSING"]


def test_an_unbuilt_switch_program_is_reported_but_not_a_missing_install(monkeypatch, capsys):
    monkeypatch.setattr(doctor.requirements, "pipeline_missing", lambda: "no build/bwn.json")
    (item,) = [c for c in doctor.components() if c.name == "compiled switch program"]
    assert (item.mark, item.detail) == ("absent", "no build/bwn.json (make build; make test and make run build it)")


def test_the_real_checks_name_the_components_make_deps_installs(capsys):
    names = [c.name for c in doctor.components()]
    for wanted in ("p4c", "BMv2 (simple_switch_grpc)", "fast BMv2", "PI (P4Runtime server library)",
                   "Mininet", "Python packages", "compiled switch program", "root",
                   "kernel queueing disciplines"):
        assert wanted in names
    rc = cli.main(["doctor"])
    out = capsys.readouterr().out
    assert rc in (0, 1) and len(out.splitlines()) == len(names)


@pytest.mark.skipif(os.geteuid() != 0, reason="the qdisc probe needs root")
def test_the_qdisc_probe_finds_htb_and_leaves_no_namespace():
    probes = doctor._probe_qdiscs({"htb": doctor.QDISC_PROBES["htb"], "bogus": ["root", "nosuchqdisc"]})
    assert probes["htb"] is None                # bwn's link rates need it; every supported kernel has it
    assert probes["bogus"]                      # tc's own message
    after = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"bwn-doctor-{os.getpid()}" not in after
