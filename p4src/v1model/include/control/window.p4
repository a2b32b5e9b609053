/* -*- P4_16 -*- */
/*
 * bwn (v1model): OBP's measurement window at the egress port, and its
 * available bandwidth AB = IC - BR - BI (OBP eq. 6; docs/dataplane.md,
 * "Measurement windows" and "OBP available bandwidth").
 *
 * Every routed packet adds what it costs the port's link to the port's bytes
 * received (BR counts bytes received for the port, before any queue or random
 * loss can drop them). On a link served in bytes that is the packet's length.
 * BMv2 serves a rate-limited port in packets (set_queue_rate: a fixed number
 * of packets per second, whatever their size), so there every packet counts
 * one slot, the frame size the controller derived the port's packet rate
 * from (port_service): an ACK then takes the share of the capacity it really
 * takes, and BR, XCP's and RCP's input traffic y, and AB stay in the unit of
 * the capacity IC (docs/dataplane.md, "Links served in packets"). Windows are W = 2^K us long and aligned (the controller's mask
 * ~(W - 1)), so every window is exactly W long. The first packet of a port
 * after its window's end closes the window, and computes, all in bytes per
 * window:
 *   IC  the port's capacity (port_config, installed by the controller);
 *   BR  the bytes received in the window, 0 if whole windows passed without
 *       a packet (the latest one was idle);
 *   BI  the queue the port's last DATA packet left behind, at the close
 *       (queue_bytes: BMv2's packets -> bytes);
 *   AB  = IC - BR - BI, converted to kb/s once, exactly:
 *       x * 8000 / 2^K = (x * 125) >> (K - 6), one action per K.
 * It writes the port's narrow and tight link (IC and AB in kb/s) into its
 * stamp, and hands the flow window's boundary to Flows.
 */
#ifndef __BWN_V1MODEL_WINDOW__
#define __BWN_V1MODEL_WINDOW__

