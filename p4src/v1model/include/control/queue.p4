/* -*- P4_16 -*- */
/*
 * bwn (v1model): what the egress sees of the port's queue, for every packet.
 *
 * queue_emptied counts, by egress port, the packets that left their port's
 * queue empty behind them. Between two reads with no increment the port
 * never ran dry: every departure had a successor waiting, so a rate-limited
 * port was backlogged and must have sent at its rate. The fidelity monitor
 * (bwn/analysis/fidelity.py, departure_rate) reads it every 0.1 s over Thrift.
 * port_dequeued counts, by egress port, every packet that left its queue:
 * with the ingress's port_enqueued (port_counters.p4), the packets the
 * queue dropped.
 * (Every route's port is below MAX_PORTS, which the controller checks, and
 * only routed packets reach the egress.)
 */
#ifndef __BWN_V1MODEL_QUEUE__
#define __BWN_V1MODEL_QUEUE__

control QueueMonitor(in standard_metadata_t standard_metadata) {

    counter<PortId_t>(MAX_PORTS, CounterType.packets) queue_emptied;
    counter<PortId_t>(MAX_PORTS, CounterType.packets) port_dequeued;

    apply {
        port_dequeued.count(standard_metadata.egress_port);
        if (standard_metadata.deq_qdepth == 0) {
            queue_emptied.count(standard_metadata.egress_port);
        }
    }
}

#endif
