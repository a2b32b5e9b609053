"""The P4Runtime entries the controller writes, field by field, as bwn.p4 (v1model)
declares its tables and actions (p4src/README.md, "Control-plane interface")."""
from __future__ import annotations

from pathlib import Path

import finsy as fy
import pytest

from bwn.protocol import dataplane_math as dm
from controller import aqm
from controller import entries as ent
from controller.xr_math import RcpConfig, XcpConfig

REPO = Path(__file__).resolve().parents[1]
H2_MAC, SW_MAC = "00:00:00:00:02:01", "00:00:00:01:00:02"
MACS = (0x000000000201 << 48) | 0x000000010002


def test_a_route_is_two_entries_with_the_same_prefix_and_the_plain_actions():
    flows, other = ent.route("10.0.2.0/24", 2, H2_MAC, SW_MAC)
    assert (flows.table_id, other.table_id) == ("BwnIngress.ipv4_lpm", "BwnIngress.ipv4_lpm_other")
    assert dict(flows.match) == dict(other.match) == {"dst_addr": (0x0A000200, 24)}
    assert flows.action.name == "BwnIngress.route"
    # On BMv2 per-port state is indexed by the port: no port index travels.
    assert flows.action.args == {"port": 2, "slot_base": 2 * dm.FLOW_SLOTS, "macs": MACS}
    assert other.action.name == "BwnIngress.route_other"
    assert other.action.args == {"port": 2, "macs": MACS}


def test_a_host_route_keeps_its_prefix_length_and_network_address():
    [flows, _] = ent.route("10.0.2.7/32", 5, H2_MAC, SW_MAC)
    assert dict(flows.match) == {"dst_addr": (0x0A000207, 32)}
    [flows, _] = ent.route("10.0.2.7/16", 5, H2_MAC, SW_MAC)      # not strict: the network
    assert dict(flows.match) == {"dst_addr": (0x0A000000, 16)}
    assert flows.action.args["slot_base"] == 5 * dm.FLOW_SLOTS


@pytest.mark.parametrize("options, loss_threshold, word", [
    (ent.PortOptions(loss=0.25), round(0.25 * 2**32), 0),
    (ent.PortOptions(reservations=True), 0, 1 << 31),
    (ent.PortOptions(af_queue_packets=15), 0, 15),
    (ent.PortOptions(loss=1.0, reservations=True, af_queue_packets=30), 2**32 - 1, (1 << 31) | 30),
    (ent.PortOptions(guaranteed=True), 0, 1 << 30),
    (ent.PortOptions(red=True), 0, 1 << 29),
    (ent.PortOptions(reservations=True, guaranteed=True, red=True), 0, 0b111 << 29),
    (ent.PortOptions(af_queue_packets=ent.MAX_AF_QUEUE_PACKETS), 0, (1 << 29) - 1),
])
def test_a_port_with_options_gets_the_checked_actions(options, loss_threshold, word):
    flows, other = ent.route("10.0.2.0/24", 3, H2_MAC, SW_MAC, options)
    assert flows.action.name == "BwnIngress.route_checked"
    assert flows.action.args == {"port": 3, "slot_base": 3 * dm.FLOW_SLOTS, "macs": MACS,
                                 "loss_threshold": loss_threshold, "options": word}
    assert other.action.name == "BwnIngress.route_other_checked"
    assert other.action.args == {"port": 3, "macs": MACS, "loss_threshold": loss_threshold, "options": word}


def test_route_params_carry_the_port_index_for_targets_that_need_it():
    match, common, checked = ent.route_params("10.1.0.0/16", 141, 1, H2_MAC, SW_MAC, ent.PortOptions())
    assert dict(match) == {"dst_addr": (0x0A010000, 16)}
    assert common == {"port": 141, "pidx": 1, "macs": MACS}
    assert checked == {}
    _, _, checked = ent.route_params("10.1.0.0/16", 141, 1, H2_MAC, SW_MAC, ent.PortOptions(loss=0.5))
    assert checked == {"loss_threshold": 2**31, "options": 0}


@pytest.mark.parametrize("options, message", [
    (dict(af_queue_packets=ent.MAX_AF_QUEUE_PACKETS + 1), "AF queue threshold"),
    (dict(af_queue_packets=-1), "AF queue threshold"),
    (dict(guaranteed=True, af_queue_packets=10), "no Assured Forwarding threshold"),
])
def test_options_the_word_cannot_hold_are_refused(options, message):
    with pytest.raises(dm.ConfigError, match=message):
        ent.PortOptions(**options)


@pytest.mark.parametrize("port", [-1, dm.MAX_PORTS, 511])
def test_a_port_outside_the_registers_is_refused(port):
    with pytest.raises(dm.ConfigError, match=f"port {port} is out of range"):
        ent.route("10.0.2.0/24", port, H2_MAC, SW_MAC)


