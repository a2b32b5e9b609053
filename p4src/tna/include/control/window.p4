/* -*- P4_16 -*- */
/*
 * bwn (TNA): OBP's measurement window and available bandwidth AB = IC - BR -
 * BI (OBP eq. 6), split across the gresses: a Tofino register belongs to one
 * gress, BR must be counted where packets arrive (before any drop), and BI is
 * only known at the egress (deq_qdepth).
 *
 * Window (ingress): the ids of the rate window and of EBN's flow window the
 * packet arrives in, and the egress port's cumulative bytes received before
 * it, bridged to the egress (bridge_t).
 *
 * AvailableBandwidth (egress): the first packet of a port after its window's
 * end closes it: BR = the bytes received in the window (0 after whole windows
 * without a packet), BI = the queue that packet leaves behind (80-byte cells,
 * exact), AB in kb/s by constant shifts (README.md: 0.06 % low). AB is
 * written when a window closes and read by every DATA packet (Stamp).
 *
 * Time base: global_tstamp is in ns. A "tick" is 1024 ns (bit 10), so the
 * controller's power-of-two windows of 2^K "us" last 2^K ticks = 2^K * 1.024
 * us on Tofino, and controller/tofino.py sizes IC per window for that length.
 * Each dependent step of the egress is an action of its own: bf-p4c merges
 * consecutive statements into one action, and an action runs in one stage
 * ("sN": the earliest stage a step's data dependencies allow).
 */
#ifndef __BWN_TNA_WINDOW__
#define __BWN_TNA_WINDOW__

control Window(inout tna_headers_t hdr,
               inout ingress_metadata_t ig_md,
               in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {

    /* OBP's BR: bytes received for each egress port (every routed packet,
     * before any drop), cumulative, wrapping at 2^32; by the route's pidx. */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) rx_bytes;

    /* Count the packet, return the count before it. */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(rx_bytes) rx_bytes_add = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = value + (bit<32>)ig_md.frame_bytes;
        }
    };

    /* The same action as on v1model, with its parameters in the units the
     * pipeline compares: window ids are global_tstamp[47:16], units of 64 ticks
     * of 1024 ns (a byte-aligned 32-bit slice: one AND with action data), so
     * `mask` is ~(W - 1) >> 6 and `window_us` is W >> 6, W in ticks, likewise
     * for the flow window (controller/tofino.py's window_config). Windows are
     * at least 64 ticks (the controller's minimum, 64); ids wrap after 3.3 days. */
    action roll_window(bit<32> mask, bit<32> window_us, bit<32> flow_mask, bit<32> flow_window_us) {
        hdr.bridge.win = ig_prsr_md.global_tstamp[47:16] & mask;
        ig_md.win_len = window_us;
        ig_md.epoch = ig_prsr_md.global_tstamp[47:16] & flow_mask;
        ig_md.epoch_len = flow_window_us;
    }

    table window_config {
        actions = { roll_window; }
        default_action = roll_window(32w0xFFFFFF00, 256, 32w0xFFFFF800, 2048);  /* 2^14, 2^17 ticks */
        size = 1;
    }

    /* The ids of the windows before this packet's. */
    action previous_windows() {
        ig_md.epoch_prev = ig_md.epoch - ig_md.epoch_len;
        hdr.bridge.win_prev = hdr.bridge.win - ig_md.win_len;
    }

    /* Tofino's ingress has no packet length: bytes received are IPv4 total
     * length + 14 (Ethernet without FCS, what BMv2's packet_length counts). */
    action frame_length() {
        ig_md.frame_bytes = hdr.ipv4.total_len + ETHERNET_BYTES;
    }

    apply {
        frame_length();
        window_config.apply();
        hdr.bridge.setValid();
        hdr.bridge.pad = 0;
        previous_windows();
        hdr.bridge.rx_before = rx_bytes_add.execute(hdr.bridge.pidx[5:0]);
    }
}

control AvailableBandwidth(inout tna_headers_t hdr,
                           inout egress_metadata_t eg_md,
                           in egress_intrinsic_metadata_t eg_intr_md,
                           in port_idx_t pidx,
                           in bool is_data) {

    /* ---- per-port state, indexed by the bridged port index ---------------
     * [T] = telemetry, read over P4Runtime (Tofino has no egress digest). */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) window_id;   /* id of the open window */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) rx_mark;     /* [T] rx_before when the last window closed */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) avail_kbps;  /* [T] AB in force, kb/s (int32 as bits) */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) window_br;   /* [T] BR bytes of the last closed window */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) window_bi;   /* [T] BI cells when it closed */

    /* s0: open window, the next one, or after a gap (idle link)? */
    RegisterAction<bit<32>, port_idx_t, roll_t>(window_id) window_roll = {
        void apply(inout bit<32> value, out roll_t rv) {
            if (value == hdr.bridge.win) {
                rv = ROLL_SAME;
            } else if (value == hdr.bridge.win_prev) {
                value = hdr.bridge.win;
                rv = ROLL_NEXT;
            } else {
                value = hdr.bridge.win;
                rv = ROLL_GAP;
            }
        }
    };

    /* s3: a window closed: BR = bytes received since the last close. */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(rx_mark) rx_mark_close = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = hdr.bridge.rx_before - value;
            value = hdr.bridge.rx_before;
        }
    };

    RegisterAction<bit<32>, port_idx_t, bit<32>>(window_br) window_br_write = {
        void apply(inout bit<32> value) { value = eg_md.br_bytes; }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(window_bi) window_bi_write = {
        void apply(inout bit<32> value) { value = (bit<32>)eg_intr_md.deq_qdepth; }
    };

    /* s9: AB is written when a window closes and read by every DATA packet. */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(avail_kbps) avail_write = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = (bit<32>)eg_md.ab_kbps;
            rv = value;
        }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(avail_kbps) avail_read = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
        }
    };

    /* ---- bytes per window of 2^K ticks -> kb/s, without a multiplier ------
     * kb/s = x * 8 bit / (2^K * 1.024 us) * 1000 = x * 2^(13-K) * 0.95367...;
     * y = x * 2^(13-K) by a constant shift, then y - y/32 - y/64 = 0.953125 y
     * (0.06 % below the exact factor; README.md). Arithmetic shifts: AB may be
     * negative. */
