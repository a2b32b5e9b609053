"""The scenario file format, declared once: pydantic v2 models of the TOML tables.

Everything a scenario file can hold, with types, ranges, defaults and a
description, is declared here. Three things come from these declarations:

* validation of a file's tables (``ScenarioFile.model_validate``; the errors are
  turned into located, readable messages by :mod:`bwn.scenario.messages`, e.g.
  ``links[1].schedule.kind: unknown kind 'sin' (expected one of: constant, steps,
  sine, trace)``);
* the JSON Schema in ``docs/scenario.schema.json`` (:mod:`bwn.scenario.schema`,
  ``make schema``) that editors use to validate ``.toml`` scenarios (docs/config.md);
* the leaf types the rest of the code uses as they are (:class:`HostConfig`,
  :class:`ReservationConfig`, :class:`DataplaneConfig`, :class:`TelemetryConfig`).

What a schema cannot say (names that refer to other tables, uniqueness across
tables, paths through the topology, trace files) is checked afterwards by
``bwn/scenario/config.py``, which also builds the resolved :class:`ExperimentConfig`.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (AfterValidator, StrictBool, BaseModel, ConfigDict, Field, PlainValidator,
                      ValidationError, WithJsonSchema, WrapValidator, model_validator)
from pydantic_core import PydanticCustomError

from bwn.protocol import dataplane_math as dm
from bwn.scenario.schedule import (
    DEFAULT_TRACE_WINDOW_MS,
    DEFAULT_UPDATE_INTERVAL_S,
    DEFAULT_UPDATE_THRESHOLD,
    EBN_DEFAULT_ALPHA,
)

try:
    from hosts.cc.registry import ALGORITHMS as _ALGORITHMS
except Exception:  # the registry is optional here: config validation must not depend on it
    _ALGORITHMS = ("newreno", "reno", "vegas", "westwood", "ebn", "obp", "dft", "gtcp", "sarbe")

ALGORITHMS: tuple[str, ...] = tuple(_ALGORITHMS)
UNDER_TEST = "under-test"
FLOW_TRANSFER, FLOW_CBR = "transfer", "cbr"   # [[flows]] kind
SCHEDULE_KINDS = ("constant", "steps", "sine", "trace")
APPLY_BOTH = "both"
SHAPER_SWITCH = "switch"   # a link's rate served by the switch's egress queue (packets/s)
SHAPER_LINK = "link"       # ... by its bwn-link, in bytes
AQM_DROP_TAIL = "drop-tail"   # a link's switch queues drop what does not fit
AQM_RED_ECN = "red-ecn"       # ... run RED, marking ECN-capable packets (docs/dataplane.md)
SERVICE_ASSURED = "assured"       # reservations as RFC 2597 Assured Forwarding
SERVICE_GUARANTEED = "guaranteed"  # ... as the guaranteed service: a strict-priority queue
MIN_RATE_BPS = 1000.0            # the dataplane's smallest capacity: 1 kb/s
MAX_RATE_MBIT = dm.INT32_MAX / 1000   # AB in kb/s is an int32 (port_config also checks IC per window)
MAX_NODE_NAME = 10               # Mininet names interfaces "<node>-eth<N>" (IFNAMSIZ 16)
NODE_NAME_PATTERN = rf"^[A-Za-z][A-Za-z0-9_]{{0,{MAX_NODE_NAME - 1}}}$"
IPV4_INTERFACE_PATTERN = r"^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$"
DEFAULT_QUEUE_PACKETS = 64       # BMv2's default egress queue depth
DEFAULT_DURATION_S = 60.0
DEFAULT_TELEMETRY_INTERVAL_S = 0.1
# bwn-link's SCHED_FIFO priority: on 2 shared cores the emulator otherwise waits behind
# BMv2 and misses its frames' due times (docs/fidelity.md, "linkem_lateness").
DEFAULT_LINKEM_RT_PRIORITY = 10


def _fail(message: str) -> PydanticCustomError:
    """A validation error whose text is ``message`` as it is
    (:func:`bwn.scenario.messages.messages` prints it unchanged)."""
    return PydanticCustomError("bwn", "{message}", {"message": message})


def describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"{type(value).__name__} {value!r}"


# ---------------------------------------------------------------------------------------
# Value types: each carries its constraint for validation and for the JSON Schema.

def _number(**bounds: float) -> Any:
    return Annotated[float, Field(strict=True, allow_inf_nan=False, **bounds)]


def _integer(**bounds: int) -> Any:
    return Annotated[int, Field(strict=True, **bounds)]


Number = _number()
Positive = _number(gt=0)
NonNegative = _number(ge=0)
Port = _integer(ge=1, le=65535)
Text = Annotated[str, Field(strict=True, min_length=1)]


def _check_rate_mbit(rate_mbit: float) -> float:
    try:
        dm.check_capacity_kbps(rate_mbit * 1e3)
    except dm.ConfigError as exc:
        raise _fail(str(exc)) from None
    return float(rate_mbit)


# The upper bound is checked by _check_rate_mbit (its message names the dataplane's
# limit in b/s); the JSON Schema states it as a maximum.
RateMbit = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0,
                                  json_schema_extra={"maximum": MAX_RATE_MBIT}),
                     AfterValidator(_check_rate_mbit)]


def _check_window(window_us: int) -> int:
    try:
        dm.check_power_of_two_us("the window", window_us)
    except dm.ConfigError as exc:
        raise _fail(str(exc)) from None
    return window_us


_POWERS_OF_TWO_US = [2**k for k in range(dm.MIN_WINDOW_US.bit_length() - 1,
                                         dm.MAX_WINDOW_US.bit_length())]
# Checked by _check_window so that the message names the rule, whatever the wrong value.
WindowUs = Annotated[Any, AfterValidator(_check_window),
                     WithJsonSchema({"type": "integer", "enum": _POWERS_OF_TWO_US})]


def _check_node_name(name: str) -> str:
    if not re.match(NODE_NAME_PATTERN, name):
        raise _fail(f"{name!r} is not a valid node name (a letter, then letters, digits or "
                    f"'_', at most {MAX_NODE_NAME} characters: Mininet derives interface "
                    f"names from it)")
    return name


NodeName = Annotated[Text, AfterValidator(_check_node_name),
                     WithJsonSchema({"type": "string", "pattern": NODE_NAME_PATTERN})]


@dataclass(frozen=True)
class Named:
    """Metadata: what a value is called in messages (``an array of algorithm names``)."""

    plural: str


def choice(what: str, options: tuple[str, ...]) -> Any:
    """A string out of ``options``; the error names ``what`` it is and lists them."""
    def check(text: str) -> str:
        if text not in options:
            raise _fail(f"unknown {what} {text!r} (expected one of: {', '.join(options)})")
        return text
    return Annotated[Text, AfterValidator(check), Named(f"{what} names"),
                     WithJsonSchema({"type": "string", "enum": list(options)})]


Algorithm = choice("algorithm", ALGORITHMS)
Scheme = choice("scheme", (UNDER_TEST,) + ALGORITHMS)


def _check_scheme_spec(text: str) -> str:
    """`algo` or `algo:key=value;key=value` (a scheme with parameters, as `bwn run
    --schemes` takes it); the algorithm must be known, each parameter key=value."""
    algo, _, params = text.partition(":")
    if algo not in ALGORITHMS:
        raise _fail(f"unknown algorithm {algo!r} (expected one of: {', '.join(ALGORITHMS)}, "
                    f"optionally with parameters: algo:key=value;key=value)")
    for item in (p for p in params.split(";") if p) if params else ():
        if "=" not in item or not item.split("=", 1)[0]:
            raise _fail(f"scheme {text!r}: parameter {item!r} is not key=value")
    return text


SchemeSpec = Annotated[Text, AfterValidator(_check_scheme_spec), Named("algorithm names"),
                       WithJsonSchema({"type": "string",
                                       "pattern": "^(" + "|".join(ALGORITHMS) + ")(:[^=;]+=[^;]*(;[^=;]+=[^;]*)*)?$"})]


def _interface(value: Any) -> ipaddress.IPv4Interface:
    if isinstance(value, ipaddress.IPv4Interface):
        return value
    if not isinstance(value, str) or not value:
        raise _fail(f"expected a non-empty string, got {describe(value)}")
    if "/" not in value:
        raise _fail(f"expected an IPv4 address with its prefix length, like 10.0.1.1/24, "
                    f"got {value!r}")
    try:
        ip = ipaddress.IPv4Interface(value)
    except ValueError as exc:
        raise _fail(f"not an IPv4 address/prefix: {exc}") from None
    if ip.network.prefixlen < 31 and ip.ip in (ip.network.network_address,
                                               ip.network.broadcast_address):
        raise _fail(f"{ip.ip} is the network or broadcast address of {ip.network}")
    return ip


Interface = Annotated[ipaddress.IPv4Interface, PlainValidator(_interface),
                      WithJsonSchema({"type": "string", "pattern": IPV4_INTERFACE_PATTERN})]


def _scalar(value: Any, handler: Any) -> Any:
    try:
        return handler(value)
    except ValidationError:
        raise _fail(f"expected a string, number or boolean, got {describe(value)}") from None


Scalar = Annotated[Union[Annotated[bool, Field(strict=True)], Annotated[int, Field(strict=True)],
                         Annotated[float, Field(strict=True)], Annotated[str, Field(strict=True)]],
                   WrapValidator(_scalar)]


# ---------------------------------------------------------------------------------------
# Tables

class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ExperimentTable(_Table):
    """`[experiment]`: what the experiment is called, how long it runs, what it compares."""

    name: Optional[Text] = Field(None, description="name of the experiment (default: the "
                                                   "file name without .toml)")
    duration_s: Positive = Field(DEFAULT_DURATION_S, description="length of one scheme's run, s")
    schemes: list[SchemeSpec] = Field(default_factory=list, description=(
        "schemes to run, each replacing \"under-test\" in the flows (default: the runner's "
        "--schemes)"))
    seed: Optional[_integer(ge=0)] = Field(None, description="random seed for loss and "
                                                               "anything else random")
    receive_window_bytes: Optional[_integer(ge=2000)] = Field(None, description=(
        "every receiver's advertised window (bwn-recv --window-bytes; default 4 MiB)"))
    sack: StrictBool = Field(True, description=(
        "senders use SACK (RFC 2018/6675; docs/transport.md); false = bwn-send --no-sack, "
        "the NS-2-like NewReno recovery of the papers' simulations"))
    ecn: StrictBool = Field(False, description=(
        "senders offer ECN (bwn-send --ecn, RFC 3168): data leaves ECN-capable and an "
        "ECN-Echo halves the window once per window of data; with aqm = \"red-ecn\" on a "
        "link its RED marks their packets instead of dropping them (docs/transport.md, \"ECN\")"))
    linkem_rt_priority: _integer(ge=0, le=99) = Field(DEFAULT_LINKEM_RT_PRIORITY, description=(
        "real-time (SCHED_FIFO) priority of every bwn-link, so that the emulator releases "
        "frames on time while the switches use the CPU (bwn-link --rt-priority; 0 = the "
        "normal scheduler)"))
    linkem_shared: StrictBool = Field(False, description=(
        "serve every delayed link from one bwn-links process (one thread, one select for "
        "all of them) instead of one bwn-link per link: less CPU per frame where links are "
        "many (docs/linkem.md, \"One process for many links\")"))
    queue_lookahead: StrictBool = Field(False, description=(
        "a switch-shaped link with a time-varying schedule gets, in its BMv2 queue, the "
        "schedule's rate when the packets enqueued now will leave (the queue's drain time "
        "ahead), since BMv2 spaces each packet at the rate of its enqueueing; the stamped "
        "capacity stays the rate of now (docs/config.md)"))


class DataplaneConfig(_Table):
    """`[dataplane]`: the switches' measurement windows (docs/dataplane.md)."""

    window_us: WindowUs = Field(16_384, description="rate measurement window of every egress "
                                                    "port, us (a power of two)")
    flow_window_us: WindowUs = Field(131_072, description="window over which distinct flows "
                                                          "are counted (EBN's N), us")
    queue_unit_bytes: Optional[_integer(ge=1, le=65535)] = Field(None, description=(
        "bytes one queued packet stands for in the available-bandwidth arithmetic "
        "(default: the agents' frame size)"))
    explicit_feedback: list[Literal["xcp", "rcp"]] = Field(["xcp", "rcp"], description=(
        "routers every switch runs at each port that applies a link's capacity: XCP's "
        "feedback and RCP's rate (docs/dataplane.md); they act only on the packets of "
        "xcp and rcp senders (the XR header), so the other schemes are unaffected"))


