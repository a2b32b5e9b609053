"""Located, readable messages for a scenario that fails validation.

pydantic reports each problem as an error record: a location (``links.0.schedule.
sine.rate_mbit``), a type (``greater_than``) and the value. :func:`messages` turns
each into one line in the file's own terms: the TOML path (``links[0].schedule.
rate_mbit``: a tagged union's member is not a key), what is wrong and what is
allowed (``must be greater than 0, got 0``; ``unknown key for kind 'sine'
(expected one of: ...)``). The models' own checks (``_fail`` in
:mod:`bwn.scenario.model`) already carry their text and pass through unchanged.
"""
from __future__ import annotations

import typing
from typing import Annotated, Any, Optional, Union

from pydantic import BaseModel, ValidationError

from bwn.scenario.model import SCHEDULE_KINDS, Named, ScenarioFile, describe


def messages(error: ValidationError, root: Any = None) -> list[str]:
    """One ``location: message`` line per problem, in the file's order; locations are
    read from ``root``, the type validated (default: a whole scenario file)."""
    return [_line(e, ScenarioFile if root is None else root) for e in error.errors(include_url=False)]


def _line(error: Any, root: Any) -> str:
    path, parent, kind, node = _walk(error["loc"], root)
    kind_text = f" for kind {kind!r}" if kind else ""
    value = error.get("input")
    ctx = error.get("ctx") or {}
    t = error["type"]
    if t == "bwn":
        message = error["msg"]
    elif t == "missing":
        message = "missing (required)"
    elif t == "extra_forbidden":
        allowed = ", ".join(parent.model_fields) if parent else "?"
        message = f"unknown key{kind_text} (expected one of: {allowed})"
    elif t == "union_tag_not_found":
        path = _join(path, "kind")
        message = f"missing (required; one of: {', '.join(SCHEDULE_KINDS)})"
    elif t == "union_tag_invalid":
        path = _join(path, "kind")
        tag = value.get("kind") if isinstance(value, dict) else value
        message = (f"unknown kind {tag!r} (expected one of: {', '.join(SCHEDULE_KINDS)})"
                   if isinstance(tag, str) and tag else
                   f"expected a non-empty string, got {describe(tag)}")
    elif t in ("int_type", "int_from_float", "int_parsing"):
        message = f"expected an integer, got {describe(value)}"
    elif t in ("float_type", "float_parsing"):
        message = f"expected a number, got {describe(value)}"
    elif t == "finite_number":
        message = f"must be finite, got {value}"
    elif t == "greater_than":
        message = f"must be greater than {ctx['gt']:g}, got {value:g}"
    elif t == "greater_than_equal":
        message = f"must be at least {ctx['ge']:g}, got {value:g}"
    elif t == "less_than_equal":
        message = f"must be at most {ctx['le']:g}, got {value:g}"
    elif t in ("string_type", "string_too_short"):
        message = f"expected a non-empty string, got {describe(value)}"
    elif t in ("model_type", "model_attributes_type", "dict_type"):
        message = f"expected a table, got {describe(value)}"
    elif t == "literal_error":
        message = f"expected {ctx.get('expected', '?')}, got {describe(value)}"
    elif t == "list_type":
        message = f"expected an array of {_items(node, path)}, got {describe(value)}"
    elif t == "too_short":
        message = (f"expected a non-empty array of {_items(node, path)}, "
                   f"got {describe(value)}")
    else:                                    # a pydantic check not mapped above
        message = f"{error['msg']}, got {describe(value)}"
    return f"{path}: {message}" if path else message


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk(loc: tuple[Any, ...], root: Any) -> tuple[str, Optional[type[BaseModel]], Optional[str], Any]:
    """(TOML path of ``loc`` in ``root``, the table model holding its last key, the
    schedule kind when that model is a schedule's, the declared type at ``loc``).

    pydantic's locations name the member of a tagged union by its tag
    (``links.0.schedule.sine.rate_mbit``); a TOML path does not."""
    path = ""
    node: Any = root
    parent: Optional[type[BaseModel]] = None
    kind: Optional[str] = None
    for item in loc:
        bare = _unwrap(node)
        if isinstance(item, int):
            path += f"[{item}]"
            node = _args(bare)[0] if _args(bare) else None
            continue
        if isinstance(bare, type) and issubclass(bare, BaseModel):
            if parent is not None and kind is not None and parent is not bare:
                kind = None                # below the schedule's own table
            parent = bare
            field = bare.model_fields.get(item)
            path = _join(path, item)
            node = (Annotated[(field.annotation, *field.metadata)] if field and field.metadata
                    else field.annotation if field else None)
            continue
        members = _tagged(bare)
        if item in members:
            kind, node = item, members[item]
            parent = members[item]
            continue
        if typing.get_origin(bare) is dict:
            path = _join(path, item)
            node = _args(bare)[1]
            continue
        path = _join(path, str(item))     # a union member's name (e.g. "bool"): not a key
    return path, parent, kind, node


def _items(node: Any, path: str) -> str:
    """How the entries of the array declared as ``node`` are called."""
    bare = _unwrap(node)
    item = _args(bare)[0] if _args(bare) else None
    for meta in typing.get_args(item)[1:] if typing.get_origin(item) is Annotated else ():
        if isinstance(meta, Named):
            return meta.plural
    item = _unwrap(item)
    if isinstance(item, type) and issubclass(item, BaseModel):
        if "." not in path and "[" not in path:
            return f"tables ([[{path}]])"
        keys = ", ".join(f"{k} = ..." for k, f in item.model_fields.items() if f.is_required())
        return f"{{{keys}}}"
    return "values"


def _unwrap(node: Any) -> Any:
    while True:
        origin = typing.get_origin(node)
        if origin is Annotated:
            node = typing.get_args(node)[0]
        elif origin is Union and type(None) in typing.get_args(node) \
                and len(typing.get_args(node)) == 2:
            node = next(a for a in typing.get_args(node) if a is not type(None))
        else:
            return node


def _args(node: Any) -> tuple[Any, ...]:
    return typing.get_args(node)


def _tagged(node: Any) -> dict[str, type[BaseModel]]:
    if typing.get_origin(node) is not Union:
        return {}
    out = {}
    for member in typing.get_args(node):
        member = _unwrap(member)
        if isinstance(member, type) and issubclass(member, BaseModel) and "kind" in member.model_fields:
            for tag in typing.get_args(member.model_fields["kind"].annotation):
                out[tag] = member
    return out
