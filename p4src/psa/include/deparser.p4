/* -*- P4_16 -*- */
/*
 * bwn on PSA-eBPF: the deparsers. The ingress deparser sends the telemetry
 * digest of a closed window and writes the (changed) headers back; the egress
 * pipeline is empty.
 */
#ifndef __BWN_PSA_DEPARSER__
#define __BWN_PSA_DEPARSER__

control BwnIngressDeparser(packet_out packet, out empty_t clone_i2e_meta, out empty_t resubmit_meta,
                           out empty_t normal_meta, inout psa_headers_t hdr, in psa_metadata_t meta,
                           in psa_ingress_output_metadata_t istd) {
    /* One per port and closed window (PSA-eBPF: a BPF queue map of 128
     * entries, which controller/ebpf.py drains). */
    Digest<psa_port_telemetry_t>() port_telemetry;

    apply {
        if (meta.send_digest) {
            port_telemetry.pack(meta.telemetry);
        }
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.opt10);
        packet.emit(hdr.opt9);
        packet.emit(hdr.opt8);
        packet.emit(hdr.opt7);
        packet.emit(hdr.opt6);
        packet.emit(hdr.opt5);
        packet.emit(hdr.opt4);
        packet.emit(hdr.opt3);
        packet.emit(hdr.opt2);
        packet.emit(hdr.opt1);
        packet.emit(hdr.l4);
        packet.emit(hdr.udp);
        packet.emit(hdr.bwn);
    }
}

control BwnEgressDeparser(packet_out packet, out empty_t clone_e2e_meta, out empty_t recirculate_meta,
                          inout psa_headers_t hdr, in psa_metadata_t meta,
                          in psa_egress_output_metadata_t istd,
                          in psa_egress_deparser_input_metadata_t edstd) {
    apply { }
}

#endif
