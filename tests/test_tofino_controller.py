"""The controller's Tofino path (controller/tofino.py): time base, ports, entries,
pipeline config packing and the traffic-manager plan, i.e. what differs from BMv2."""
from __future__ import annotations

import json
import random
import struct

import pytest

from bwn.protocol import dataplane_math as dm
from controller import entries as en
from controller import tofino as tf


# ---- time base -----------------------------------------------------------------
def test_a_window_of_2k_ticks_lasts_1024_ns_per_tick():
    assert tf.window_duration_s(16_384) == pytest.approx(16_384 * 1.024e-6)
    # 10 Mb/s for 16.777 ms = 20 971.52 bytes (BMv2's 16.384 ms would give 20 480)
    assert tf.capacity_bytes_per_window(10e6, 16_384) == 20_972
    assert dm.capacity_bytes_per_window(10e6, 16_384) == 20_480


def test_tofino_capacity_rejects_what_an_int32_window_cannot_hold():
    with pytest.raises(dm.ConfigError, match="shorter window"):
        tf.TofinoCapacity.from_bps(100e9, 2**20)     # 100 Gb/s over 1.07 s
    cap = tf.TofinoCapacity.from_bps(100e9, 2**14)
    assert cap.cap_bytes == round(100e9 * 2**14 * 1.024e-6 / 8)
    assert cap.cap_kbps == 100_000_000


@pytest.mark.parametrize("k", range(6, 25))
def test_avail_conversion_tracks_the_exact_rate_for_every_window(k):
    """The program's shift-and-subtract conversion stays within 0.06 % (+3 kb/s of
    flooring) of bytes * 8 / (2^K * 1.024 us), for positive and negative AB."""
    window_us = 2**k
    rng = random.Random(k)
    for _ in range(400):
        x = rng.randint(-dm.MAX_WINDOW_BYTES, dm.MAX_WINDOW_BYTES) >> rng.randint(0, 24)
        exact = x * 8 / (window_us * tf.TICK_NS * 1e-9) / 1000
        got = tf.tofino_avail_kbps(x, window_us)
        if abs(exact) > 2**31 - 2:
            continue
        assert abs(got - exact * (61 / 64) / 0.95367431640625) <= 3.0, (x, k, got, exact)
        assert abs(got - exact) <= abs(exact) * 6.0e-4 + 3.0, (x, k, got, exact)


def test_ebn_log7_carries_the_rounding_and_is_capped_so_the_one_flow_code_stays_254():
    assert tf.TofinoCapacity.from_bps(10e6, 16_384).cap_log7_r == dm.log7(10_000) + 8
    huge = tf.TofinoCapacity.from_bps(2**31 * 1000 - 1000, 64)   # the largest kb/s the dataplane holds
    assert huge.cap_log7_r <= tf.MAX_CAP_LOG7_R
    assert tf.MAX_CAP_LOG7_R >> 4 == 254 and (tf.MAX_CAP_LOG7_R + 1) >> 4 == 255


@pytest.mark.parametrize("cap_kbps", [100, 200, 10_000, 1_000_000])
@pytest.mark.parametrize("flows", [0, 1, 2, 3, 7, 50, 256])
def test_tna_ebn_code_in_8_bit_pieces_equals_the_v1model_code(cap_kbps, flows):
    """p4src/tna/bwn.p4 computes the code as ch - nh - borrow, saturated at 0,
    from log7(C) + 8 = 16 ch + cf and log7(N) = 16 nh + nf."""
    c = tf.TofinoCapacity.from_bps(cap_kbps * 1000, 16_384).cap_log7_r
    n = dm.flows_log7_table()[flows] if flows else 0
    ch, cf, nh, nf = c >> 4, c & 15, n >> 4, n & 15
    code = max(ch - nh, 0)
    if max(nf - cf, 0) != 0:
        code = max(code - 1, 0)
    assert code == dm.expected_ebn_code(cap_kbps, flows)


# ---- ports -------------------------------------------------------------------------
def test_port_map_gives_dense_register_indices_to_device_ports_above_63():
    pm = tf.PortMap.of([128, 136, 4, 300])
    assert [pm[p].pidx for p in (128, 136, 4, 300)] == [0, 1, 2, 3]
    assert pm[300].pipe == 2
    assert pm.add(136).pidx == 1                       # idempotent


