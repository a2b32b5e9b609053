"""The JSON Schema of scenario files, from the declared models (``make schema``).

``docs/scenario.schema.json`` is this module's output, committed so that editors
(taplo / Even Better TOML, ``.taplo.toml``) validate ``.toml`` scenarios as they
are typed (docs/config.md, "Editors"); a test keeps it current.
``python -m bwn.scenario.schema`` prints it.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Optional

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue

from bwn.scenario.model import ScenarioFile


class _TomlSchema(GenerateJsonSchema):
    """JSON Schema draft 7 (what taplo / Even Better TOML and most editors read) of a
    TOML document: TOML has no null, so an optional key is one that may be absent,
    not one that may be null; titles come from the tables, not from every key."""

    def nullable_schema(self, schema: Any) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: Any) -> JsonSchemaValue:
        out = super().default_schema(schema)
        if out.get("default", 0) is None:
            del out["default"]
        return out

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def generate(self, schema: Any, mode: Any = "validation") -> JsonSchemaValue:
        out = super().generate(schema, mode)
        out = {"$schema": "http://json-schema.org/draft-07/schema#", **out}
        if "$defs" in out:
            out["definitions"] = out.pop("$defs")
        return out


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file (docs/scenario.schema.json)."""
    return ScenarioFile.model_json_schema(mode="validation", schema_generator=_TomlSchema,
                                          ref_template="#/definitions/{model}")


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=False) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bwn.scenario.schema",
        description="Print the JSON Schema of bwn scenario files (docs/scenario.schema.json).")
    parser.add_argument("--out", help="write it to this file instead of stdout")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    text = json_schema_text()
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