control Window(inout local_metadata_t meta, inout standard_metadata_t standard_metadata) {

    register<bit<32>, PortId_t>(MAX_PORTS) rx_bytes;    /* bytes received, cumulative, wrapping at 2^32 */
    register<bit<32>, PortId_t>(MAX_PORTS) rx_mark;     /* rx_bytes when the last window closed */
    register<bit<48>, PortId_t>(MAX_PORTS) window_end;  /* switch time (us) the current window ends */

    /* What a packet costs the port's link: its length (the default, a link
     * served in bytes), or one slot of `slot_bytes` on a port BMv2 serves in
     * packets per second (the controller's entry, for each port whose rate
     * the switch's queue applies). */
    action serve_bytes() {
        meta.window.charge_bytes = (bit<32>)standard_metadata.packet_length;
    }

    action serve_packets(bit<32> slot_bytes) {
        meta.window.charge_bytes = slot_bytes;
    }

    table port_service {
        key = { standard_metadata.egress_spec : exact @name("egress_port"); }
        actions = { serve_bytes; serve_packets; }
        default_action = serve_bytes();
        size = MAX_PORTS;
    }

    /* Every routed packet, dropped later or not. */
    action count_received() {
        rx_bytes.read(meta.window.rx_bytes, standard_metadata.egress_spec);
        meta.window.rx_bytes = meta.window.rx_bytes + meta.window.charge_bytes;
        rx_bytes.write(standard_metadata.egress_spec, meta.window.rx_bytes);
        window_end.read(meta.window.end_us, standard_metadata.egress_spec);
    }

    /* Keyless: the controller sets the default action, the masks and lengths
     * of the measurement window W and of EBN's flow window. The window that
     * ended at end_us closes and the next starts at this packet's (aligned)
     * window. BR is what the port received since the last close, up to this
     * packet (which belongs to the next window). */
    action roll_window(bit<48> mask, bit<48> window_us, bit<32> flow_mask, bit<32> flow_window_us) {
        meta.window.closed = true;
        meta.window.rx_before = meta.window.rx_bytes - meta.window.charge_bytes;
        rx_mark.read(meta.window.br_bytes, standard_metadata.egress_spec);      /* at the last close */
        meta.window.br_bytes = meta.window.rx_before - meta.window.br_bytes;
        meta.window.start_us = standard_metadata.ingress_global_timestamp & mask;
        if (meta.window.start_us != meta.window.end_us) {
            meta.window.br_bytes = 0;          /* whole windows without a packet: the latest was idle */
        }
        meta.window.end_us = meta.window.start_us + window_us;
        meta.window.flow_epoch = (standard_metadata.ingress_global_timestamp[31:0] & flow_mask) | 1;
        meta.window.flow_window_us = flow_window_us;
        queue_depth.read(meta.window.queue_pkts, standard_metadata.egress_spec);
    }

    table window_config {
        actions = { roll_window; }
        /* the controller sets the default: these are 16.384 ms and 131.072 ms */
        default_action = roll_window(48w0xFFFFFFFFC000, 16384, 32w0xFFFE0000, 131072);
    }

    /* BI: queued packets -> bytes (BMv2 counts packets: the controller's table
     * holds depth * the frame size it assumes; 0 beyond the table). */
    action set_queue_bytes(bit<32> bytes) {
        meta.window.bi_bytes = bytes;
    }

    table queue_bytes {
        key = { meta.window.queue_pkts : exact @name("queue"); }
        actions = { set_queue_bytes; }
        default_action = set_queue_bytes(0);
        size = QUEUE_TABLE_SIZE;
    }

    /* x bytes per window of 2^K us as kb/s, exactly (floor): x * 8000 / 2^K =
     * (x * 125) >> (K - 6), a constant multiply and a constant shift, in 64
     * bits; for a signed x (int32) the arithmetic shift rounds toward minus
     * infinity, by less than 1 kb/s. */
#define BYTES_PER_WINDOW_TO_KBPS(x, K)        ((bit<32>)(((bit<64>)(x) * 125) >> ((K) - 6)))
#define SIGNED_BYTES_PER_WINDOW_TO_KBPS(x, K) ((bit<32>)(int<32>)(((int<64>)(int<32>)(x) * 125) >> ((K) - 6)))

    /* The port's capacity IC as bytes per window of 2^K us, as kb/s and as
     * log7: AB = IC - BR - BI in bytes per window (int32: negative under
     * overload), then AB and BR in kb/s. The controller installs the action
     * of its window's K. */
#define SET_PORT(K) \
    action set_port_##K(bit<32> cap_bytes, bit<32> cap_kbps, bit<16> cap_log7) { \
        meta.stamp.narrow_kbps = cap_kbps; \
        meta.stamp.tight_kbps = SIGNED_BYTES_PER_WINDOW_TO_KBPS(cap_bytes - meta.window.br_bytes - meta.window.bi_bytes, K); \
        meta.window.br_kbps = BYTES_PER_WINDOW_TO_KBPS(meta.window.br_bytes, K); \
        meta.window.cap_log7 = cap_log7; \
    }
    SET_PORT(6)  SET_PORT(7)  SET_PORT(8)  SET_PORT(9)  SET_PORT(10)
    SET_PORT(11) SET_PORT(12) SET_PORT(13) SET_PORT(14) SET_PORT(15)
    SET_PORT(16) SET_PORT(17) SET_PORT(18) SET_PORT(19) SET_PORT(20)
    SET_PORT(21) SET_PORT(22) SET_PORT(23) SET_PORT(24)
#undef SET_PORT

    /* A port without capacity is not stamped (narrow link 0). */
    action port_unconfigured() {
        meta.stamp.narrow_kbps = 0;
        meta.stamp.tight_kbps = 0;
        meta.window.cap_log7 = 0;
    }

    table port_config {
        key = { standard_metadata.egress_spec : exact @name("egress_port"); }
        actions = {
            set_port_6;  set_port_7;  set_port_8;  set_port_9;  set_port_10;
            set_port_11; set_port_12; set_port_13; set_port_14; set_port_15;
            set_port_16; set_port_17; set_port_18; set_port_19; set_port_20;
            set_port_21; set_port_22; set_port_23; set_port_24;
            port_unconfigured;
        }
        default_action = port_unconfigured();
        size = MAX_PORTS;
    }

    /* The new window, the port's narrow and tight link, and log7(IC) for the
     * share (port_state.p4). (An action of its own: written where they are
     * computed, p4c would hand each register a copy of the field.) */
    action store_window() {
        rx_mark.write(standard_metadata.egress_spec, meta.window.rx_before);
        window_end.write(standard_metadata.egress_spec, meta.window.end_us);
        stamp_narrow_kbps.write(standard_metadata.egress_spec, meta.stamp.narrow_kbps);
        stamp_tight_kbps.write(standard_metadata.egress_spec, meta.stamp.tight_kbps);
        capacity_log7.write(standard_metadata.egress_spec, meta.window.cap_log7);
    }

    apply {
        port_service.apply();
        count_received();
        if (!meta.drop && standard_metadata.ingress_global_timestamp >= meta.window.end_us) {
            window_config.apply();
            queue_bytes.apply();
            port_config.apply();
            store_window();
        }
    }
}

#endif
