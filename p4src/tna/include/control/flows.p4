/* -*- P4_16 -*- */
/*
 * bwn (TNA): EBN's active flows N and the per-flow fair share C / N (EBN sec.
 * III-B; docs/dataplane.md, "EBN per-flow share"), as on v1model but split
 * across the gresses: the flow count lives in the ingress (where every packet
 * arrives) and is bridged to the egress, which computes the share from the
 * port's capacity for every packet (per-packet work is free on Tofino).
 *
 * Flows (ingress): linear counting over FLOW_SLOTS hash slots per port; a
 * slot that does not hold the current flow window is new in it. N = max(this
 * flow window's count, the last one's), bridged (bridge.flows).
 *
 * Share (egress): log7(N) from the controller's table (flows_log), then the
 * EBN code max((log7(C) + 8 - log7(N)) >> 4, 0) in 8-bit pieces (the code is
 * 8 bits; 16-bit values feeding an 8-bit header field do not fit Tofino's PHV
 * here): with log7(C) + 8 = 16 ch + cf and log7(N) = 16 nh + nf, the code is
 * ch - nh, less 1 when nf > cf, saturated at 0. No clamp to 254: the
 * controller caps log7(C) (controller/tofino.py).
 */
#ifndef __BWN_TNA_FLOWS__
#define __BWN_TNA_FLOWS__

control Flows(inout tna_headers_t hdr, inout ingress_metadata_t ig_md) {

    /* flow_epoch, flows_current, flows_last, flow_slot: by the route's pidx. */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) flow_epoch;
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) flows_current;   /* [T] */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) flows_last;      /* [T] */
    Register<bit<32>, slot_idx_t>(MAX_PORTS * FLOW_SLOTS, 0) flow_slot;
    /* A register's index comes from the hash unit: the slot is port index ++
     * flow hash, an identity hash of the two (= slot_base + hash). */
    Hash<slot_idx_t>(HashAlgorithm_t.IDENTITY) slot_index;

    /* s2: the flow window: open, next, or after a gap? */
    RegisterAction<bit<32>, port_idx_t, roll_t>(flow_epoch) flow_epoch_roll = {
        void apply(inout bit<32> value, out roll_t rv) {
            if (value == ig_md.epoch) {
                rv = ROLL_SAME;
            } else if (value == ig_md.epoch_prev) {
                value = ig_md.epoch;
                rv = ROLL_NEXT;
            } else {
                value = ig_md.epoch;
                rv = ROLL_GAP;
            }
        }
    };

    /* s2: linear counting: a slot that does not hold the current epoch is new. */
    RegisterAction<bit<32>, slot_idx_t, bit<32>>(flow_slot) flow_slot_visit = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (value != ig_md.epoch) {
                value = ig_md.epoch;
                rv = 1;
            } else {
                rv = 0;
            }
        }
    };

    /* s3: distinct slots in the current flow window (or the closed one's count). */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_current) flows_current_add = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = value + ig_md.flow_inc;
            rv = value;
        }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_current) flows_current_roll = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = ig_md.flow_inc;
        }
    };

    /* s4: the last complete flow window's count. */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_last) flows_last_read = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
        }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_last) flows_last_set = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = ig_md.flows_closed;
            rv = value;
        }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_last) flows_last_clear = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = 0;
            rv = 0;
        }
    };

    apply {
        ig_md.flow_state = flow_epoch_roll.execute(hdr.bridge.pidx[5:0]);
        ig_md.flow_inc = 0;
        if (ig_md.has_flow_key == 1) {
            ig_md.flow_inc = flow_slot_visit.execute(
                slot_index.get({ hdr.bridge.pidx[5:0], ig_md.flow_hash }));
        }
        if (ig_md.flow_state == ROLL_SAME) {
            ig_md.flows_cur = flows_current_add.execute(hdr.bridge.pidx[5:0]);
            ig_md.flows_last = flows_last_read.execute(hdr.bridge.pidx[5:0]);
        } else {
            /* the closed window's count moves to `last` (0 after a gap) */
            ig_md.flows_closed = flows_current_roll.execute(hdr.bridge.pidx[5:0]);
            ig_md.flows_cur = ig_md.flow_inc;
            if (ig_md.flow_state == ROLL_NEXT) {
                ig_md.flows_last = flows_last_set.execute(hdr.bridge.pidx[5:0]);
            } else {
                ig_md.flows_last = flows_last_clear.execute(hdr.bridge.pidx[5:0]);
            }
        }
        hdr.bridge.flows = max(ig_md.flows_cur, ig_md.flows_last);
    }
}

control Share(in tna_headers_t hdr, inout egress_metadata_t eg_md, in port_idx_t pidx) {

    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) share_ebn;   /* [T] EBN code of the port's share */

    RegisterAction<bit<32>, port_idx_t, bit<32>>(share_ebn) share_ebn_write = {
        void apply(inout bit<32> value) { value = (bit<32>)eg_md.ebn; }
    };

    /* log7 of the linear-counting estimate of N (docs/dataplane.md, "Active
     * flows"); same table and action names as v1model. */
    action set_share(bit<16> log7) {
        eg_md.n_hi = log7[11:4];
        eg_md.n_frac = (bit<8>)log7[3:0];
    }

    table flows_log {
        key = { hdr.bridge.flows : exact @name("flows"); }
        actions = { set_share; }
        default_action = set_share(0);
        size = FLOW_SLOTS + 1;
    }

    action borrow() {
        eg_md.n_borrow = eg_md.n_frac |-| eg_md.cap_frac;
    }

    action code() {
        eg_md.ebn = eg_md.cap_hi |-| eg_md.n_hi;
    }

    action code_borrow() {
        eg_md.ebn = eg_md.ebn |-| 1;
    }

    apply {
        flows_log.apply();                                               /* s0 */
        borrow();                                                        /* s1 */
        code();                                                          /* s2 */
        if (eg_md.n_borrow != 0) {
            code_borrow();                                               /* s3 */
        }
        share_ebn_write.execute(pidx);                                   /* s4 */
    }
}

#endif
