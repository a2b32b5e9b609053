/* -*- P4_16 -*- */
/*
 * bwn (v1model): RED with ECN marking (Floyd and Jacobson, "Random Early
 * Detection Gateways for Congestion Avoidance"; RFC 3168 for ECN) at the
 * ports whose routes carry the RED option (define.p4, the options word),
 * deciding on each packet's arrival, in the ingress, before the packet joins
 * the port's queue: a packet RED drops never enters the queue and never takes
 * a departure slot of the port. docs/dataplane.md, "RED with ECN marking",
 * derives each approximation and its error; the controller computes the
 * parameters (controller/aqm.py RedParams: NS-2's automatic setting, from
 * Floyd, Gummadi and Shenker's Adaptive RED).
 *
 * Per packet routed to a RED port (RedEcn, ingress):
 *   sample  the queue the packet joins, in packets. v1model shows the ingress
 *           no queue depth, so it is estimated (port_state.p4): the queue the
 *           port's last departure left behind (deq_qdepth) plus the packets
 *           RED let in since. It counts the packets the full queue then
 *           tail-drops, until the next departure, and misses those let in
 *           between a departure and its egress, until the next one
 *           (docs/dataplane.md);
 *   idle    if the sample is 0, the average first decays for the time the
 *           queue has been empty (from the departure that left it empty to
 *           this packet's ingress), as if m = idle x C packets of size 0 had
 *           arrived: avg *= (1 - w_q)^m, which the controller's red_idle table
 *           gives as a shift, avg >> J, J = round(m w_q / ln 2) (within a
 *           factor 2^0.5 of (1 - w_q)^m);
 *   average avg += w_q (q - avg), w_q = 2^-K: one action per K (red_weight_K),
 *           a constant shift, in fixed point (13 fraction bits);
 *   decide  below min_th nothing; from min_th to 2 max_th the marking
 *           probability p_b of the average (red_probability: the controller's
 *           value per 1/4 packet of avg, linear from 0 at min_th to max_p at
 *           max_th, and "gentle" from max_p to 1 at 2 max_th); at 2 max_th
 *           and above every packet is dropped (a forced drop, ECN or not).
 *           Between marks, RED's count spaces them uniformly (NS-2's wait_):
 *           the probabilities are summed packet by packet, and a packet is
 *           marked when the sum reaches a threshold drawn uniformly in [1, 2)
 *           after the previous mark; for a constant p_b the gap between marks
 *           is then uniform between 1/p_b and 2/p_b packets, as RED's
 *           p_a = p_b / (2 - count p_b) makes it, without a division;
 *   signal  an ECN-capable packet (ECT(0), ECT(1), or CE already) is marked
 *           CE and its header checksum updated (RFC 1624 eq. 3); any other
 *           packet is dropped at the end of the ingress (bwn.p4), not counted
 *           as handed to the port (port_counters.p4). Counted per port:
 *           red_marked, red_dropped.
 * Per packet that leaves a RED port's queue (RedDeparture, egress): the queue
 * it left behind becomes the ingress's sample, the count of packets let in
 * since starts again, and a departure that leaves the queue empty starts an
 * idle period.
 */
#ifndef __BWN_V1MODEL_RED_ECN__
#define __BWN_V1MODEL_RED_ECN__

#define RED_FRAC_BITS 13            /* avg in packets << 13: a 19-bit queue << 13 fits 32 bits */
#define RED_LEVEL_SHIFT 11          /* avg >> 11: the average in 1/4 packets, red_probability's key */
#define RED_PROB_ONE 32w0x1000000   /* probability 1 in red_probability's unit, 2^-24 */
#define RED_PASS 0
#define RED_SIGNAL 1                /* mark an ECN-capable packet, drop any other */
#define RED_FORCED 2                /* drop, ECN-capable or not */
#define RED_TABLE_SIZE 8192
#define RED_IDLE_TABLE_SIZE 1024