class TelemetryConfig(_Table):
    """`[telemetry]`: how often the controller reads the switches' registers."""

    interval_s: Positive = Field(DEFAULT_TELEMETRY_INTERVAL_S,
                                 description="telemetry.csv sampling interval, s")


class CaptureTable(_Table):
    """`[capture]`: which links `bwn run --pcap` captures (docs/config.md, "Captures")."""

    links: Optional[list[Text]] = Field(None, description=(
        "names of the links to capture (default: the bottleneck of each flow's path: the "
        "rate-limited links with the lowest mean capacity on it)"))


class SwitchTable(_Table):
    """`[[switches]]`: one BMv2 switch."""

    name: NodeName = Field(description="a letter, then letters, digits or '_', at most 10 "
                                       "characters; unique across switches and hosts")
    device_id: Optional[_integer(ge=0, le=2**64 - 1)] = Field(
        None, description="P4Runtime device id (default: the index in [[switches]])")
    grpc_port: Optional[Port] = Field(None, description="P4Runtime gRPC port (default: the "
                                                        "runner picks)")
    thrift_port: Optional[Port] = Field(None, description="Thrift port (default: the runner "
                                                          "picks)")


class HostConfig(_Table):
    """`[[hosts]]`: one end host."""

    name: NodeName = Field(description="as for switches; unique across switches and hosts")
    ip: Interface = Field(description="address and prefix length, e.g. \"10.0.1.1/24\"; not "
                                      "the network or broadcast address")

    @property
    def address(self) -> str:
        return str(self.ip.ip)


