/* -*- P4_16 -*- */
/*
 * bwn (TNA): the packets the ingress hands to each egress port
 * (port_enqueued) and, per port and reason, the drops it decides after
 * routing (port_drops: random loss; on Tofino the Assured Forwarding drops
 * are the traffic manager's, counted there), as on v1model
 * (p4src/v1model/include/control/port_counters.p4). QueueMonitor counts what
 * left each port's queue (port_dequeued). All indexed by the route's port
 * index (pidx); [T]: read over P4Runtime.
 */
#ifndef __BWN_TNA_PORT_COUNTERS__
#define __BWN_TNA_PORT_COUNTERS__

control PortCounters(in tna_headers_t hdr, in ingress_metadata_t ig_md) {

    Counter<bit<64>, port_idx_t>(MAX_PORTS, CounterType_t.PACKETS) port_enqueued;
    Counter<bit<64>, bit<9>>(MAX_PORTS * DROP_REASONS, CounterType_t.PACKETS) port_drops;

    apply {
        if (ig_md.drop == 0) {
            port_enqueued.count(hdr.bridge.pidx[5:0]);
        } else if (ig_md.drop_reason == DROP_RANDOM_LOSS) {
            port_drops.count(hdr.bridge.pidx[5:0] ++ ig_md.drop_reason);
        }
    }
}

#endif
