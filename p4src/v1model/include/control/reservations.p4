/* -*- P4_16 -*- */
/*
 * bwn (v1model): GTCP reservations as RFC 2597 Assured Forwarding
 * (docs/dataplane.md, "Reservations").
 *
 * Reservations (at the edge switch of a reservation): a ternary table on the
 * 5-tuple selects reserved flows; its direct meter (trTCM in bytes, CIR = PIR
 * = the reserved rate) colours each packet. In-profile (GREEN) packets are
 * marked with the reservation's DSCP (AF11), the rest of a reserved flow
 * AF13; unreserved traffic keeps its DSCP.
 *
 * AssuredForwarding (at a port that reserved flows leave by): while the
 * port's queue holds at least its AF threshold, packets that are not AF11
 * (out of profile, and best effort) are dropped; AF11 packets only meet the
 * tail drop of a full queue. Every packet stays in the port's one FIFO, so a
 * flow is never reordered and unused reservation goes to everyone.
 */
#ifndef __BWN_V1MODEL_RESERVATIONS__
#define __BWN_V1MODEL_RESERVATIONS__

control Reservations(inout headers_t hdr, inout local_metadata_t meta) {

    direct_meter<bit<8>>(MeterType.bytes) reservation_meter;

    /* Mark the packet by its colour, and update the header checksum by
     * RFC 1624 eq. 3 over the 16-bit word that holds the DSCP:
     * HC' = ~(~HC + ~m + m'), the sum in one's complement (folded twice). */
    action reserved_flow(bit<6> dscp) {
        reservation_meter.read(meta.reservation.color);
        meta.reservation.tos_word = hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn;
        hdr.ipv4.dscp = DSCP_AF13;
        if (meta.reservation.color == METER_GREEN) {
            hdr.ipv4.dscp = dscp;
        }
        meta.reservation.csum_sum = (bit<32>)(~hdr.ipv4.hdr_checksum) + (bit<32>)(~meta.reservation.tos_word)
                                    + (bit<32>)(hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn);
        meta.reservation.csum_sum = (meta.reservation.csum_sum & 0xFFFF) + (meta.reservation.csum_sum >> 16);
        meta.reservation.csum_sum = (meta.reservation.csum_sum & 0xFFFF) + (meta.reservation.csum_sum >> 16);
        hdr.ipv4.hdr_checksum = ~meta.reservation.csum_sum[15:0];
    }

    table reservations {
        key = {
            hdr.ipv4.src_addr     : ternary @name("src_addr");
            hdr.ipv4.dst_addr     : ternary @name("dst_addr");
            hdr.ipv4.protocol     : ternary @name("protocol");
            hdr.l4_ports.src_port : ternary @name("src_port");
            hdr.l4_ports.dst_port : ternary @name("dst_port");
        }
        actions = { reserved_flow; NoAction; }
        const default_action = NoAction();
        meters = reservation_meter;
        size = 256;
    }

    apply {
        /* Reserved flows are TCP or UDP: packets with ports (l4_ports). */
        if (meta.route.reservation_edge == 1 && hdr.l4_ports.isValid()) {
            reservations.apply();
        }
    }
}

control AssuredForwarding(in headers_t hdr,
                          inout local_metadata_t meta,
                          in standard_metadata_t standard_metadata) {

    /* The queue the port's last DATA packet left behind (port_state.p4). */
    action drop_above_threshold() {
        queue_depth.read(meta.window.queue_pkts, standard_metadata.egress_spec);
        if ((bit<31>)meta.window.queue_pkts >= meta.route.af_threshold_pkts) {
            meta.drop = true;
            meta.drop_reason = DROP_AF_OUT_OF_PROFILE;
        }
    }

    apply {
        if (meta.route.af_threshold_pkts != 0 && hdr.ipv4.dscp != DSCP_AF11) {
            drop_above_threshold();
        }
    }
}

#endif
