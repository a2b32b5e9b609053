/* -*- P4_16 -*- */
/*
 * bwn (TNA): the guaranteed service for GTCP reservations, as on v1model
 * (p4src/v1model/include/control/guaranteed.p4): at a port whose routes carry
 * the guaranteed option (bit 30 of the options word), in-profile (AF11)
 * packets take queue PRIORITY_GUARANTEED, which the controller gives strict
 * priority in the traffic manager (controller/tofino.py tm_port_plan); the
 * rest stay in queue 0. Tofino's traffic manager shapes the port as a whole
 * above its queues, so here the service is work-conserving: best effort gets
 * what in-profile traffic leaves (BMv2 rate-limits each queue on its own:
 * docs/dataplane.md).
 */
#ifndef __BWN_TNA_GUARANTEED__
#define __BWN_TNA_GUARANTEED__

control GuaranteedService(in tna_headers_t hdr,
                          in ingress_metadata_t ig_md,
                          inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    apply {
        if (ig_md.options[30:30] == 1 && hdr.ipv4.dscp == DSCP_AF11) {
            ig_tm_md.qid = PRIORITY_GUARANTEED;
        }
    }
}

#endif
