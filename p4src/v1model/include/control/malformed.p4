/* -*- P4_16 -*- */
/*
 * bwn (v1model): malformed input. A packet the parser stopped on, or whose
 * IPv4 header checksum does not verify, is dropped under the reason it
 * deserves (docs/wire-format.md, "Packets that are not well formed"; the
 * reasons are controller/entries.py's DROP_REASONS).
 */
#ifndef __BWN_V1MODEL_MALFORMED__
#define __BWN_V1MODEL_MALFORMED__

control MalformedInput(in headers_t hdr,
                       inout local_metadata_t meta,
                       in standard_metadata_t standard_metadata) {

    action drop_malformed(bit<8> reason) {
        meta.drop = true;
        meta.drop_reason = reason;
    }

    apply {
        if (standard_metadata.parser_error == error.NotIPv4) {
            drop_malformed(DROP_NOT_IPV4);
        } else if (standard_metadata.parser_error == error.NoError) {
            drop_malformed(DROP_IPV4_CHECKSUM);     /* parsed, but the checksum does not verify */
        } else if (standard_metadata.parser_error == error.TtlExpired) {
            drop_malformed(DROP_TTL);
        } else if (hdr.l4_ports.isValid() && hdr.l4_ports.dst_port == BWN_UDP_PORT) {
            drop_malformed(DROP_BWN_MALFORMED);     /* the frame ends inside the BWN header */
        } else if (hdr.ethernet.ether_type == ETHERTYPE_IPV4) {
            drop_malformed(DROP_IPV4_MALFORMED);    /* IHL < 5, or it ends inside IPv4, TCP or UDP */
        } else {
            drop_malformed(DROP_NOT_IPV4);          /* it ends inside the Ethernet header */
        }
    }
}

#endif