@pytest.mark.parametrize("bad", [-1, 72, 127, 512, 4 * 128, "1"])
def test_port_map_rejects_what_is_not_a_device_port(bad):
    with pytest.raises(dm.ConfigError, match="port"):
        tf.PortMap.of([bad])


def test_port_map_holds_at_most_the_programs_ports_and_names_unknown_ones():
    pm = tf.PortMap.of([p for pipe in range(2) for p in range(pipe * 128, pipe * 128 + 32)])
    with pytest.raises(dm.ConfigError, match="64 ports"):
        pm.add(300)
    with pytest.raises(dm.ConfigError, match="not in the port map"):
        tf.PortMap.of([1])[2]


# ---- entries ---------------------------------------------------------------------
def test_route_is_one_lpm_entry_with_the_device_port_and_its_register_index():
    port = tf.PortMap.of([140, 141])[141]
    e = tf.route("10.0.2.0/24", port, "00:00:00:00:02:02", "00:00:00:00:01:01")
    assert e.table_id == "BwnIngress.ipv4_lpm"
    assert e.match["dst_addr"] == (0x0A000200, 24)
    a = e.action
    assert a.name == "BwnIngress.route"
    assert a.args == {"port": 141, "pidx": 1, "slot_base": 256, "macs": (0x0202 << 48) | 0x0101}


def test_route_with_options_uses_route_checked_with_the_v1model_encoding():
    port = tf.PortMap.of([160])[160]
    opts = en.PortOptions(loss=0.25, reservations=True, af_queue_packets=30)
    a = tf.route("10.0.3.1/32", port, "00:00:00:00:03:01", "00:00:00:00:01:01", opts).action
    assert a.name == "BwnIngress.route_checked"
    assert a.args["loss_threshold"] == 2**30 and a.args["options"] == (1 << 31) | 30


def test_port_capacity_is_in_the_egress_with_the_windows_action_and_tick_sized_ic():
    port = tf.PortMap.of([132])[132]
    e = tf.port_capacity(port, 10e6, en.WindowConfig(window_us=8192))
    assert e.table_id == "BwnEgress.port_config" and e.match["egress_port"] == 132
    assert e.action.name == "BwnEgress.set_port_13"
    assert e.action.args == {"cap_bytes": tf.capacity_bytes_per_window(10e6, 8192),
                             "cap_kbps": 10_000, "cap_log7_r": dm.log7(10_000) + 8}


def test_window_config_is_in_units_of_64_ticks():
    (e,) = tf.window_config(en.WindowConfig(window_us=16_384, flow_window_us=131_072))
    assert e.table_id == "BwnIngress.window_config" and e.is_default_action
    assert e.action.args == {"mask": 0xFFFFFF00, "window_us": 256,
                             "flow_mask": 0xFFFFF800, "flow_window_us": 2048}
    # the id of a timestamp: ns bits 47:16 & mask = its window's start in units of 64 ticks
    t_ns = 123_456_789_012
    win = ((t_ns >> 16) & 0xFFFFFFFF) & e.action.args["mask"]
    assert win * 64 * 1024 <= t_ns < (win + 256) * 64 * 1024


def test_static_tables_are_ebn_log_table_only_in_the_egress():
    entries = tf.static_tables()
    assert {e.table_id for e in entries} == {"BwnEgress.flows_log"}
    assert {e.match["flows"]: e.action.args["log7"] for e in entries} == dm.flows_log7_table()


# ---- pipeline config -------------------------------------------------------------
def test_pi_config_packs_name_binary_and_context_with_le_lengths():
    blob = tf.pack_pi_config("bwn", b"\x01\x02\x03", b'{"a": 1}')
    assert blob[:4] == struct.pack("<i", 3) and blob[4:7] == b"bwn"
    assert blob[7:11] == struct.pack("<i", 3) and blob[11:14] == b"\x01\x02\x03"
    assert tf.unpack_pi_config(blob) == ("bwn", b"\x01\x02\x03", b'{"a": 1}')
    with pytest.raises(ValueError, match="runs past the end"):
        tf.unpack_pi_config(blob[:-1])
    with pytest.raises(ValueError, match="after the three parts"):
        tf.unpack_pi_config(blob + b"x")


