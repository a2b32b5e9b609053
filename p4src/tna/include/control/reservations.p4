/* -*- P4_16 -*- */
/*
 * bwn (TNA): GTCP reservations as RFC 2597 Assured Forwarding, as on v1model
 * (docs/dataplane.md, "Reservations").
 *
 * Reservations (edge switch): the same table, direct meter (trTCM, bytes) and
 * marking: in profile (GREEN) the reservation's DSCP (AF11), the rest of a
 * reserved flow AF13. Packets with IPv4 options are not re-marked (README.md:
 * their checksum is updated incrementally for the TTL alone).
 *
 * AssuredForwarding: out-of-profile and best-effort packets on an AF port are
 * YELLOW, and the traffic manager drops them above the port queue's yellow
 * limit, which the controller sets from the AF threshold (controller/tofino.py
 * tm_port_plan); AF11 packets are GREEN. (The queue depth is not visible in
 * the ingress; these drops are counted by the TM, not by drop_counter.)
 */
#ifndef __BWN_TNA_RESERVATIONS__
#define __BWN_TNA_RESERVATIONS__

control Reservations(inout tna_headers_t hdr, inout ingress_metadata_t ig_md) {

    DirectMeter(MeterType_t.BYTES) reservation_meter;

    action reserved_flow(bit<6> dscp) {
        ig_md.meter_color = reservation_meter.execute();
        ig_md.is_reserved = 1;
        ig_md.reserved_dscp = dscp;
    }

    table reservations {
        key = {
            hdr.ipv4.src_addr  : ternary @name("src_addr");
            hdr.ipv4.dst_addr  : ternary @name("dst_addr");
            hdr.ipv4.protocol  : ternary @name("protocol");
            ig_md.l4_src_port  : ternary @name("src_port");
            ig_md.l4_dst_port  : ternary @name("dst_port");
        }
        /* A direct meter must run in every hit action: NoAction is the miss only. */
        actions = { reserved_flow; @defaultonly NoAction; }
        const default_action = NoAction();
        meters = reservation_meter;
        size = 256;
    }

    apply {
        if (ig_md.options[31:31] == 1 && hdr.ipv4.ihl == 5) {
            reservations.apply();
            if (ig_md.is_reserved == 1) {
                if (ig_md.meter_color == METER_GREEN) {
                    hdr.ipv4.dscp = ig_md.reserved_dscp;
                } else {
                    hdr.ipv4.dscp = DSCP_AF13;
                }
            }
        }
    }
}

control AssuredForwarding(in tna_headers_t hdr,
                          in ingress_metadata_t ig_md,
                          inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    apply {
        if (ig_md.options[28:0] != 0 && hdr.ipv4.dscp != DSCP_AF11) {
            ig_tm_md.packet_color = COLOR_YELLOW;
        }
    }
}

#endif
