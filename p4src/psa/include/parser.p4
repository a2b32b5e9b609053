/* -*- P4_16 -*- */
/*
 * bwn on PSA-eBPF: the ingress parser (the egress pipeline is empty).
 *
 * The same acceptance as the v1model program (docs/wire-format.md, "Packets
 * that are not well formed"): non-IPv4 frames, IHL < 5, TTL 0 or 1 and
 * truncated headers end in a parser error, which the ingress counts under its
 * drop reason. The IPv4 header checksum is verified over the whole header,
 * options included (RFC 1812 sec. 5.2.2), as the last step of every path that
 * parsed the header, so that a parser error found after IPv4 (a truncated BWN
 * header) takes precedence, as on BMv2 (whose checksum flag the ingress reads
 * after the parser error).
 *
 * p4c-ebpf runs the ingress control after a parser error only when the error
 * has a code (a bare `reject` drops the packet unseen): every error path here
 * goes through verify(). The ingress does not compare parser errors: p4c-ebpf
 * compiles `==` between two errors into a 4-byte memcmp of 1-byte values, true
 * when they differ. So the parser marks how far it got with flags in meta,
 * each written once (p4c's midend drops a write that a later one overwrites
 * on every path, even when a failed extract between them ends the parser),
 * and meta.parsed = 1 ends a path that succeeded; the ingress derives the drop
 * reason from them.
 */
#ifndef __BWN_PSA_PARSER__
#define __BWN_PSA_PARSER__

parser BwnIngressParser(packet_in packet, out psa_headers_t hdr, inout psa_metadata_t meta,
                        in psa_ingress_parser_input_metadata_t istd,
                        in empty_t resubmit_meta, in empty_t recirculate_meta) {
    InternetChecksum() ipv4_checksum;

    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: not_ipv4;
        }
    }

    state not_ipv4 {
        verify(false, error.NotIPv4);   /* hosts use static ARP (docs/wire-format.md) */
        transition accept;
    }

    /* Only IPv4 without options and not fragmented is parsed beyond IP: options
     * and fragments are routed but never stamped nor counted as flows. */
    state parse_ipv4 {
        meta.at_ipv4 = 1;
        packet.extract(hdr.ipv4);
        ipv4_checksum.add({hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                           hdr.ipv4.total_len, hdr.ipv4.identification,
                           hdr.ipv4.flag_reserved, hdr.ipv4.flag_df, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset,
                           hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.hdr_checksum,
                           hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        transition select(hdr.ipv4.ihl, hdr.ipv4.ttl, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset,
                          hdr.ipv4.protocol) {
            (0 &&& 0xC, _, _, _, _): ipv4_too_short;            /* IHL 0..3 */
            (4, _, _, _, _): ipv4_too_short;
            (_, 0 &&& 0xFE, _, _, _): ttl_expired;              /* TTL 0 or 1 */
            (5, _, 0, 0, IP_PROTO_UDP): parse_udp;
            (5, _, 0, 0, IP_PROTO_TCP): parse_tcp;
            (5, _, _, _, _): check_ipv4;
            (6, _, _, _, _): opt1;
            (7, _, _, _, _): opt2;
            (8, _, _, _, _): opt3;
            (9, _, _, _, _): opt4;
            (10, _, _, _, _): opt5;
            (11, _, _, _, _): opt6;
            (12, _, _, _, _): opt7;
            (13, _, _, _, _): opt8;
            (14, _, _, _, _): opt9;
            default: opt10;                                     /* IHL 15 */
        }
    }

    state ipv4_too_short {
        verify(false, error.IPv4HeaderTooShort);
        transition accept;
    }

    state ttl_expired {
        meta.at_ttl = 1;
        verify(false, error.TtlExpired);
        transition accept;
    }

    /* IHL - 5 option words, each added to the checksum (a truncated option
     * ends in PacketTooShort: IPv4 malformed). */
#define OPTION_STATE(K, NEXT) \
    state opt##K { \
        packet.extract(hdr.opt##K); \
        ipv4_checksum.add({hdr.opt##K.word}); \
        transition NEXT; \
    }
    OPTION_STATE(10, opt9)
    OPTION_STATE(9, opt8)
    OPTION_STATE(8, opt7)
    OPTION_STATE(7, opt6)
    OPTION_STATE(6, opt5)
    OPTION_STATE(5, opt4)
    OPTION_STATE(4, opt3)
    OPTION_STATE(3, opt2)
    OPTION_STATE(2, opt1)
    OPTION_STATE(1, check_ipv4)
#undef OPTION_STATE

    state parse_tcp {
        packet.extract(hdr.l4);
        meta.flow_key = 1;
        transition check_ipv4;
    }

    /* The rest of the UDP header is only needed by BWN packets (the stamp
     * zeroes its checksum); for other UDP it stays payload, untouched. */
    state parse_udp {
        packet.extract(hdr.l4);
        meta.flow_key = 1;
        transition select(hdr.l4.dst_port) {
            BWN_UDP_PORT: parse_bwn;
            default: check_ipv4;
        }
    }

    /* A truncated BWN header ends parsing with error.PacketTooShort. */
    state parse_bwn {
        meta.at_bwn = 1;
        packet.extract(hdr.udp);
        packet.extract(hdr.bwn);
        transition check_ipv4;
    }

    /* The one's complement sum of the whole header, checksum included, is
     * 0xFFFF exactly when it verifies (RFC 1071): its complement, get(), is 0. */
    state check_ipv4 {
        meta.at_checksum = 1;
        verify(ipv4_checksum.get() == 0, error.IPv4BadChecksum);
        meta.parsed = 1;
        transition accept;
    }
}

parser BwnEgressParser(packet_in packet, out psa_headers_t hdr, inout psa_metadata_t meta,
                       in psa_egress_parser_input_metadata_t istd, in empty_t normal_meta,
                       in empty_t clone_i2e_meta, in empty_t clone_e2e_meta) {
    state start {
        transition accept;
    }
}

#endif
