/* -*- P4_16 -*- */
/*
 * bwn (v1model): parser and deparser.
 *
 * Ethernet -> IPv4 -> (IPv4 without options, not a fragment) TCP or UDP ports
 * -> (UDP to port 16983) UDP length and checksum, BWN header -> (version 1
 * DATA with flag XR) the XR header. Malformed input
 * ends with a parser error that the ingress counts and drops
 * (control/malformed.p4; docs/wire-format.md, "Packets that are not well
 * formed"). IPv4 options and fragments are routed but never stamped nor
 * counted as flows.
 */
#ifndef __BWN_V1MODEL_PARSER__
#define __BWN_V1MODEL_PARSER__

parser BwnParser(packet_in packet,
                 out headers_t hdr,
                 inout local_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: not_ipv4;
        }
    }

    /* The project's hosts use static ARP entries (docs/wire-format.md). */
    state not_ipv4 {
        verify(false, error.NotIPv4);
        transition accept;
    }

    /* Only IPv4 without options and not fragmented is parsed beyond IP. */
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.ttl, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset,
                          hdr.ipv4.protocol) {
            (0 .. 4, _, _, _, _): ipv4_too_short;
            (_, 0 .. 1, _, _, _): ttl_expired;          /* no hop left */
            (5, _, 0, 0, IP_PROTO_TCP): parse_tcp;
            (5, _, 0, 0, IP_PROTO_UDP): parse_udp;
            (5, _, _, _, _): accept;                    /* a fragment, or neither TCP nor UDP */
            default: parse_ipv4_options;
        }
    }

    state ipv4_too_short {
        verify(false, error.IPv4HeaderTooShort);
        transition accept;
    }

    state ttl_expired {
        verify(false, error.TtlExpired);
        transition accept;
    }

    /* (IHL - 5) 32-bit words, only to verify the header checksum. */
    state parse_ipv4_options {
        packet.extract(hdr.ipv4_options, ((bit<32>)hdr.ipv4.ihl - 5) * 32);
        transition accept;
    }

    state parse_tcp {
        packet.extract(hdr.l4_ports);
        transition accept;
    }

    /* The rest of the UDP header is only needed by BWN packets (the stamp
     * zeroes its checksum); for other UDP it stays payload, untouched. */
    state parse_udp {
        packet.extract(hdr.l4_ports);
        transition select(hdr.l4_ports.dst_port) {
            BWN_UDP_PORT: parse_bwn;
            default: accept;
        }
    }

    /* A frame that ends inside these ends with error.PacketTooShort. */
    state parse_bwn {
        packet.extract(hdr.udp);
        packet.extract(hdr.bwn);
        transition select(hdr.bwn.version, hdr.bwn.kind, hdr.bwn.flags & BWN_FLAG_XR) {
            (BWN_VERSION, BWN_KIND_DATA, BWN_FLAG_XR): parse_xr;
            default: accept;
        }
    }

    state parse_xr {
        packet.extract(hdr.xr);
        transition accept;
    }
}

control BwnDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv4_options);
        packet.emit(hdr.l4_ports);
        packet.emit(hdr.udp);
        packet.emit(hdr.bwn);
        packet.emit(hdr.xr);
    }
}

#endif
