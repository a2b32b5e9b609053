"""Names of the sender algorithms -> their classes, imported lazily.

Each algorithm lives in ``hosts.cc.<name>`` and is the
:class:`~hosts.cc.base.CongestionControl` subclass there whose class attribute
``name`` is ``<name>``. Modules are imported only when an algorithm is selected or
listed, so one broken or missing module never stops the others.

Constructor parameters are keyword arguments with annotations or defaults;
:func:`parse_params` turns ``--param key=value`` strings into them, typed by the
annotation (or the default's type): ``int``, ``float``, ``bool``, ``str``,
``Optional[...]`` and ``Literal[...]``.
"""
from __future__ import annotations

import importlib
import inspect
import typing
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type

from .base import CongestionControl

#: Every algorithm the project implements, in the order ``--list-algos`` shows them.
ALGORITHMS: Tuple[str, ...] = (
    "newreno", "reno", "vegas", "westwood", "ebn", "obp", "dft", "gtcp", "sarbe", "xcp", "rcp", "cbr",
)

#: Constructor parameter that ``--reserved-rate-mbit`` sets (GTCP's rate_G).
RESERVED_RATE_PARAM = "rate_g_bps"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class RegistryError(ValueError):
    """An unknown or unavailable algorithm, or a bad parameter (a one-line message)."""


@dataclass(frozen=True)
class ParamSpec:
    name: str
    type_name: str
    default: Any
    required: bool


def load(name: str) -> Type[CongestionControl]:
    """The class of algorithm ``name``; :class:`RegistryError` if unknown or missing."""
    if name not in ALGORITHMS:
        raise RegistryError(f"unknown algorithm {name!r}; known: {', '.join(ALGORITHMS)}")
    module_name = f"{__package__}.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise RegistryError(
                f"algorithm {name!r} is not available yet (module {module_name} is missing)"
            ) from None
        raise RegistryError(f"algorithm {name!r} cannot be loaded: {exc}") from None
    except Exception as exc:  # a module that fails to import must not hide the others
        raise RegistryError(f"algorithm {name!r} cannot be loaded: "
                            f"{type(exc).__name__}: {exc}") from None
    for obj in vars(module).values():
        if (inspect.isclass(obj) and issubclass(obj, CongestionControl)
                and obj.__module__ == module.__name__ and getattr(obj, "name", None) == name):
            return obj
    raise RegistryError(
        f"module {module_name} defines no CongestionControl subclass with name = {name!r}")


def available() -> Dict[str, Optional[str]]:
    """Each algorithm name -> ``None`` if it loads, else the reason it does not."""
    out: Dict[str, Optional[str]] = {}
    for name in ALGORITHMS:
        try:
            load(name)
            out[name] = None
        except RegistryError as exc:
            out[name] = str(exc)
    return out


def param_specs(cls: Type[CongestionControl]) -> List[ParamSpec]:
    """The keyword parameters of ``cls``'s constructor."""
    init = cls.__init__
    if init is object.__init__:
        return []
    sig = inspect.signature(init)
    try:
        hints = typing.get_type_hints(init)
    except Exception:
        hints = {}
    specs = []
    for p in list(sig.parameters.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        tp = hints.get(p.name, inspect.Parameter.empty)
        if tp is inspect.Parameter.empty and p.default is not inspect.Parameter.empty \
                and p.default is not None:
            tp = type(p.default)
        specs.append(ParamSpec(p.name, _type_name(tp), None if p.default is p.empty
                               else p.default, p.default is p.empty))
    return specs


def _type_name(tp: Any) -> str:
    if tp is inspect.Parameter.empty:
        return "str"
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _convert(text: str, tp: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union:
        if text.lower() in ("none", "null") and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(text, arg, key)
            except RegistryError as exc:
                errors.append(str(exc))
        raise RegistryError(errors[0] if errors else f"bad value for {key}: {text!r}")
    if origin is typing.Literal:
        for choice in args:
            if str(choice) == text:
                return choice
        raise RegistryError(f"--param {key} must be one of {', '.join(map(str, args))}, "
                            f"got {text!r}")
    if tp is bool:
        low = text.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise RegistryError(f"--param {key} needs a boolean (true/false), got {text!r}")
    if tp is int:
        try:
            return int(text, 0)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                value = float("nan")
            if value == value and value.is_integer():
                return int(value)
            raise RegistryError(f"--param {key} needs an integer, got {text!r}") from None
    if tp is float:
        try:
            value = float(text)
        except ValueError:
            raise RegistryError(f"--param {key} needs a number, got {text!r}") from None
        if value != value:
            raise RegistryError(f"--param {key} must not be NaN")
        return value
    return text


def parse_params(cls: Type[CongestionControl], items: Sequence[str],
                 reserved_rate_mbit: Optional[float] = None) -> Dict[str, Any]:
    """``["beta1=0.5", ...]`` -> typed keyword arguments for ``cls``."""
    specs = {s.name: s for s in param_specs(cls)}
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:
        hints = {}
    kwargs: Dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise RegistryError(f"--param needs key=value, got {item!r}")
        if key not in specs:
            accepted = ", ".join(specs) or "none"
            raise RegistryError(
                f"algorithm {cls.name!r} has no parameter {key!r} (accepted: {accepted})")
        spec = specs[key]
        tp = hints.get(key)
        if tp is None:
            tp = type(spec.default) if spec.default is not None else str
        kwargs[key] = _convert(value.strip(), tp, key)
    if reserved_rate_mbit is not None:
        if RESERVED_RATE_PARAM not in specs:
            raise RegistryError(
                f"--reserved-rate-mbit applies only to algorithms with a {RESERVED_RATE_PARAM} "
                f"parameter (gtcp), not {cls.name!r}")
        if RESERVED_RATE_PARAM in kwargs:
            raise RegistryError(
                f"give the reserved rate once: --reserved-rate-mbit or --param {RESERVED_RATE_PARAM}")
        kwargs[RESERVED_RATE_PARAM] = reserved_rate_mbit * 1e6
    missing = [s.name for s in specs.values() if s.required and s.name not in kwargs]
    if missing:
        raise RegistryError(f"algorithm {cls.name!r} needs --param {missing[0]}=...")
    return kwargs


def create(name: str, params: Sequence[str] = (),
           reserved_rate_mbit: Optional[float] = None) -> CongestionControl:
    """An instance of algorithm ``name`` built from ``--param`` strings."""
    cls = load(name)
    kwargs = parse_params(cls, params, reserved_rate_mbit)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise RegistryError(f"algorithm {name!r}: {exc}") from None


def describe(name: str) -> str:
    """One ``--list-algos`` entry: name, first docstring line, parameters."""
    try:
        cls = load(name)
    except RegistryError as exc:
        return f"{name:<9} (unavailable: {exc})"
    doc = (inspect.getdoc(cls) or "").strip().splitlines()
    line = f"{name:<9} {doc[0] if doc else ''}"
    specs = param_specs(cls)
    if specs:
        params = ", ".join(
            f"{s.name}: {s.type_name}" + ("" if s.required else f" = {s.default!r}")
            for s in specs)
        line += f"\n{'':<9} params: {params}"
    return line


def describe_all(names: Optional[Sequence[str]] = None) -> str:
    return "\n".join(describe(n) for n in (names or ALGORITHMS))


def as_mapping() -> Mapping[str, str]:
    """name -> module path, for documentation."""
    return {n: f"{__package__}.{n}" for n in ALGORITHMS}
