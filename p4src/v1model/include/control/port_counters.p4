/* -*- P4_16 -*- */
/*
 * bwn (v1model): what each egress port was given and what left it, so that
 * the controller can tell the packets its queue dropped (docs/dataplane.md,
 * "Per-port drops").
 *
 * BMv2 drops a packet that finds its egress queue full (tail drop) without
 * the program seeing it. So the ingress counts the packets it hands to each
 * egress port (port_enqueued) and the egress the packets that left its queue
 * (port_dequeued, QueueMonitor's control); their difference, less the
 * packets still queued, is the port's tail drops. The ingress also counts,
 * per port, the drops it decides after routing (port_drops, indexed by
 * port * DROP_REASONS + reason: random loss and Assured Forwarding). RED's
 * drops (decided in the ingress too, and not handed to the port) and marks
 * are RedEcn's counters.
 */
#ifndef __BWN_V1MODEL_PORT_COUNTERS__
#define __BWN_V1MODEL_PORT_COUNTERS__

control PortCounters(in local_metadata_t meta, in standard_metadata_t standard_metadata) {

    counter<PortId_t>(MAX_PORTS, CounterType.packets) port_enqueued;
    counter<bit<32>>(MAX_PORTS * DROP_REASONS, CounterType.packets) port_drops;

    action count_enqueued() {
        port_enqueued.count(standard_metadata.egress_spec);
    }

    action count_port_drop() {
        port_drops.count((bit<32>)standard_metadata.egress_spec * DROP_REASONS + (bit<32>)meta.drop_reason);
    }

    apply {
        if (!meta.drop && !meta.red.dropped) {
            count_enqueued();
        } else if (meta.drop_reason == DROP_RANDOM_LOSS || meta.drop_reason == DROP_AF_OUT_OF_PROFILE) {
            count_port_drop();
        }
    }
}

#endif
