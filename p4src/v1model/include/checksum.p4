/* -*- P4_16 -*- */
/*
 * bwn (v1model): the IPv4 header checksum.
 *
 * RFC 1812 sec. 5.2.2: a router verifies the header checksum and drops a
 * header that does not verify (standard_metadata.checksum_error; the ingress
 * counts it under its own reason, control/malformed.p4), so that no packet
 * leaves with a bad checksum. Every change a switch makes to the header is
 * then applied to the checksum incrementally (RFC 1624 eq. 3), options
 * included: the TTL (control/routing.p4) and the DSCP of reserved flows
 * (control/reservations.p4). So nothing is computed here.
 */
#ifndef __BWN_V1MODEL_CHECKSUM__
#define __BWN_V1MODEL_CHECKSUM__

control BwnVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && !hdr.ipv4_options.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len,
              hdr.ipv4.identification,
              hdr.ipv4.flag_reserved, hdr.ipv4.flag_df, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset,
              hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr,
              hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        verify_checksum(hdr.ipv4_options.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len,
              hdr.ipv4.identification,
              hdr.ipv4.flag_reserved, hdr.ipv4.flag_df, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset,
              hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr,
              hdr.ipv4.dst_addr,
              hdr.ipv4_options.options },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control BwnComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

#endif
