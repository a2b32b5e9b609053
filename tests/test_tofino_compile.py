"""Compile p4src/tna/bwn.p4 with p4c's open-source Tofino back end, and hold it to
its resource budget (docs/tofino.md).

Runs wherever the Tofino back end is installed (`make toolchain-tofino` puts
`p4c-barefoot` beside p4c); otherwise the module skips with one line. It is not
part of the prebuilt BMv2 toolchain CI installs, so BWN_REQUIRE_P4 does not make
this module fail.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from controller import tofino

REPO = Path(__file__).resolve().parents[1]
PROGRAM = REPO / "p4src" / "tna" / "bwn.p4"

if not (shutil.which("p4c-barefoot") and shutil.which("p4c")):
    pytest.skip("p4c's Tofino back end (p4c-barefoot) is not installed: make toolchain-tofino",
                allow_module_level=True)

# The budget: what the program may use and still leave the headroom
# docs/tofino.md promises. A change that needs more fails here, with the numbers.
STAGES = {"tofino": 12, "tofino2": 20}              # MAU stages of the chip: the program must fit
# (docs/tofino.md: Tofino 1 uses 11 of 12 today, the egress AB chain binding)


def compile_tna(target: str, out: Path) -> subprocess.CompletedProcess:
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        ["p4c", "--target", target, "--arch", "tna" if target == "tofino" else "t2na", "--std", "p4-16",
         "-g", "--p4runtime-force-std-externs", "-I", str(REPO / "p4src"),
         "-o", str(out), "--p4runtime-files", str(out / "bwn.p4info.txtpb"),
         "--bf-rt-schema", str(out / "bfrt.json"), str(PROGRAM)],
        capture_output=True, text=True, timeout=1800, cwd=REPO)


@pytest.fixture(scope="module", params=["tofino", "tofino2"])
def compiled(request, tmp_path_factory):
    target = request.param
    out = tmp_path_factory.mktemp(target)
    res = compile_tna(target, out)
    return target, out, res


def resources(out: Path) -> dict:
    found = sorted(out.rglob("resources.json"))
    assert found, f"no resources.json under {out}: {sorted(p.name for p in out.rglob('*'))[:40]}"
    return json.loads(found[0].read_text())["resources"]


def stages_used(res: dict) -> int:
    """MAU stages up to the last one holding a logical table (ingress and egress
    share the stages)."""
    used = [s["stage_number"] for s in res["mau"]["mau_stages"] if s["logical_tables"]["ids"]]
    return max(used) + 1 if used else 0


def test_tna_program_compiles_for_tofino(compiled):
    target, out, res = compiled
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert any(out.rglob("context.json")), "no context.json: the back end did not finish"
    assert any(out.rglob(f"{target}.bin")) or any(out.rglob("tofino*.bin")), "no binary"


def test_tna_program_stays_within_its_stage_budget(compiled):
    target, out, res = compiled
    assert res.returncode == 0, "does not compile (see the compile test)"
    r = resources(out)
    assert r["mau"]["nStages"] == STAGES[target]
    used = stages_used(r)
    assert 0 < used <= STAGES[target], f"{target}: {used} stages used, budget {STAGES[target]}"


def test_p4info_keeps_the_names_the_controller_uses(compiled):
    """controller/tofino.py and controller/entries.py address these by name."""
    target, out, res = compiled
    assert res.returncode == 0
    p4info = (out / "bwn.p4info.txtpb").read_text()
    for name in ("BwnIngress.ipv4_lpm", "BwnIngress.route", "BwnIngress.route_checked",
                 "BwnIngress.window_config", "BwnIngress.roll_window", "BwnIngress.reservations",
                 "BwnIngress.reserved_flow", "BwnEgress.port_config", "BwnEgress.set_port_14",
                 "BwnEgress.flows_log", "BwnEgress.set_share", "BwnEgress.avail_kbps",
                 *tofino.TELEMETRY_REGISTERS.values(), *tofino.TELEMETRY_COUNTERS.values()):
        assert f'"{name}"' in p4info or f'.{name}"' in p4info, f"{name} not in the P4Info"


def test_the_controllers_tofino_entries_encode_against_the_compiled_p4info(compiled):
    """Every entry controller/tofino.py (and entries.py for reservations) builds for
    a Tofino switch is accepted by the P4Info bf-p4c wrote: names, widths, params."""
    import finsy as fy

    from controller import entries as en
    from controller import tofino as tf

    target, out, res = compiled
    assert res.returncode == 0
    schema = fy.P4Schema(out / "bwn.p4info.txtpb")
    ports = tf.PortMap.of([136, 140])
    window = en.WindowConfig()
    entries = [tf.route("10.0.1.0/24", ports[136], "00:00:00:00:01:01", "00:00:00:00:02:02"),
               tf.route("10.0.2.0/24", ports[140], "00:00:00:00:01:01", "00:00:00:00:02:02",
                        en.PortOptions(loss=0.1, reservations=True, af_queue_packets=20)),
               tf.port_capacity(ports[136], 10e6, window), *tf.window_config(window), *tf.static_tables()]
    entry, meter = en.reservation(en.Reservation(src="10.0.1.1", dst="10.0.2.1", rate_bps=4e6))
    for e in [*entries, entry, meter]:
        assert e.encode(schema).SerializeToString()
