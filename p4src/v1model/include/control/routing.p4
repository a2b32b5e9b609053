/* -*- P4_16 -*- */
/*
 * bwn (v1model): IPv4 routing.
 *
 * Ingress (Routing): longest-prefix match on the destination gives the egress
 * port, both MAC addresses, and what the port needs checked besides
 * forwarding (a route with options: random loss, reservations, Assured
 * Forwarding, the guaranteed service, RED). The controller writes every
 * route to both tables: packets whose flows EBN counts (TCP and UDP, IPv4
 * without options, not fragments) take `ipv4_lpm`, whose routes also carry
 * the port's first flow hash slot; every other IPv4 packet takes
 * `ipv4_lpm_other`.
 *
 * Egress (TtlDecrement): the TTL and the header checksum, for every packet.
 */
#ifndef __BWN_V1MODEL_ROUTING__
#define __BWN_V1MODEL_ROUTING__

control Routing(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t standard_metadata) {

    action drop_no_route() {
        meta.drop = true;
        meta.drop_reason = DROP_NO_ROUTE;
    }

    /* The next hop: egress port, and the MAC addresses as dst ++ src. */
    action forward(PortId_t port, bit<96> macs) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = macs[95:48];
        hdr.ethernet.src_addr = macs[47:0];
    }

    /* The port's options (define.p4: the options word): random loss with
     * threshold round(p * 2^32) (0: none), this switch as the edge of
     * reservations (bit 31), the guaranteed service (bit 30), RED with ECN
     * (bit 29), the Assured Forwarding threshold (bits 28..0). The
     * controller never writes a route with options that are all off. */
    action set_options(bit<32> loss_threshold, bit<32> options) {
        meta.route.has_options = true;
        meta.route.loss_threshold = loss_threshold;
        meta.route.reservation_edge = options[31:31];
        meta.route.guaranteed = options[30:30];
        meta.route.red = options[29:29];
        meta.route.af_threshold_pkts = (bit<31>)options[28:0];
    }

    action route(PortId_t port, bit<32> slot_base, bit<96> macs) {
        forward(port, macs);
        meta.route.slot_base = slot_base;
    }

    action route_checked(PortId_t port, bit<32> slot_base, bit<96> macs,
                         bit<32> loss_threshold, bit<32> options) {
        route(port, slot_base, macs);
        set_options(loss_threshold, options);
    }

    action route_other(PortId_t port, bit<96> macs) {
        forward(port, macs);
    }

    action route_other_checked(PortId_t port, bit<96> macs,
                               bit<32> loss_threshold, bit<32> options) {
        forward(port, macs);
        set_options(loss_threshold, options);
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr : lpm @name("dst_addr"); }
        actions = { route; route_checked; drop_no_route; }
        default_action = drop_no_route();
        size = 1024;
    }

    table ipv4_lpm_other {
        key = { hdr.ipv4.dst_addr : lpm @name("dst_addr"); }
        actions = { route_other; route_other_checked; drop_no_route; }
        default_action = drop_no_route();
        size = 1024;
    }

    apply {
        if (hdr.l4_ports.isValid()) {
            ipv4_lpm.apply();
        } else {
            ipv4_lpm_other.apply();
        }
    }
}

control TtlDecrement(inout headers_t hdr) {

    /* TTL - 1 (the parser let only TTL >= 2 in), and the header checksum HC
     * by RFC 1624 eq. 3, HC' = ~(~HC + ~m + m'): the 16-bit word TTL ++
     * protocol drops by 0x0100, so ~m + m' is the constant 0xFEFF, and
     * ~(~HC + 0xFEFF) in one's complement is HC + 0x0100, or HC + 0x0101 when
     * that sum carries (exactly when HC >= 0xFEFF), mod 2^16. Right with IPv4
     * options too; tests/test_dataplane_math.py checks the rule against eq. 3
     * for every HC. In the egress: BMv2 runs the ingress of all packets in one
     * thread and the egress in others (docs/dataplane.md). */
    action decrement_ttl() {
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        hdr.ipv4.hdr_checksum = hdr.ipv4.hdr_checksum
                                + (hdr.ipv4.hdr_checksum < 16w0xFEFF ? 16w0x0100 : 16w0x0101);
    }

    apply {
        decrement_ttl();
    }
}

#endif