@pytest.mark.parametrize("mac", ["00:00:00:00:02", "0:0:0:0:2:1:", "00-00-00-00-02-01", "00:00:00:00:02:0g"])
def test_a_malformed_mac_is_refused(mac):
    with pytest.raises(ValueError):
        ent.route("10.0.2.0/24", 2, mac, SW_MAC)


def test_a_reservation_matches_its_five_tuple_and_meters_its_rate():
    res = ent.Reservation("10.0.1.1", "10.0.2.2", 4e6, protocol=17, src_port=40000, dst_port=5001,
                          dscp=12, burst_bytes=30_000, priority=7)
    entry, meter = ent.reservation(res)
    assert entry.table_id == "BwnIngress.reservations"
    assert dict(entry.match) == {
        "src_addr": (0x0A000101, 0xFFFFFFFF), "dst_addr": (0x0A000202, 0xFFFFFFFF),
        "protocol": (17, 0xFF),
        "src_port": (40000, 0xFFFF), "dst_port": (5001, 0xFFFF)}
    assert entry.action.name == "BwnIngress.reserved_flow" and entry.action.args == {"dscp": 12}
    assert entry.priority == 7
    assert meter.table_entry is entry
    # trTCM with CIR = PIR = the reserved rate in bytes/s, both bursts the one given.
    assert (meter.config.cir, meter.config.pir) == (500_000, 500_000)
    assert (meter.config.cburst, meter.config.pburst) == (30_000, 30_000)


def test_a_reservation_without_protocol_or_ports_leaves_them_wildcarded():
    entry, _ = ent.reservation(ent.Reservation("10.0.1.1", "10.0.2.2", 1e6, protocol=None))
    assert set(entry.match) == {"src_addr", "dst_addr"}
    assert entry.action.args == {"dscp": ent.DSCP_AF11}
    assert entry.priority == 10


@pytest.mark.parametrize("dscp", [-1, 64])
def test_a_reservation_with_a_dscp_outside_six_bits_is_refused(dscp):
    with pytest.raises(dm.ConfigError, match="DSCP must be 0..63"):
        ent.reservation(ent.Reservation("10.0.1.1", "10.0.2.2", 1e6, dscp=dscp))


def test_entries_encode_against_the_compiled_program():
    """Names, parameter names and widths as p4c compiled them (when it has)."""
    p4info = REPO / "build" / "bwn.p4info.txtpb"
    if not p4info.exists():
        pytest.skip("build/bwn.p4info.txtpb not built (make build)")
    schema = fy.P4Schema(p4info)
    entries = (ent.route("10.0.2.0/24", 2, H2_MAC, SW_MAC)
               + ent.route("10.0.3.0/24", 3, H2_MAC, SW_MAC, ent.PortOptions(loss=0.1, reservations=True)))
    entries += ent.route("10.0.4.0/24", 4, H2_MAC, SW_MAC, ent.PortOptions(guaranteed=True, red=True))
    entries += ent.red_entries(4, aqm.RedParams.automatic(10e6, 1102))
    entry, meter = ent.reservation(ent.Reservation("10.0.1.1", "10.0.2.2", 4e6, src_port=1, dst_port=2))
    xr = [ent.xcp_port(3), ent.rcp_port(3), ent.xcp_port(4, XcpConfig(alpha=0.1, d_max_us=2**32 - 1))]
    for e in entries + [entry, meter] + xr:
        e.encode(schema)          # raises on an unknown name or a value wider than its field
    for counter in (ent.PORT_ENQUEUED_COUNTER, ent.PORT_DEQUEUED_COUNTER, ent.PORT_DROPS_COUNTER,
                    ent.RED_MARKED_COUNTER, ent.RED_DROPPED_COUNTER):
        fy.P4CounterEntry(counter, index=ent.port_drops_index(dm.MAX_PORTS - 1, "af_out_of_profile")
                          if counter == ent.PORT_DROPS_COUNTER else dm.MAX_PORTS - 1).encode(schema)


def test_red_entries_configure_the_port_its_marking_table_and_idle_decay():
    params = aqm.RedParams.automatic(10e6, 1000)        # C = 1250 packets/s: min_th 5, max_th 15
    config, *rest = ent.red_entries(3, params)
    assert config.table_id == "BwnIngress.red_config" and dict(config.match) == {"egress_port": 3}
    # w_q = 1 - exp(-1/1250) = 8.0e-4, nearest power of two 2^-10
    assert config.action.name == "BwnIngress.red_weight_10"
    assert config.action.args == {"min_level": 20, "top_level": 120}
    probability = [e for e in rest if e.table_id == "BwnIngress.red_probability"]
    idle = [e for e in rest if e.table_id == "BwnIngress.red_idle"]
    assert len(probability) + len(idle) == len(rest)
    assert [dict(e.match)["level"] for e in probability] == list(range(20, 120))
    assert all(dict(e.match)["egress_port"] == 3 for e in probability + idle)
    assert {e.action.args["prob"] for e in probability} <= set(range(aqm.PROB_ONE + 1))
    assert [e.action.name.rsplit("_", 1)[1] for e in idle] == [str(j) for j in range(1, 17)] + ["clear"]
    assert all(e.priority == 1 for e in idle)
    with pytest.raises(dm.ConfigError, match="out of range"):
        ent.red_entries(dm.MAX_PORTS, params)