class _ScheduleTable(_Table):
    update_interval_s: Positive = Field(DEFAULT_UPDATE_INTERVAL_S, description=(
        "sine and trace: how often the controller samples the schedule, s"))
    update_threshold: NonNegative = Field(DEFAULT_UPDATE_THRESHOLD, description=(
        "sine and trace: apply a sample only if it differs from the rate in force by more "
        "than this fraction"))


class ConstantTable(_ScheduleTable):
    """One rate, applied at t = 0."""

    kind: Literal["constant"]
    rate_mbit: RateMbit = Field(description="the link's capacity, Mb/s")


class StepTable(_Table):
    t_s: NonNegative = Field(description="when this rate starts, s (the first step at 0)")
    rate_mbit: RateMbit = Field(description="the rate from t_s until the next step, Mb/s")


class StepsTable(_ScheduleTable):
    """Steps, the first at t_s = 0, times strictly increasing."""

    kind: Literal["steps"]
    steps: Annotated[list[StepTable], Field(min_length=1)] = Field(
        description="array of { t_s = ..., rate_mbit = ... }")


class SineTable(_ScheduleTable):
    """The EBN paper's F(t) = b (1 + sin(w t + phi) / alpha)."""

    kind: Literal["sine"]
    b_mbit: RateMbit = Field(description="mean rate b, Mb/s")
    alpha: _number(ge=1) = Field(EBN_DEFAULT_ALPHA, description="amplitude ratio (the "
                                                                 "paper's 3)")
    w_rad_s: NonNegative = Field(description="angular frequency w, rad/s (the paper: 0.01 "
                                             "to 1)")
    phi_rad: Number = Field(0.0, description="phase phi, rad")