control RedEcn(inout headers_t hdr,
               inout local_metadata_t meta,
               inout standard_metadata_t standard_metadata) {

    register<bit<32>, PortId_t>(MAX_PORTS) red_avg;          /* the average queue, packets << RED_FRAC_BITS */
    register<bit<32>, PortId_t>(MAX_PORTS) red_since_mark;   /* p_b summed since the last mark (2^-24) */
    register<bit<32>, PortId_t>(MAX_PORTS) red_next_mark;    /* the sum that marks next, less 1 */
    counter<PortId_t>(MAX_PORTS, CounterType.packets) red_marked;    /* marked CE */
    counter<PortId_t>(MAX_PORTS, CounterType.packets) red_dropped;   /* dropped: not ECN-capable, or forced */

    /* The queue this packet joins: the one the port's last departure left
     * behind, plus the packets RED let in since (saturating: 19 bits). */
    action read_average() {
        red_avg.read(meta.red.avg, standard_metadata.egress_spec);
        red_queue.read(meta.red.queue_pkts, standard_metadata.egress_spec);
        red_arrivals.read(meta.red.arrivals, standard_metadata.egress_spec);
        meta.red.queue_pkts = meta.red.queue_pkts |+| meta.red.arrivals;
        meta.red.sample = (bit<32>)meta.red.queue_pkts << RED_FRAC_BITS;
    }

    /* The time the queue has been empty: from the departure that left it
     * empty to this packet's arrival (0 if the two raced: that departure's
     * egress ran after this packet's ingress began). */
    action read_idle() {
        red_idle_since.read(meta.red.idle_us, standard_metadata.egress_spec);
        if (standard_metadata.ingress_global_timestamp[31:0] >= meta.red.idle_us) {
            meta.red.idle_us = standard_metadata.ingress_global_timestamp[31:0] - meta.red.idle_us;
        } else {
            meta.red.idle_us = 0;
        }
    }

    /* avg *= (1 - w_q)^m for an idle time worth m packets: 2^-J, J from the
     * controller's ranges of idle time (or 0: idle so long that nothing is left). */
#define RED_IDLE_DECAY(J) \
    action red_idle_decay_##J() { \
        meta.red.avg = meta.red.avg >> J; \
    }
    RED_IDLE_DECAY(1)  RED_IDLE_DECAY(2)  RED_IDLE_DECAY(3)  RED_IDLE_DECAY(4)
    RED_IDLE_DECAY(5)  RED_IDLE_DECAY(6)  RED_IDLE_DECAY(7)  RED_IDLE_DECAY(8)
    RED_IDLE_DECAY(9)  RED_IDLE_DECAY(10) RED_IDLE_DECAY(11) RED_IDLE_DECAY(12)
    RED_IDLE_DECAY(13) RED_IDLE_DECAY(14) RED_IDLE_DECAY(15) RED_IDLE_DECAY(16)
#undef RED_IDLE_DECAY

    action red_idle_clear() {
        meta.red.avg = 0;
    }

    table red_idle {
        key = {
            standard_metadata.egress_spec : exact @name("egress_port");
            meta.red.idle_us              : range @name("idle_us");
        }
        actions = {
            red_idle_decay_1;  red_idle_decay_2;  red_idle_decay_3;  red_idle_decay_4;
            red_idle_decay_5;  red_idle_decay_6;  red_idle_decay_7;  red_idle_decay_8;
            red_idle_decay_9;  red_idle_decay_10; red_idle_decay_11; red_idle_decay_12;
            red_idle_decay_13; red_idle_decay_14; red_idle_decay_15; red_idle_decay_16;
            red_idle_clear; NoAction;
        }
        default_action = NoAction();
        size = RED_IDLE_TABLE_SIZE;
    }

    /* The port's weight w_q = 2^-K (the action of its K), min_th and 2 max_th
     * in 1/4 packets: avg += w_q (q - avg), with a constant shift. */
#define RED_WEIGHT(K) \
    action red_weight_##K(bit<32> min_level, bit<32> top_level) { \
        if (meta.red.sample >= meta.red.avg) { \
            meta.red.avg = meta.red.avg + ((meta.red.sample - meta.red.avg) >> K); \
        } else { \
            meta.red.avg = meta.red.avg - ((meta.red.avg - meta.red.sample) >> K); \
        } \
        meta.red.level = meta.red.avg >> RED_LEVEL_SHIFT; \
        meta.red.min_level = min_level; \
        meta.red.top_level = top_level; \
    }
    RED_WEIGHT(0)  RED_WEIGHT(1)  RED_WEIGHT(2)  RED_WEIGHT(3)  RED_WEIGHT(4)
    RED_WEIGHT(5)  RED_WEIGHT(6)  RED_WEIGHT(7)  RED_WEIGHT(8)  RED_WEIGHT(9)
    RED_WEIGHT(10) RED_WEIGHT(11) RED_WEIGHT(12) RED_WEIGHT(13) RED_WEIGHT(14)
    RED_WEIGHT(15) RED_WEIGHT(16)
