/* -*- P4_16 -*- */
/*
 * bwn (TNA): the ingress and egress deparsers. The ingress deparser writes the
 * IPv4 header checksum (Tofino's Checksum units exist only in parsers and
 * deparsers): recomputed over the 20-byte header when IHL == 5 (verified on
 * arrival), or updated by RFC 1624 eq. 3 when the header has options, which
 * are never extracted. control/routing.p4 (TtlDecrement) sets which. The
 * egress deparser recomputes it for a packet RED marked CE (control/red_ecn.p4).
 */
#ifndef __BWN_TNA_DEPARSER__
#define __BWN_TNA_DEPARSER__

/*************************************************************************
 ********************  I N G R E S S   D E P A R S E R  *****************
 *************************************************************************/

control BwnIngressDeparser(packet_out pkt,
                           inout tna_headers_t hdr,
                           in ingress_metadata_t ig_md,
                           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_checksum_full;
    Checksum() ipv4_checksum_incr;

    apply {
        /* IHL == 5 (verified on arrival): recompute over the whole header. */
        if (ig_md.ipv4_csum_full == 1) {
            hdr.ipv4.hdr_checksum = ipv4_checksum_full.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.total_len,
                hdr.ipv4.identification,
                hdr.ipv4.flag_reserved, hdr.ipv4.flag_df, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset,
                hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr,
                hdr.ipv4.dst_addr});
        }
        /* IHL > 5: the options are never extracted, so the header cannot be
         * summed here: RFC 1624 eq. 3, HC' = ~(~HC + ~m + m'), where the only
         * change is TTL - 1 in the (ttl, protocol) word: ~m + m' = 0xFEFF, the
         * constant v1model adds too (such packets are not re-marked, README.md). */
        if (ig_md.ipv4_csum_incr == 1) {
            hdr.ipv4.hdr_checksum = ipv4_checksum_incr.update({
                ig_md.csum_inv_hc, ig_md.csum_ttl_delta});
        }
        pkt.emit(hdr);  /* bridge (routed packets), then the packet's valid headers */
    }
}

/*************************************************************************
 *********************  E G R E S S   D E P A R S E R  *******************
 *************************************************************************/

control BwnEgressDeparser(packet_out pkt,
                          inout tna_headers_t hdr,
                          in egress_metadata_t eg_md,
                          in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        /* RED marked the packet CE (IHL == 5 only: control/red_ecn.p4). */
        if (eg_md.ipv4_csum == 1) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.total_len,
                hdr.ipv4.identification,
                hdr.ipv4.flag_reserved, hdr.ipv4.flag_df, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset,
                hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr,
                hdr.ipv4.dst_addr});
        }
        pkt.emit(hdr);  /* the bridge header is invalid by now */
    }
}

#endif