class TraceTable(_ScheduleTable):
    """A Mahimahi link trace."""

    kind: Literal["trace"]
    path: Text = Field(description="the trace file, relative to the scenario file")
    window_ms: _integer(ge=1) = Field(DEFAULT_TRACE_WINDOW_MS,
                                      description="averaging window, ms")


ScheduleTable = Annotated[Union[ConstantTable, StepsTable, SineTable, TraceTable],
                          Field(discriminator="kind")]


class LinkTable(_Table):
    """`[[links]]`: a link between two nodes, at least one of them a switch."""

    name: Optional[Text] = Field(None, description="the link's name in capacity.csv and the "
                                                   "report (default \"<a>-<b>\")")
    a: Text = Field(description="one end (a node name)")
    b: Text = Field(description="the other end (a node name)")
    a_port: Optional[_integer(ge=0, le=dm.MAX_PORTS - 1)] = Field(
        None, description="switch port number of end a (switch ends only; default: the "
                          "runner numbers ports)")
    b_port: Optional[_integer(ge=0, le=dm.MAX_PORTS - 1)] = Field(
        None, description="switch port number of end b")
    schedule: ScheduleTable = Field(description="the link's capacity over time")
    delay_ms: NonNegative = Field(0.0, description="one-way propagation delay, ms, each "
                                                   "direction")
    loss: _number(ge=0, le=1) = Field(0.0, description="random loss probability per packet, "
                                                       "each direction")
    queue_packets: _integer(ge=1) = Field(DEFAULT_QUEUE_PACKETS,
                                          description="egress queue depth, packets")
    af_threshold_packets: Optional[_integer(ge=1)] = Field(None, description=(
        "GTCP's Assured Forwarding on the ports reserved flows leave by: out-of-profile and "
        "best-effort packets are dropped while the queue holds at least this many packets, "
        "at most queue_packets (default: half of queue_packets)"))
    apply_at: Text = Field(APPLY_BOTH, description=(
        "which end's switch egress applies the schedule: \"both\" (every switch end) or "
        "the name of one switch end"))
    shaper: Literal["switch", "link"] = Field(SHAPER_SWITCH, description=(
        "what serves the link at its rate: \"switch\" (the switch's egress queue: BMv2 "
        "serves packets per second at the frame size the runner assumes, so a 40-byte "
        "ACK takes a full frame's time) or \"link\" (the link's bwn-link serializes "
        "every frame's bytes at the rate, as NS-2 and real links do; constant, steps or "
        "sine schedules, each frame at the rate in force when it starts; the switch still stamps the link's capacity but its queue stays empty, so "
        "not for OBP or GTCP: docs/config.md, \"Where a link's rate is applied\")"))
    aqm: Literal["drop-tail", "red-ecn"] = Field(AQM_DROP_TAIL, description=(
        "the switch queues' discipline at both ends: \"drop-tail\" or \"red-ecn\" (RED, "
        "Floyd and Jacobson, with NS-2's automatic parameters for the link's rate: ECN-capable "
        "packets are marked CE, others dropped; senders offer ECN with [experiment] ecn; "
        "docs/dataplane.md, \"RED with ECN marking\"); needs shaper = \"switch\""))
    service: Literal["assured", "guaranteed"] = Field(SERVICE_ASSURED, description=(
        "how its ports that reserved flows leave by treat them: \"assured\" (RFC 2597 "
        "Assured Forwarding: out-of-profile and best-effort packets are dropped above "
        "af_threshold_packets, one FIFO) or \"guaranteed\" (the service GTCP assumes: "
        "in-profile packets take a strict-priority queue served at the link's rate, the rest "
        "share a FIFO with tail drop served at the rate less the reservations; docs/dataplane.md, "
        "\"Reservations: the guaranteed service\"); needs shaper = \"switch\""))


