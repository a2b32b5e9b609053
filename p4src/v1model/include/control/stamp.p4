/* -*- P4_16 -*- */
/*
 * bwn (v1model): stamping BWN DATA packets at the egress port
 * (docs/wire-format.md, "What a switch does"):
 *   hop_count   = min(hop_count + 1, 255)
 *   ebn_code    = min(ebn_code, the port's per-flow share code)        EBN
 *   narrow_kbps = min(narrow_kbps, the port's capacity)                OBP narrow link
 *   tight_kbps  = min(tight_kbps, the port's available bandwidth)      OBP tight link, signed
 *   UDP checksum = 0                                                   (the UDP checksum rule)
 * The echo section, flags and reserved are never touched. A port the
 * controller has not configured (narrow link 0) leaves the packet as it is.
 * Each DATA packet also leaves the queue it left behind for the ingress
 * (BI and the Assured Forwarding rule, port_state.p4).
 */
#ifndef __BWN_V1MODEL_STAMP__
#define __BWN_V1MODEL_STAMP__

control Stamp(inout headers_t hdr,
              inout local_metadata_t meta,
              in standard_metadata_t standard_metadata) {

    action sample_queue_and_read_narrow() {
        queue_depth.write(standard_metadata.egress_port, standard_metadata.deq_qdepth);
        stamp_narrow_kbps.read(meta.stamp.narrow_kbps, standard_metadata.egress_port);
    }

    action stamp_packet() {
        stamp_ebn_code.read(meta.stamp.ebn_code, standard_metadata.egress_port);
        stamp_tight_kbps.read(meta.stamp.tight_kbps, standard_metadata.egress_port);
        hdr.bwn.hop_count = hdr.bwn.hop_count |+| 1;
        if (meta.stamp.ebn_code < hdr.bwn.ebn_code) {
            hdr.bwn.ebn_code = meta.stamp.ebn_code;
        }
        if (meta.stamp.narrow_kbps < hdr.bwn.narrow_kbps) {
            hdr.bwn.narrow_kbps = meta.stamp.narrow_kbps;
        }
        if ((int<32>)meta.stamp.tight_kbps < (int<32>)hdr.bwn.tight_kbps) {
            hdr.bwn.tight_kbps = meta.stamp.tight_kbps;
        }
        hdr.udp.checksum = 0;
    }

    apply {
        if (hdr.bwn.isValid() && hdr.bwn.version == BWN_VERSION && hdr.bwn.kind == BWN_KIND_DATA) {
            sample_queue_and_read_narrow();
            if (meta.stamp.narrow_kbps != 0) {
                stamp_packet();
            }
        }
    }
}

#endif
