/* -*- P4_16 -*- */
/*
 * bwn (v1model): the guaranteed service for GTCP reservations (the service
 * model GTCP assumes: in-profile packets are neither dropped nor queued
 * behind best effort; docs/dataplane.md, "Reservations: the guaranteed
 * service").
 *
 * At a port whose routes carry the guaranteed option (define.p4, the options
 * word), in-profile packets (AF11, as the edge's meter marked them:
 * Reservations) take the port's strict-priority queue, PRIORITY_GUARANTEED;
 * the rest (out of profile, and best effort) share priority 0's FIFO with
 * its tail drop. The switch runs with two priority queues per port (BMv2
 * --priority-queues 2), and the controller sets each queue's rate and depth
 * (controller/switchctl.py). Such a port has no Assured Forwarding threshold.
 */
#ifndef __BWN_V1MODEL_GUARANTEED__
#define __BWN_V1MODEL_GUARANTEED__

control GuaranteedService(in headers_t hdr,
                          in local_metadata_t meta,
                          inout standard_metadata_t standard_metadata) {

    action guaranteed_queue() {
        standard_metadata.priority = PRIORITY_GUARANTEED;
    }

    apply {
        if (meta.route.guaranteed == 1 && hdr.ipv4.dscp == DSCP_AF11) {
            guaranteed_queue();
        }
    }
}

#endif