#undef RED_WEIGHT

    table red_config {
        key = { standard_metadata.egress_spec : exact @name("egress_port"); }
        actions = {
            red_weight_0;  red_weight_1;  red_weight_2;  red_weight_3;  red_weight_4;
            red_weight_5;  red_weight_6;  red_weight_7;  red_weight_8;  red_weight_9;
            red_weight_10; red_weight_11; red_weight_12; red_weight_13; red_weight_14;
            red_weight_15; red_weight_16; NoAction;
        }
        default_action = NoAction();
        size = MAX_PORTS;
    }

    action store_average() {
        red_avg.write(standard_metadata.egress_spec, meta.red.avg);
    }

    /* p_b at the average's level (2^-24 units): the controller's entries from
     * min_th to 2 max_th; none elsewhere. */
    action red_mark_probability(bit<32> prob) {
        meta.red.prob = prob;
    }

    table red_probability {
        key = {
            standard_metadata.egress_spec : exact @name("egress_port");
            meta.red.level                : exact @name("level");
        }
        actions = { red_mark_probability; }
        default_action = red_mark_probability(0);
        size = RED_TABLE_SIZE;
    }

    /* Below min_th: no count (RED's count = -1). */
    action reset_count() {
        red_since_mark.write(standard_metadata.egress_spec, 0);
    }

    action add_to_count() {
        red_since_mark.read(meta.red.since_mark, standard_metadata.egress_spec);
        red_next_mark.read(meta.red.next_mark, standard_metadata.egress_spec);
        meta.red.since_mark = meta.red.since_mark + meta.red.prob;
    }

    /* This packet is marked (or dropped): the count starts again, and the
     * next mark comes when the sum reaches 1 + a uniform draw in [0, 1). */
    action signal() {
        meta.red.decision = RED_SIGNAL;
        meta.red.since_mark = 0;
        random(meta.red.next_mark, 32w0, RED_PROB_ONE - 1);
        red_next_mark.write(standard_metadata.egress_spec, meta.red.next_mark);
    }

    action store_count() {
        red_since_mark.write(standard_metadata.egress_spec, meta.red.since_mark);
    }

    action forced_drop() {
        meta.red.decision = RED_FORCED;
        red_since_mark.write(standard_metadata.egress_spec, 0);
    }

    /* CE, and the header checksum by RFC 1624 eq. 3 over the 16-bit word that
     * holds the ECN field: HC' = ~(~HC + ~m + m'), folded twice. */
    action mark_congestion() {
        meta.red.tos_word = hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn;
        hdr.ipv4.ecn = ECN_CE;
        meta.red.csum_sum = (bit<32>)(~hdr.ipv4.hdr_checksum) + (bit<32>)(~meta.red.tos_word)
                            + (bit<32>)(hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn);
        meta.red.csum_sum = (meta.red.csum_sum & 0xFFFF) + (meta.red.csum_sum >> 16);
        meta.red.csum_sum = (meta.red.csum_sum & 0xFFFF) + (meta.red.csum_sum >> 16);
        hdr.ipv4.hdr_checksum = ~meta.red.csum_sum[15:0];
        red_marked.count(standard_metadata.egress_spec);
    }

    /* Dropped before the queue (at the end of the ingress, bwn.p4): it never
     * takes a departure slot. */
    action red_drop() {
        meta.red.dropped = true;
        red_dropped.count(standard_metadata.egress_spec);
    }

    /* A packet let into the queue counts in the next packet's sample. */
    action count_arrival() {
        red_arrivals.read(meta.red.arrivals, standard_metadata.egress_spec);
        red_arrivals.write(standard_metadata.egress_spec, meta.red.arrivals |+| 1);
    }

    apply {
        read_average();
        if (meta.red.queue_pkts == 0) {
            read_idle();
            red_idle.apply();
        }
        if (red_config.apply().hit) {
            store_average();
            if (meta.red.level < meta.red.min_level) {
                reset_count();
            } else if (meta.red.level >= meta.red.top_level) {
                forced_drop();
            } else {
                red_probability.apply();
                add_to_count();
                if (meta.red.since_mark >= meta.red.next_mark + RED_PROB_ONE) {
                    signal();
                }
                store_count();
            }
            if (meta.red.decision == RED_SIGNAL && hdr.ipv4.ecn != ECN_NOT_ECT) {
                mark_congestion();
            } else if (meta.red.decision != RED_PASS) {
                red_drop();
            }
        }
        if (!meta.red.dropped) {
            count_arrival();
        }
    }
}

/* The egress's part: each departure from a RED port's queue leaves the queue
 * behind it as the ingress's next sample and starts the count of packets let
 * in again (one action: BMv2 runs it under the registers' lock, so no
 * arrival's count is lost between the two); one that leaves the queue empty
 * starts an idle period. */
control RedDeparture(in standard_metadata_t standard_metadata) {

    action note_departure() {
        red_queue.write(standard_metadata.egress_port, standard_metadata.deq_qdepth);
        red_arrivals.write(standard_metadata.egress_port, 0);
    }

    action note_idle() {
        red_idle_since.write(standard_metadata.egress_port, standard_metadata.egress_global_timestamp[31:0]);
    }

    apply {
        note_departure();
        if (standard_metadata.deq_qdepth == 0) {
            note_idle();
        }
    }
}

#endif