def _fake_bf_p4c_output(tmp_path, elsewhere="/var/tmp/gone/build/tofino"):
    out = tmp_path / "tofino"
    (out / "pipe").mkdir(parents=True)
    (out / "bfrt.json").write_text('{"tables": []}')
    (out / "pipe" / "context.json").write_text('{"program_name": "bwn"}')
    (out / "pipe" / "tofino.bin").write_bytes(b"\xca\xfe")
    conf = {"p4_devices": [{"device-id": 0, "p4_programs": [{
        "program-name": "bwn", "bfrt-config": f"{elsewhere}/bfrt.json",
        "p4_pipelines": [{"p4_pipeline_name": "pipe", "context": f"{elsewhere}/pipe/context.json",
                          "config": f"{elsewhere}/pipe/tofino.bin", "pipe_scope": [0, 1, 2, 3]}]}]}]}
    (out / "bwn.conf").write_text(json.dumps(conf))
    return out


def test_bf_pipeline_config_is_stratums_protobuf_from_the_compiler_conf(tmp_path):
    out = _fake_bf_p4c_output(tmp_path)
    msg = tf.BfPipelineConfig.FromString(tf.bf_pipeline_config(out))
    assert msg.p4_name == "bwn" and msg.bfruntime_info == b'{"tables": []}'
    (prof,) = msg.profiles
    assert prof.profile_name == "pipe" and prof.binary == b"\xca\xfe"
    assert prof.context == b'{"program_name": "bwn"}' and list(prof.pipe_scope) == [0, 1, 2, 3]


def test_bf_pipeline_config_wire_bytes_follow_stratums_field_numbers(tmp_path):
    """Stratum's bf.proto, byte for byte: what stratum_bfrt decodes. (This also checks
    `_bf_pipeline_config_class`, which runs at import, where mutmut cannot reach it.)"""
    raw = tf.BfPipelineConfig(p4_name="x", bfruntime_info=b"y").SerializeToString()
    assert raw == b"\x0a\x01x\x12\x01y"          # field 1 (string), field 2 (bytes)
    msg = tf.BfPipelineConfig(p4_name="x", bfruntime_info=b"y")
    msg.profiles.add(profile_name="p", context=b"c", binary=b"b", pipe_scope=[0, 1])
    msg.profiles.add(profile_name="q")
    profile = b"\x0a\x01p" + b"\x12\x01c" + b"\x1a\x01b" + b"\x22\x02\x00\x01"   # 1..4, scope packed
    assert msg.SerializeToString() == (b"\x0a\x01x\x12\x01y" + b"\x1a\x0d" + profile
                                       + b"\x1a\x03\x0a\x01q")                       # field 3, repeated
    assert tf.BfPipelineConfig.DESCRIPTOR.full_name == "stratum.hal.barefoot.BfPipelineConfig"


def test_bf_pipeline_config_says_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="make build-tofino"):
        tf.bf_pipeline_config(tmp_path)
    out = _fake_bf_p4c_output(tmp_path)
    (out / "pipe" / "tofino.bin").unlink()
    with pytest.raises(FileNotFoundError, match="tofino.bin"):
        tf.bf_pipeline_config(out)
    (out / "bwn.conf").write_text('{"p4_devices": []}')
    with pytest.raises(ValueError, match="not a bf-p4c device conf"):
        tf.bf_pipeline_config(out)


# ---- traffic manager -------------------------------------------------------------
def test_tm_plan_shapes_the_port_and_sizes_its_queue_in_cells():
    plan = tf.tm_port_plan(136, 10e6, queue_packets=50)
    assert plan.shaping_kbps == 10_000
    assert plan.queue_limit_cells == 50 * 19            # 1514 B = 19 cells of 80 B
    assert plan.yellow_limit_eighths == 8 and plan.af_threshold_cells == plan.queue_limit_cells


def test_tm_plan_af_threshold_is_a_yellow_limit_never_above_the_one_asked():
    half = tf.tm_port_plan(136, 10e6, queue_packets=60, af_queue_packets=30)
    assert half.yellow_limit_eighths == 4 and half.af_threshold_cells == 30 * 19
    odd = tf.tm_port_plan(136, 10e6, queue_packets=60, af_queue_packets=20)   # 2.67 / 8
    assert odd.yellow_limit_eighths == 2 and odd.af_threshold_cells <= 20 * 19
    tiny = tf.tm_port_plan(136, 10e6, queue_packets=60, af_queue_packets=1)
    assert tiny.yellow_limit_eighths == 1