class ReservationConfig(_Table):
    """`[[reservations]]` (GTCP): a reserved rate metered at the source's edge switch."""

    src: Text = Field(description="the reserved traffic's source host")
    dst: Text = Field(description="the reserved traffic's destination host")
    rate_mbit: RateMbit = Field(description="reserved rate, Mb/s of frames")
    src_port: Optional[_integer(ge=0, le=65535)] = Field(None, description="narrow the match "
                                                                           "to this UDP port")
    dst_port: Optional[_integer(ge=0, le=65535)] = Field(None, description="narrow the match "
                                                                           "to this UDP port")

    @property
    def rate_bps(self) -> float:
        return self.rate_mbit * 1e6


class FlowTable(_Table):
    """`[[flows]]`: one bwn-send -> bwn-recv transfer."""

    name: Optional[Text] = Field(None, description="names the flow's files and report rows "
                                                   "(default \"flow<i>\")")
    kind: Literal["transfer", "cbr"] = Field(FLOW_TRANSFER, description=(
        "\"transfer\": a sender of the flow's scheme; \"cbr\": constant-rate, unresponsive "
        "cross traffic at rate_mbit (the cbr sender, docs/algorithms.md)"))
    rate_mbit: Optional[RateMbit] = Field(None, description="a cbr flow's rate, Mb/s of frames")
    src: Text = Field(description="sending host")
    dst: Text = Field(description="receiving host")
    scheme: Scheme = Field(UNDER_TEST, description="\"under-test\" (each scheme of the run in "
                                                   "turn) or a fixed algorithm")
    start_s: NonNegative = Field(0.0, description="start, s since the experiment started")
    bytes: Optional[_integer(ge=1)] = Field(None, description="send this many bytes (not with "
                                                             "duration_s)")
    duration_s: Optional[Positive] = Field(None, description="send for this long, s (neither: "
                                                             "until the experiment ends)")
    reserved_rate_mbit: Optional[Positive] = Field(None, description=(
        "GTCP's rate_G, Mb/s; needs a [[reservations]] entry from src to dst"))
    params: dict[str, Scalar] = Field(default_factory=dict, description=(
        "algorithm parameters (bwn-send --param key=value)"))
    app_rate_mbit: Optional[Positive] = Field(None, description=(
        "the application offers data at this rate only, Mb/s"))
    src_port: Optional[Port] = Field(None, description="UDP source port the sender binds")

    @model_validator(mode="after")
    def _bytes_or_duration(self) -> "FlowTable":
        if self.bytes is not None and self.duration_s is not None:
            raise _fail("give bytes or duration_s, not both")
        return self

    @model_validator(mode="after")
    def _cbr(self) -> "FlowTable":
        if self.kind != FLOW_CBR:
            if self.rate_mbit is not None:
                raise _fail("rate_mbit is a constant-rate flow's: add kind = \"cbr\"")
            return self
        if self.rate_mbit is None:
            raise _fail("a kind = \"cbr\" flow needs rate_mbit (Mb/s of frames)")
        given = [key for key in ("bytes", "reserved_rate_mbit", "app_rate_mbit")
                 if getattr(self, key) is not None]
        if self.scheme != UNDER_TEST:
            given.append("scheme")
        if self.params:
            given.append("params")
        if given:
            raise _fail(f"a kind = \"cbr\" flow sends at rate_mbit for duration_s (or until the "
                        f"end): remove {', '.join(given)}")
        return self


class ScenarioFile(_Table):
    """A bwn experiment scenario (docs/config.md)."""

    model_config = ConfigDict(title="bwn scenario")

    experiment: ExperimentTable = Field(default_factory=ExperimentTable)
    dataplane: DataplaneConfig = Field(default_factory=DataplaneConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    capture: CaptureTable = Field(default_factory=CaptureTable)
    switches: Annotated[list[SwitchTable], Field(min_length=1)]
    hosts: list[HostConfig]
    links: list[LinkTable]
    reservations: list[ReservationConfig] = Field(default_factory=list)
    flows: list[FlowTable] = Field(default_factory=list)
