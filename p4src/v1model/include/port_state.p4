/* -*- P4_16 -*- */
/*
 * bwn (v1model): the per-port state that the ingress and the egress share.
 * v1model lets both reach a register declared outside them; each register is
 * indexed by the egress port (v1model's typed index, PortId_t), holds one
 * quantity, and says which control writes it and which reads it.
 * (State that one control keeps for itself is declared in that control.)
 */
#ifndef __BWN_V1MODEL_PORT_STATE__
#define __BWN_V1MODEL_PORT_STATE__

/* The port's stamp: what the egress stamps BWN DATA packets with. Written by
 * the ingress when the port's measurement window closes (Window: narrow and
 * tight link) and when its flow count changes (Flows: the EBN code). */
register<bit<8>,  PortId_t>(MAX_PORTS) stamp_ebn_code;     /* EBN code of the per-flow share */
register<bit<32>, PortId_t>(MAX_PORTS) stamp_narrow_kbps;  /* capacity IC, kb/s; 0: not configured */
register<bit<32>, PortId_t>(MAX_PORTS) stamp_tight_kbps;   /* available bandwidth AB, kb/s, int32 */

/* log7 of the port's capacity (Window writes it with the stamp; Flows reads
 * it to recompute the share when a flow is new inside a window). */
register<bit<16>, PortId_t>(MAX_PORTS) capacity_log7;

/* The queue the port's last BWN DATA packet left behind, in packets (BMv2's
 * queue depth): written by the egress (Stamp), read by the ingress for BI
 * (Window) and the Assured Forwarding rule. DATA packets sample the FIFO
 * that every packet of the port shares. */
register<bit<19>, PortId_t>(MAX_PORTS) queue_depth;

/* RED (control/red_ecn.p4) at a port whose routes carry the RED option. The
 * egress (RedDeparture), at every departure from the port's queue, writes the
 * queue the departure left behind (red_queue, packets), clears red_arrivals,
 * and, when it left the queue empty, the time (red_idle_since, us). The
 * ingress (RedEcn) counts in red_arrivals the packets it lets into the queue,
 * and takes red_queue + red_arrivals as the queue a packet joins. */
register<bit<19>, PortId_t>(MAX_PORTS) red_queue;
register<bit<19>, PortId_t>(MAX_PORTS) red_arrivals;
register<bit<32>, PortId_t>(MAX_PORTS) red_idle_since;

#endif