def test_port_drops_are_indexed_by_port_then_reason():
    assert ent.port_drops_index(0, "no_route") == 0
    assert ent.port_drops_index(2, "af_out_of_profile") == 2 * 8 + 6
    assert ent.port_drops_index(5, "random_loss") == 5 * 8 + 4


def test_xcp_and_rcp_port_entries_carry_the_models_parameters():
    """The switch gets log7 of the papers' constants as 32-bit two's complement
    (alpha 0.4 -> -169, beta 0.226 -> -275, gamma 0.1 -> -425), exactly what the
    reference model computes with (controller/xr_math.py)."""
    x = ent.xcp_port(3)
    assert (x.table_id, dict(x.match), x.action.name) == ("BwnEgress.xcp_port", {"port": 3}, "BwnEgress.set_xcp")
    assert x.action.args == XcpConfig().params
    assert x.action.args["log_alpha"] == (-169) & 0xFFFFFFFF
    assert x.action.args["log_beta"] == (-275) & 0xFFFFFFFF
    assert x.action.args["log_gamma"] == (-425) & 0xFFFFFFFF
    r = ent.rcp_port(4, RcpConfig(rate_min_kbps=100))
    assert (r.table_id, dict(r.match), r.action.name) == ("BwnEgress.rcp_port", {"port": 4}, "BwnEgress.set_rcp")
    assert r.action.args["rate_min_kbps"] == 100 and r.action.args["log_beta"] == 0
    with pytest.raises(dm.ConfigError, match="out of range"):
        ent.xcp_port(dm.MAX_PORTS)


def test_port_capacity_installs_the_windows_action_with_ic_in_three_units():
    window = ent.WindowConfig(window_us=16_384)
    e = ent.port_capacity(2, 10e6, window)
    assert e.table_id == "BwnIngress.port_config" and dict(e.match) == {"egress_port": 2}
    # 10 Mb/s over 16.384 ms = 20 480 bytes; the action of 2^14 us converts bytes to kb/s.
    assert e.action.name == "BwnIngress.set_port_14"
    assert e.action.args == {"cap_bytes": 20_480, "cap_kbps": 10_000, "cap_log7": dm.log7(10_000)}
    assert ent.port_capacity(3, 1e6, ent.WindowConfig(window_us=2**20)).action.name == "BwnIngress.set_port_20"
    with pytest.raises(dm.ConfigError, match="out of range"):
        ent.port_capacity(dm.MAX_PORTS, 1e6, window)


def test_window_config_is_the_default_action_with_both_windows_masks():
    [e] = ent.window_config(ent.WindowConfig(window_us=16_384, flow_window_us=131_072))
    assert e.table_id == "BwnIngress.window_config" and e.is_default_action
    assert e.action.name == "BwnIngress.roll_window"
    assert e.action.args == {"mask": 0xFFFFFFFFC000, "window_us": 16_384,
                             "flow_mask": 0xFFFE0000, "flow_window_us": 131_072}


def test_window_config_refuses_windows_that_are_not_powers_of_two():
    with pytest.raises(dm.ConfigError):
        ent.WindowConfig(window_us=10_000)
    with pytest.raises(dm.ConfigError):
        ent.WindowConfig(flow_window_us=100_000)
    with pytest.raises(dm.ConfigError, match="queue_unit_bytes must be positive"):
        ent.WindowConfig(queue_unit_bytes=0)


def test_static_tables_are_the_queue_and_flow_lookups():
    window = ent.WindowConfig(queue_unit_bytes=1000)
    queue = ent.queue_tables(window)
    # Depth 0 is the table's default (0 bytes); 1 .. size-1 are entries.
    assert [dict(e.match)["queue"] for e in queue] == list(range(1, dm.QUEUE_TABLE_SIZE))
    assert all(e.table_id == "BwnIngress.queue_bytes" and e.action.name == "BwnIngress.set_queue_bytes"
               for e in queue)
    assert [e.action.args["bytes"] for e in queue[:3]] == [1000, 2000, 3000]
    flows = ent.flows_log_table()
    table = dm.flows_log7_table()
    assert [(dict(e.match)["flows"], e.action.args["log7"]) for e in flows] == list(table.items())
    assert all(e.table_id == "BwnIngress.flows_log" and e.action.name == "BwnIngress.set_share" for e in flows)
    assert ent.static_tables(window) == queue + flows


def test_the_telemetry_digest_reports_each_list_at_once():
    d = ent.telemetry_digest()
    assert d.digest_id == "port_telemetry_t"
    assert (d.max_list_size, d.max_timeout_ns, d.ack_timeout_ns) == (1, 0, 10_000_000)
    assert ent.telemetry_digest(max_timeout_ns=5_000).max_timeout_ns == 5_000
