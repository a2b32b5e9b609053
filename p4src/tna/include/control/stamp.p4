/* -*- P4_16 -*- */
/*
 * bwn (TNA): stamping BWN DATA packets on a configured port
 * (docs/wire-format.md, "What a switch does"): min() of each forward field
 * with the port's value (EBN code: Share; narrow link: PortConfig; tight
 * link: AvailableBandwidth), hop count + 1 saturating at 255, UDP checksum 0.
 */
#ifndef __BWN_TNA_STAMP__
#define __BWN_TNA_STAMP__

control Stamp(inout tna_headers_t hdr, in egress_metadata_t eg_md, in bool is_data) {

    action stamp() {
        hdr.bwn.hop_count = hdr.bwn.hop_count |+| 1;
        hdr.bwn.narrow_kbps = min(hdr.bwn.narrow_kbps, eg_md.cap_kbps);
        hdr.bwn.ebn_code = min(hdr.bwn.ebn_code, eg_md.ebn);
        hdr.bwn.tight_kbps = (bit<32>)min((int<32>)hdr.bwn.tight_kbps, (int<32>)eg_md.ab_now);
        hdr.udp.checksum = 0;
    }

    apply {
        if (eg_md.port_configured == 1) {
            if (is_data) {
                stamp();                                                 /* s10 */
            }
        }
    }
}

#endif
