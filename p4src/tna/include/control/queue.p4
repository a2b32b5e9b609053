/* -*- P4_16 -*- */
/*
 * bwn (TNA): what the egress sees of the port's queue for every packet.
 * queue_emptied ([T]: read over P4Runtime) counts the packets that left their
 * port's queue empty behind them, as on v1model: the fidelity monitor's
 * evidence that a port was backlogged (bwn/analysis/fidelity.py).
 * port_dequeued ([T]) counts every packet that left the port's queue
 * (port_counters.p4: the difference from what the port was given).
 */
#ifndef __BWN_TNA_QUEUE__
#define __BWN_TNA_QUEUE__

control QueueMonitor(in egress_intrinsic_metadata_t eg_intr_md, in port_idx_t pidx) {

    Counter<bit<64>, port_idx_t>(MAX_PORTS, CounterType_t.PACKETS) queue_emptied;
    Counter<bit<64>, port_idx_t>(MAX_PORTS, CounterType_t.PACKETS) port_dequeued;

    apply {
        port_dequeued.count(pidx);
        if (eg_intr_md.deq_qdepth == 0) {
            queue_emptied.count(pidx);
        }
    }
}

#endif
