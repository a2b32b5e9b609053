/* -*- P4_16 -*- */
/*
 * bwn (TNA): the ingress and egress parsers.
 *
 * Ingress: Ethernet -> IPv4 -> (IPv4 without options, not a fragment) TCP or
 * UDP -> (UDP to port 16983) BWN. The IPv4 header checksum is verified here
 * (a Checksum unit over the 20 bytes extracted; the ingress uses the verdict
 * only when IHL == 5). The ingress checks what the v1model parser rejects
 * (control/malformed.p4), since a TNA parser error drops the packet uncounted.
 *
 * Egress: the bridge header (every packet that reaches the egress was
 * routed), then as far as the BWN header, which the egress stamps.
 */
#ifndef __BWN_TNA_PARSER__
#define __BWN_TNA_PARSER__

/*************************************************************************
 ***********************  I N G R E S S   P A R S E R  *******************
 *************************************************************************/

parser BwnIngressParser(packet_in pkt,
                        out tna_headers_t hdr,
                        out ingress_metadata_t ig_md,
                        out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_checksum;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);   /* phase-0 port metadata: unused */
        /* Tofino does not zero metadata: set what may be read before written. */
        ig_md.l4_src_port = 0;
        ig_md.l4_dst_port = 0;
        ig_md.has_flow_key = 0;
        ig_md.drop = 0;
        ig_md.loss_margin = 0;
        ig_md.options = 0;
        ig_md.is_reserved = 0;
        ig_md.ipv4_checksum_err = false;
        ig_md.ipv4_csum_full = 0;
        ig_md.ipv4_csum_incr = 0;
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    /* As on v1model: only IPv4 without options and not fragmented is parsed
     * beyond IP (options are never extracted). The checksum unit sums the 20
     * bytes extracted here; the ingress uses its verdict only when IHL == 5. */
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_checksum.add(hdr.ipv4);
        ig_md.ipv4_checksum_err = ipv4_checksum.verify();
        transition select(hdr.ipv4.ihl, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, 0, IP_PROTO_UDP): parse_udp;
            (5, 0, 0, IP_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_tcp {
        pkt.extract(hdr.tcp);
        ig_md.l4_src_port = hdr.tcp.src_port;
        ig_md.l4_dst_port = hdr.tcp.dst_port;
        ig_md.has_flow_key = 1;
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        ig_md.l4_src_port = hdr.udp.src_port;
        ig_md.l4_dst_port = hdr.udp.dst_port;
        ig_md.has_flow_key = 1;
        transition select(hdr.udp.dst_port) {
            BWN_UDP_PORT: parse_bwn;
            default: accept;
        }
    }

    /* A frame that ends inside the BWN header leaves hdr.bwn invalid. On a
     * real wire Ethernet pads short frames to 60 bytes, so the ingress also
     * checks the UDP length. */
    state parse_bwn {
        pkt.extract(hdr.bwn);
        transition accept;
    }
}

/*************************************************************************
 ************************  E G R E S S   P A R S E R  *******************
 *************************************************************************/

parser BwnEgressParser(packet_in pkt,
                       out tna_headers_t hdr,
                       out egress_metadata_t eg_md,
                       out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        eg_md.port_configured = 0;
        eg_md.rate_k = 0;
        eg_md.ipv4_csum = 0;
        pkt.extract(hdr.bridge);   /* every packet that reaches the egress was routed */
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, 0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            BWN_UDP_PORT: parse_bwn;
            default: accept;
        }
    }

    state parse_bwn {
        pkt.extract(hdr.bwn);
        transition accept;
    }
}

#endif