@pytest.mark.parametrize("kw,msg", [(dict(rate_bps=0), "rate"), (dict(queue_packets=0), "queue"),
                                    (dict(af_queue_packets=61), "AF threshold"), (dict(dev_port=80), "device port")])
def test_tm_plan_rejects_bad_values_with_what_to_change(kw, msg):
    args = dict(dev_port=136, rate_bps=10e6, queue_packets=60, af_queue_packets=0) | kw
    with pytest.raises(dm.ConfigError, match=msg):
        tf.tm_port_plan(**args)


def test_tm_plan_at_its_bounds():
    full = tf.tm_port_plan(7, 1.0, queue_packets=1, af_queue_packets=1)   # AF at the whole queue: off
    assert (full.dev_port, full.shaping_kbps, full.yellow_limit_eighths) == (7, 1, 8)
    assert full.shaping_burst_bytes == 2 * 1514 and full.queue_limit_cells == 19
    odd = tf.tm_port_plan(7, 10e6, queue_packets=9, af_queue_packets=4, frame_bytes=100, burst_frames=3)
    assert odd.shaping_burst_bytes == 300 and odd.queue_limit_cells == 18      # 100 B = 2 cells
    assert odd.yellow_limit_eighths == 3 and odd.af_threshold_cells == 6       # 18 * 3 // 8, whole cells
    assert odd.as_dict()["af_threshold_cells"] == 6


def test_pi_config_refuses_what_is_not_three_parts():
    blob = tf.pack_pi_config("bwn", b"", b"{}")                 # an empty part is allowed
    assert tf.unpack_pi_config(blob) == ("bwn", b"", b"{}")
    with pytest.raises(ValueError) as err:
        tf.unpack_pi_config(blob[:-2] + b"")                    # the context's length says 2
    assert str(err.value) == "PI Tofino device config: part of 2 bytes at 11 runs past the end"
    with pytest.raises(ValueError) as err:
        tf.unpack_pi_config(blob[:9])                           # the third length is cut
    assert str(err.value) == "truncated PI Tofino device config (a length is missing)"
    with pytest.raises(ValueError) as err:
        tf.unpack_pi_config(struct.pack("<i", -1) + b"xxxx" * 3)
    assert str(err.value) == "PI Tofino device config: part of -1 bytes at 0 runs past the end"
    with pytest.raises(ValueError) as err:
        tf.unpack_pi_config(blob + b"abc")
    assert str(err.value) == "PI Tofino device config: 3 bytes after the three parts"


def test_the_tick_arithmetic_is_exact():
    assert tf.window_duration_s(65_536) == 65_536 * 1024 / 1e9            # 67.108864 ms, to the bit
    assert tf.capacity_bytes_per_window(2e12, 65_536) == 16_777_216_000    # no rounding on the way
    with pytest.raises(dm.ConfigError, match="window_us"):
        tf.window_duration_s(1000)                                         # not a power of two


def test_avail_kbps_wraps_as_the_switchs_int32():
    """A count no real window holds wraps as the 32-bit register does, not as Python's ints."""
    def int32(x: int) -> int:
        return (x + 2**31) % 2**32 - 2**31

    huge = 2**40                                                  # bytes in a window of 2^14 ticks
    exact = (huge >> 1) - (huge >> 6) - (huge >> 7)              # the program's three shifts, k = 14
    assert exact >= 2**31
    assert tf.tofino_avail_kbps(huge, 2**14) == int32(exact)
    assert tf.tofino_avail_kbps(-huge, 2**14) == int32((-huge >> 1) - (-huge >> 6) - (-huge >> 7))


@pytest.mark.parametrize("dev_port, message", [
    (512, "Tofino device port must be 0..511, got 512"),
    (-1, "Tofino device port must be 0..511, got -1"),
    (511, "device port 511 is not a port of a Tofino pipe: device ports are pipe * 128 + 0..71 "
          "(pipe 3, local 127)"),
    (200, "device port 200 is not a port of a Tofino pipe: device ports are pipe * 128 + 0..71 "
          "(pipe 1, local 72)"),
])
def test_a_device_port_outside_the_pipes_is_named_with_its_pipe(dev_port, message):
    with pytest.raises(dm.ConfigError) as err:
        tf.check_dev_port(dev_port)
    assert str(err.value) == message
    for good in (0, 71, 128, 455):
        tf.check_dev_port(good)
