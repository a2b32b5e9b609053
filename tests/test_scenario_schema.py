"""The declared scenario format (bwn/scenario/model.py) and its JSON Schema in docs/
(bwn/scenario/schema.py)."""
from __future__ import annotations

import copy
import json
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
    import tomli as tomllib  # type: ignore[no-redef]
from pathlib import Path

import jsonschema
import pytest

from bwn.scenario import config as cfg
from bwn.scenario import model as sc
from bwn.scenario import schema as scenario_schema

REPO = Path(__file__).resolve().parents[1]
SCHEMA_FILE = REPO / "docs" / "scenario.schema.json"
SHIPPED = sorted((REPO / "topologies" / "scenarios").glob("*.toml")) + \
    sorted((REPO / "topologies" / "configs").glob("*.toml"))
EXAMPLE = REPO / "topologies" / "configs" / "example-dumbbell.toml"


def validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def toml(path: Path) -> dict:
    with path.open("rb") as fh:
        return tomllib.load(fh)


def test_committed_schema_is_up_to_date():
    assert SCHEMA_FILE.read_text() == scenario_schema.json_schema_text(), \
        "docs/scenario.schema.json is stale: run `make schema` and commit it"


def test_there_are_shipped_scenarios():
    assert len(SHIPPED) >= 8 and EXAMPLE in SHIPPED


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_scenario_is_valid_against_the_json_schema(path):
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator().iter_errors(toml(path))]
    assert errors == []
    cfg.load_config(path)          # and against the model itself


# Structural mistakes: the JSON Schema (what an editor shows) and the model (what
# `bwn run` says) must both reject each, at the same place.
MISTAKES = [
    ("unknown top-level table", lambda d: d.update(extras={}), [], "extras"),
    ("unknown key in a link", lambda d: d["links"][0].update(delay=3), ["links", 0], "links[0].delay"),
    ("schedule kind misspelt", lambda d: d["links"][0]["schedule"].update(kind="sin"),
     ["links", 0, "schedule"], "links[0].schedule.kind"),
    ("key of another kind", lambda d: d["links"][0]["schedule"].update(b_mbit=3),
     ["links", 0, "schedule"], "links[0].schedule.b_mbit"),
    ("loss above 1", lambda d: d["links"][0].update(loss=1.5), ["links", 0, "loss"], "links[0].loss"),
    ("queue not an integer", lambda d: d["links"][0].update(queue_packets=2.5),
     ["links", 0, "queue_packets"], "links[0].queue_packets"),
    ("rate zero", lambda d: d["links"][0]["schedule"].update(rate_mbit=0),
     ["links", 0, "schedule"], "links[0].schedule.rate_mbit"),
    ("rate beyond the dataplane", lambda d: d["links"][0]["schedule"].update(rate_mbit=3e6),
     ["links", 0, "schedule"], "links[0].schedule.rate_mbit"),
    ("no switches", lambda d: d.update(switches=[]), ["switches"], "switches"),
    ("switches missing", lambda d: d.pop("switches"), [], "switches"),
    ("bad node name", lambda d: d["hosts"][0].update(name="1h"), ["hosts", 0, "name"], "hosts[0].name"),
    ("node name too long", lambda d: d["hosts"][0].update(name="h" * 11), ["hosts", 0, "name"],
     "hosts[0].name"),
    ("address without prefix", lambda d: d["hosts"][0].update(ip="10.0.1.1"), ["hosts", 0, "ip"],
     "hosts[0].ip"),
    ("window not a power of two", lambda d: d.update(dataplane={"window_us": 1000}),
     ["dataplane", "window_us"], "dataplane.window_us"),
    ("unknown algorithm", lambda d: d["experiment"].update(schemes=["cubic"]),
     ["experiment", "schemes", 0], "experiment.schemes[0]"),
    ("unknown flow scheme", lambda d: d["flows"][0].update(scheme="cubic"),
     ["flows", 0, "scheme"], "flows[0].scheme"),
    ("string for a number", lambda d: d["flows"][0].update(start_s="1"),
     ["flows", 0, "start_s"], "flows[0].start_s"),
    ("boolean for a number", lambda d: d["experiment"].update(duration_s=True),
     ["experiment", "duration_s"], "experiment.duration_s"),
    ("table as a parameter", lambda d: d["flows"][0].update(params={"x": {"y": 1}}),
     ["flows", 0, "params", "x"], "flows[0].params.x"),
    ("capture links not an array", lambda d: d.update(capture={"links": "bottleneck"}),
     ["capture", "links"], "capture.links"),
]


@pytest.mark.parametrize("name, mutate, schema_path, model_loc", MISTAKES,
                         ids=[m[0] for m in MISTAKES])
def test_schema_and_model_reject_the_same_mistakes(name, mutate, schema_path, model_loc):
    data = copy.deepcopy(toml(EXAMPLE))
    mutate(data)
    schema_errors = list(validator().iter_errors(data))
    assert schema_errors, f"the JSON Schema accepts: {name}"
    assert any(list(e.absolute_path) == schema_path for e in schema_errors), \
        [(list(e.absolute_path), e.message) for e in schema_errors]
    with pytest.raises(cfg.ConfigError) as err:
        cfg.validate(data, base_dir=EXAMPLE.parent)
    assert any(e.startswith(model_loc + ":") for e in err.value.errors), err.value.errors


def test_schema_documents_defaults_and_units():
    schema = json.loads(SCHEMA_FILE.read_text())
    link = schema["definitions"]["LinkTable"]["properties"]
    assert link["queue_packets"]["default"] == sc.DEFAULT_QUEUE_PACKETS
    assert "ms" in link["delay_ms"]["description"]
    # TOML has no null: an optional key may be absent, never null.
    assert "null" not in SCHEMA_FILE.read_text()


def test_taplo_config_points_editors_at_the_schema():
    taplo = toml(REPO / ".taplo.toml")
    rules = [r for r in taplo["rule"] if r.get("schema", {}).get("path") == "docs/scenario.schema.json"]
    assert rules, ".taplo.toml has no rule with the scenario schema"
    covered = {p for rule in rules for pattern in rule["include"] for p in REPO.glob(pattern)}
    assert set(SHIPPED) <= covered


def test_capture_links_must_name_links():
    data = toml(EXAMPLE)
    data["capture"] = {"links": ["bottleneck", "nowhere"]}
    with pytest.raises(cfg.ConfigError) as err:
        cfg.validate(data, base_dir=EXAMPLE.parent)
    assert err.value.errors == ["capture.links[1]: unknown link 'nowhere' (links: h1-s1, h3-s1, "
                                "bottleneck, s2-h2)"]
    data["capture"] = {"links": ["bottleneck"]}
    assert cfg.validate(data, base_dir=EXAMPLE.parent).capture_links == ("bottleneck",)
    assert cfg.load_config(EXAMPLE).capture_links is None


def test_schema_command_prints_or_writes_the_committed_schema(tmp_path, capsys):
    """`make schema`'s command: to stdout, or to --out; both the committed file's text."""
    committed = (REPO / "docs" / "scenario.schema.json").read_text()
    assert scenario_schema.main([]) == 0
    assert capsys.readouterr().out == committed
    out = tmp_path / "schema.json"
    assert scenario_schema.main(["--out", str(out)]) == 0
    assert out.read_text() == committed and capsys.readouterr().out == ""
