/* -*- P4_16 -*- */
/*
 * bwn (TNA): IPv4 routing, with the v1model program's actions and parameters
 * (controller/entries.py builds both), plus the port's register index `pidx`
 * (controller/tofino.py's PortMap: device ports go above 63).
 *
 * Routing: one LPM table for every IPv4 packet (v1model splits it in two
 * because BMv2 pays for where the destination address is; Tofino does not).
 * The flow hash (Flows) and the loss draw (RandomLoss) are computed in the
 * route actions: the hash unit and the RNG reach an action through its
 * table's immediate data (32 bits), which keyless tables cannot use.
 *
 * TtlDecrement: TTL - 1, and which IPv4 checksum update the ingress
 * deparser makes (include/deparser.p4).
 */
#ifndef __BWN_TNA_ROUTING__
#define __BWN_TNA_ROUTING__

control Routing(inout tna_headers_t hdr,
                inout ingress_metadata_t ig_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    Random<bit<16>>() loss_rng;   /* 16 bits: 2^-16 loss resolution (README.md) */
    Hash<bit<8>>(HashAlgorithm_t.CRC32) flow_hash;

    action drop_no_route() {
        ig_md.drop_reason = DROP_NO_ROUTE;
        ig_md.drop = 1;
    }

    action forward(PortId_t port, bit<32> pidx, bit<96> macs) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst_addr = macs[95:48];
        hdr.ethernet.src_addr = macs[47:0];
        hdr.bridge.pidx = pidx[7:0];
    }

    action route(PortId_t port, bit<32> pidx, bit<32> slot_base, bit<96> macs) {
        forward(port, pidx, macs);
        ig_md.loss_threshold = 0;
        ig_md.flow_hash = flow_hash.get({ hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
                                          ig_md.l4_src_port, ig_md.l4_dst_port });
    }

    /* A route whose port has options: random loss (threshold = round(p *
     * 2^32), 0 = none), and `options` = reservations (bit 31) | the
     * guaranteed service (bit 30) | RED (bit 29) | AF threshold (bits 28..0,
     * enforced by the traffic manager on Tofino: only != 0 is used here). */
    action route_checked(PortId_t port, bit<32> pidx, bit<32> slot_base, bit<96> macs,
                         bit<32> loss_threshold, bit<32> options) {
        forward(port, pidx, macs);
        ig_md.loss_threshold = (bit<16>)loss_threshold[31:16];
        ig_md.options = options;
        ig_md.loss_draw = loss_rng.get();
        ig_md.flow_hash = flow_hash.get({ hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
                                          ig_md.l4_src_port, ig_md.l4_dst_port });
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr : lpm @name("dst_addr"); }
        actions = { route; route_checked; drop_no_route; }
        default_action = drop_no_route();
        size = 1024;
    }

    apply {
        ipv4_lpm.apply();
    }
}

control TtlDecrement(inout tna_headers_t hdr, inout ingress_metadata_t ig_md) {

    /* The checksum operand before the TTL changes (the header's checksum is
     * not changed in the ingress: the deparser writes it). */
    action decrement_ttl() {
        ig_md.csum_inv_hc = ~hdr.ipv4.hdr_checksum;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    apply {
        decrement_ttl();
        /* The ingress deparser writes the IPv4 checksum. */
        if (hdr.ipv4.ihl == 5) {
            ig_md.ipv4_csum_full = 1;
        } else {
            ig_md.ipv4_csum_incr = 1;
            ig_md.csum_ttl_delta = 0xFEFF;
        }
    }
}

#endif
