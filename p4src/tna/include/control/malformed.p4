/* -*- P4_16 -*- */
/*
 * bwn (TNA): malformed input, checked in the ingress (a TNA parser error
 * would drop the packet uncounted): the same checks, in the same order and
 * under the same drop reasons, as the v1model parser and ingress
 * (docs/wire-format.md, "Packets that are not well formed").
 */
#ifndef __BWN_TNA_MALFORMED__
#define __BWN_TNA_MALFORMED__

control MalformedInput(in tna_headers_t hdr, inout ingress_metadata_t ig_md) {

    action drop_malformed(bit<3> reason) {
        ig_md.drop_reason = reason;
        ig_md.drop = 1;
    }

    apply {
        if (!hdr.ipv4.isValid()) {
            drop_malformed(DROP_NOT_IPV4);  /* hosts use static ARP; docs/wire-format.md */
        } else if (hdr.ipv4.ihl < 5) {
            drop_malformed(DROP_IPV4_MALFORMED);
        } else if (hdr.ipv4.ttl <= 1) {
            drop_malformed(DROP_TTL);
        } else if (hdr.udp.isValid() && hdr.udp.dst_port == BWN_UDP_PORT
                   && (!hdr.bwn.isValid() || hdr.udp.length < BWN_MIN_UDP_LENGTH)) {
            /* On a real wire Ethernet pads short frames to 60 bytes, so a
             * short BWN packet usually parses into padding: the UDP length says. */
            drop_malformed(DROP_BWN_MALFORMED);
        } else if (hdr.ipv4.ihl == 5 && ig_md.ipv4_checksum_err) {
            drop_malformed(DROP_IPV4_CHECKSUM);  /* RFC 1812 5.2.2 (options: README.md) */
        }
    }
}

#endif