#define KBPS_L(K) \
    action kbps_##K() { \
        eg_md.ab_y  = eg_md.ab_bytes << (13 - K); \
        eg_md.ab_y5 = eg_md.ab_bytes << (8 - K); \
        eg_md.ab_y6 = eg_md.ab_bytes << (7 - K); \
    }
#define KBPS_M(K) \
    action kbps_##K() { \
        eg_md.ab_y  = eg_md.ab_bytes << (13 - K); \
        eg_md.ab_y5 = eg_md.ab_bytes >> (K - 8); \
        eg_md.ab_y6 = eg_md.ab_bytes >> (K - 7); \
    }
#define KBPS_R(K) \
    action kbps_##K() { \
        eg_md.ab_y  = eg_md.ab_bytes >> (K - 13); \
        eg_md.ab_y5 = eg_md.ab_bytes >> (K - 8); \
        eg_md.ab_y6 = eg_md.ab_bytes >> (K - 7); \
    }
    KBPS_L(6) KBPS_L(7)
    action kbps_8() {
        eg_md.ab_y  = eg_md.ab_bytes << 5;
        eg_md.ab_y5 = eg_md.ab_bytes;
        eg_md.ab_y6 = eg_md.ab_bytes >> 1;
    }
    KBPS_M(9)  KBPS_M(10) KBPS_M(11) KBPS_M(12)
    action kbps_13() {
        eg_md.ab_y  = eg_md.ab_bytes;
        eg_md.ab_y5 = eg_md.ab_bytes >> 5;
        eg_md.ab_y6 = eg_md.ab_bytes >> 6;
    }
    KBPS_R(14) KBPS_R(15) KBPS_R(16) KBPS_R(17) KBPS_R(18) KBPS_R(19)
    KBPS_R(20) KBPS_R(21) KBPS_R(22) KBPS_R(23) KBPS_R(24)
#undef KBPS_L
#undef KBPS_M
#undef KBPS_R

    table ab_to_kbps {
        key = { eg_md.rate_k : exact; }
        actions = {
            kbps_6;  kbps_7;  kbps_8;  kbps_9;  kbps_10; kbps_11; kbps_12;
            kbps_13; kbps_14; kbps_15; kbps_16; kbps_17; kbps_18; kbps_19;
            kbps_20; kbps_21; kbps_22; kbps_23; kbps_24; NoAction;
        }
        const entries = {
            6: kbps_6();   7: kbps_7();   8: kbps_8();   9: kbps_9();   10: kbps_10();
            11: kbps_11(); 12: kbps_12(); 13: kbps_13(); 14: kbps_14(); 15: kbps_15();
            16: kbps_16(); 17: kbps_17(); 18: kbps_18(); 19: kbps_19(); 20: kbps_20();
            21: kbps_21(); 22: kbps_22(); 23: kbps_23(); 24: kbps_24();
        }
        const default_action = NoAction();
        size = 32;
    }

    /* BI = queue cells * 80 = *64 + *16. */
    action bi_parts() {
        eg_md.bi_hi = eg_md.queue_cells << 6;
        eg_md.bi_lo = eg_md.queue_cells << 4;
    }

    action bi_bytes() {
        eg_md.bi_bytes = eg_md.bi_hi + eg_md.bi_lo;
    }

    action cap_minus_bi() {
        eg_md.cap_minus_bi = eg_md.cap_bytes - eg_md.bi_bytes;
    }

    action idle_window() {
        eg_md.br_bytes = 0;
    }

    action avail_bytes() {
        eg_md.ab_bytes = (int<32>)eg_md.cap_minus_bi - (int<32>)eg_md.br_bytes;
    }

    action kbps_first_term() {
        eg_md.ab_z = eg_md.ab_y - eg_md.ab_y5;
    }

    action kbps_second_term() {
        eg_md.ab_kbps = eg_md.ab_z - eg_md.ab_y6;
    }

    apply {
        bi_parts();                                                      /* s1 */
        bi_bytes();                                                      /* s2 */
        eg_md.win_state = window_roll.execute(pidx);
        cap_minus_bi();                                                  /* s3 */

        if (eg_md.win_state != ROLL_SAME) {
            /* ---- a window closed: OBP eq. 6 (on every port, as on v1model, so
             * that a port configured later starts from a closed window) ------- */
            eg_md.br_bytes = rx_mark_close.execute(pidx);                /* s3 */
            if (eg_md.win_state == ROLL_GAP) {
                idle_window();                    /* whole windows without a packet */
            }
            window_br_write.execute(pidx);
            window_bi_write.execute(pidx);
            avail_bytes();                                               /* s4/5 */
            ab_to_kbps.apply();                                          /* s6 */
            kbps_first_term();                                           /* s7 */
            kbps_second_term();                                          /* s8 */
            eg_md.ab_now = avail_write.execute(pidx);                    /* s9 */
        } else if (is_data) {
            eg_md.ab_now = avail_read.execute(pidx);
        }
    }
}

#endif
