/* -*- P4_16 -*- */
/*
 * bwn (TNA): RED with ECN marking at an egress port whose routes carry the
 * RED option (bit 29 of the options word), with Tofino's Wred extern: the
 * traffic manager's queue depth (deq_qdepth, 80-byte cells) averaged and
 * compared with the thresholds by the Wred unit, whose parameters (time
 * constant, min and max thresholds, max_p) the control plane writes through
 * BfRt. A packet the unit picks is marked CE when it is ECN-capable (its
 * IPv4 header checksum rewritten by the egress deparser), dropped otherwise.
 * What differs from v1model's RED (p4src/tna/README.md): the unit does not
 * say whether a pick is early or forced (so an ECN-capable packet is marked
 * above 2 max_th too), and its marking curve, average and idle handling are
 * Tofino's own; P4Runtime cannot configure the unit (controller/tofino.py
 * does not).
 *
 * RedOption (ingress) bridges the route's RED option to the egress.
 */
#ifndef __BWN_TNA_RED_ECN__
#define __BWN_TNA_RED_ECN__

const bit<8> RED_PICKED = 1;    /* the Wred unit's drop_value: mark or drop this packet */
const bit<8> RED_PASSED = 0;

control RedOption(inout tna_headers_t hdr, in ingress_metadata_t ig_md) {
    apply {
        hdr.bridge.red = ig_md.options[29:29];
    }
}

control RedEcn(inout tna_headers_t hdr,
               inout egress_metadata_t eg_md,
               in egress_intrinsic_metadata_t eg_intr_md,
               inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
               in port_idx_t pidx) {

    Wred<bit<19>, port_idx_t>(MAX_PORTS, RED_PICKED, RED_PASSED) red;
    Counter<bit<64>, port_idx_t>(MAX_PORTS, CounterType_t.PACKETS) red_marked;
    Counter<bit<64>, port_idx_t>(MAX_PORTS, CounterType_t.PACKETS) red_dropped;

    action mark_congestion() {
        hdr.ipv4.ecn = ECN_CE;
        eg_md.ipv4_csum = 1;
        red_marked.count(pidx);
    }

    action red_drop() {
        eg_dprsr_md.drop_ctl = 1;
        red_dropped.count(pidx);
    }

    apply {
        if (hdr.bridge.red == 1) {
            eg_md.red_verdict = red.execute(eg_intr_md.deq_qdepth, pidx);
            if (eg_md.red_verdict == RED_PICKED) {
                /* Packets with IPv4 options are not re-marked on Tofino (their
                 * header checksum cannot be recomputed here): dropped instead. */
                if (hdr.ipv4.ecn != ECN_NOT_ECT && hdr.ipv4.ihl == 5) {
                    mark_congestion();
                } else {
                    red_drop();
                }
            }
        }
    }
}

#endif
