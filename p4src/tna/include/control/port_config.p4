/* -*- P4_16 -*- */
/*
 * bwn (TNA): the egress port's configuration, with the v1model program's
 * table and actions (set_port_K per window size 2^K): the capacity IC as bytes
 * per window of 2^K ticks (controller/tofino.py), as kb/s (the narrow-link
 * stamp) and as log7 + 8 for the EBN code (Share); K picks the bytes -> kb/s
 * conversion (AvailableBandwidth's ab_to_kbps); and the queue depth in 80-byte
 * cells as a 32-bit value, for BI.
 */
#ifndef __BWN_TNA_PORT_CONFIG__
#define __BWN_TNA_PORT_CONFIG__

control PortConfig(inout egress_metadata_t eg_md, in egress_intrinsic_metadata_t eg_intr_md) {

    /* The 19-bit queue depth as a 32-bit value, through the hash unit
     * (identity): ALU arithmetic on the intrinsic field itself would tie its
     * container to the 32-bit arithmetic that follows. A hash reaches an action
     * through a keyed table's immediate data, so port_config's actions do it. */
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) queue_cells;

#define SET_PORT(K) \
    action set_port_##K(bit<32> cap_bytes, bit<32> cap_kbps, bit<16> cap_log7_r) { \
        eg_md.port_configured = 1; \
        eg_md.cap_bytes = cap_bytes; \
        eg_md.cap_kbps = cap_kbps; \
        eg_md.cap_hi = cap_log7_r[11:4]; \
        eg_md.cap_frac = (bit<8>)cap_log7_r[3:0]; \
        eg_md.rate_k = K; \
        eg_md.queue_cells = queue_cells.get({ eg_intr_md.deq_qdepth }); \
    }
    SET_PORT(6)  SET_PORT(7)  SET_PORT(8)  SET_PORT(9)  SET_PORT(10)
    SET_PORT(11) SET_PORT(12) SET_PORT(13) SET_PORT(14) SET_PORT(15)
    SET_PORT(16) SET_PORT(17) SET_PORT(18) SET_PORT(19) SET_PORT(20)
    SET_PORT(21) SET_PORT(22) SET_PORT(23) SET_PORT(24)
#undef SET_PORT

    action port_unconfigured() {
        eg_md.port_configured = 0;
    }

    table port_config {
        key = { eg_intr_md.egress_port : exact @name("egress_port"); }
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

    apply {
        port_config.apply();                                             /* s0 */
    }
}

#endif
