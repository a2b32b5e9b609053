/* -*- P4_16 -*- */
/*
 * bwn (v1model): RCP's router at the egress port (Dukkipati, McKeown, "Why
 * Flow-Completion Time is the Right Metric for Congestion Control";
 * Dukkipati et al., "Processor Sharing Flows in the Internet"; docs/dataplane.md,
 * "RCP"). controller/xr_math.py's rcp_packet() is the reference model, bit for bit.
 *
 * For a BWN DATA packet with the XR header of an RCP sender (cwnd_bytes = 0),
 * at a port where the controller turned RCP on (rcp_port) and set the capacity:
 *
 *   - its rtt_us (when not 0) moves the port's moving average RTT d0 by
 *     2^-RCP_RTT_GAIN_SHIFT of the difference;
 *   - the port's first such packet sets the rate R to the port's capacity C
 *     and opens the first interval; the first packet after an interval's end
 *     closes it: over the T us since it opened, the y bytes the port received
 *     in them (Window's count, every packet routed to the port, one slot each
 *     on a port BMv2 serves in packets) and the queue q
 *     the closing packet met (bytes by rcp_port's unit, BMv2 counts packets),
 *       R(t) = R(t - T) [1 + (T / d0) (alpha (C - y / T) - beta q / d0) / C]
 *            = R + R alpha T / d0 - R alpha y / (d0 C) - R beta T q / (d0^2 C),
 *     kept within [rate_min_kbps, C]; the next interval lasts d0 (within the
 *     controller's bounds);
 *   - rate_kbps = min(rate_kbps, R): the path minimum.
 *
 * Products and quotients are sums of log7 (control/logexp.p4).
 */
#ifndef __BWN_V1MODEL_RCP__
#define __BWN_V1MODEL_RCP__

control Rcp(inout headers_t hdr,
            inout local_metadata_t meta,
            in standard_metadata_t standard_metadata) {

    register<bit<48>, PortId_t>(MAX_PORTS) rcp_interval_end;    /* arrival time, us; 0: none yet */
    register<bit<48>, PortId_t>(MAX_PORTS) rcp_interval_start;
    register<bit<32>, PortId_t>(MAX_PORTS) rcp_rx_mark;
    register<bit<32>, PortId_t>(MAX_PORTS) rcp_rate_kbps;       /* R(t) */
    register<bit<32>, PortId_t>(MAX_PORTS) rcp_d0_us;           /* moving average RTT; 0: none */
    /* The last close's figures, for the controller and the tests (Thrift). */
    register<bit<32>, PortId_t>(MAX_PORTS) rcp_closed_us;       /* T */
    register<bit<32>, PortId_t>(MAX_PORTS) rcp_closed_bytes;    /* y */
    register<bit<32>, PortId_t>(MAX_PORTS) rcp_closed_queue;    /* q, packets */
    register<bit<32>, PortId_t>(MAX_PORTS) rcp_intervals;       /* closes so far */

    @name("rcp_log_rate")  Log7() log_rate;
    @name("rcp_log_t")     Log7() log_t;
    @name("rcp_log_d0")    Log7() log_d0;
    @name("rcp_exp_up")    Exp7() exp_up;
    @name("rcp_log_y")     Log7() log_y;
    @name("rcp_exp_down")  Exp7() exp_down;
    @name("rcp_log_queue") Log7() log_queue;
    @name("rcp_exp_queue") Exp7() exp_queue;

    /* The ports that run RCP, each with its parameters (controller/entries.py
     * rcp_port, from controller/xr_math.py RcpConfig): log7 of alpha, beta and of
     * the bytes a queued packet counts for, the first interval, the interval's
     * bounds, the lowest rate. A port without an entry leaves XR packets untouched. */
    action set_rcp(bit<32> log_alpha, bit<32> log_beta, bit<32> log_queue_unit, bit<32> d_init_us,
                   bit<32> d_min_us, bit<32> d_max_us, bit<32> rate_min_kbps) {
        hdr.rcp_work.log_alpha = (int<32>)log_alpha;
        hdr.rcp_work.log_beta = (int<32>)log_beta;
        hdr.rcp_work.log_queue_unit = (int<32>)log_queue_unit;
        hdr.rcp_work.d_init_us = d_init_us;
        hdr.rcp_work.d_min_us = d_min_us;
        hdr.rcp_work.d_max_us = d_max_us;
        hdr.rcp_work.rate_min_kbps = rate_min_kbps;
    }

    table rcp_port {
        key = { standard_metadata.egress_port : exact @name("port"); }
        actions = { set_rcp; @defaultonly NoAction; }
        default_action = NoAction();
        size = MAX_PORTS;
    }

    /* What every packet of an RCP sender needs of the port's state. */
    action rcp_read_port() {
        stamp_narrow_kbps.read(hdr.rcp_work.cap_kbps, standard_metadata.egress_port);
        rcp_interval_end.read(hdr.rcp_work.interval_end, standard_metadata.egress_port);
        rcp_rate_kbps.read(hdr.rcp_work.rate_kbps, standard_metadata.egress_port);
        rcp_d0_us.read(hdr.rcp_work.d0_us, standard_metadata.egress_port);
    }

    /* ... and what opening or closing an interval needs besides. */
    action rcp_read_interval() {
        capacity_log7.read(hdr.rcp_work.cap_log7, standard_metadata.egress_port);
        rcp_interval_start.read(hdr.rcp_work.interval_start, standard_metadata.egress_port);
        rcp_rx_mark.read(hdr.rcp_work.rx_mark, standard_metadata.egress_port);
        hdr.rcp_work.rx_before = meta.window.rx_bytes - meta.window.charge_bytes;
    }

    /* d0 += (rtt - d0) >> RCP_RTT_GAIN_SHIFT (the first sample: d0 = rtt). */
    action rcp_average_rtt() {
        if (hdr.rcp_work.d0_us == 0) {
            hdr.rcp_work.d0_us = hdr.xr.rtt_us;
        } else {
            hdr.rcp_work.d0_us = hdr.rcp_work.d0_us
                + (bit<32>)(((int<32>)hdr.xr.rtt_us - (int<32>)hdr.rcp_work.d0_us) >> RCP_RTT_GAIN_SHIFT);
        }
    }

    /* The next interval: d0 within the bounds (d_init before any RTT). */
    action rcp_next_interval() {
        if (hdr.rcp_work.d0_us == 0) {
            hdr.rcp_work.next_us = hdr.rcp_work.d_init_us;
        } else if (hdr.rcp_work.d0_us < hdr.rcp_work.d_min_us) {
            hdr.rcp_work.next_us = hdr.rcp_work.d_min_us;
        } else if (hdr.rcp_work.d0_us > hdr.rcp_work.d_max_us) {
            hdr.rcp_work.next_us = hdr.rcp_work.d_max_us;
        } else {
            hdr.rcp_work.next_us = hdr.rcp_work.d0_us;
        }
    }

    action rcp_first_rate() {
        hdr.rcp_work.rate_kbps = hdr.rcp_work.cap_kbps;
    }

    /* The interval that closes: T (at least 1 us, at most 2^32 - 1), y, q, and d0
     * as the formula uses it (the interval's length when there is no RTT yet). */
    action rcp_measure_interval() {
        hdr.rcp_work.t_us = (bit<64>)(standard_metadata.ingress_global_timestamp - hdr.rcp_work.interval_start);
        if (hdr.rcp_work.t_us == 0) {
            hdr.rcp_work.t_us = 1;
        } else if (hdr.rcp_work.t_us > 0xFFFFFFFF) {
            hdr.rcp_work.t_us = 0xFFFFFFFF;
        }
        hdr.rcp_work.y_bytes = (bit<64>)(hdr.rcp_work.rx_before - hdr.rcp_work.rx_mark);
        hdr.rcp_work.queue_pkts = (bit<64>)standard_metadata.enq_qdepth;
        hdr.rcp_work.d0_64 = (bit<64>)hdr.rcp_work.next_us;
        hdr.rcp_work.rate64 = (bit<64>)hdr.rcp_work.rate_kbps;
    }

    action rcp_arg_up() {
        hdr.rcp_work.log_arg = hdr.rcp_work.log_rate + hdr.rcp_work.log_alpha + hdr.rcp_work.log_t - hdr.rcp_work.log_d0;
    }

    action rcp_arg_down() {
        hdr.rcp_work.log_arg = hdr.rcp_work.log_rate + hdr.rcp_work.log_alpha + hdr.rcp_work.log_x + LOG7_8000
                           - hdr.rcp_work.log_d0 - (int<32>)(bit<32>)hdr.rcp_work.cap_log7;
    }

    action rcp_arg_queue() {
        hdr.rcp_work.log_arg = hdr.rcp_work.log_rate + hdr.rcp_work.log_beta + hdr.rcp_work.log_t + hdr.rcp_work.log_x
                           + hdr.rcp_work.log_queue_unit + LOG7_8000 - hdr.rcp_work.log_d0 - hdr.rcp_work.log_d0
                           - (int<32>)(bit<32>)hdr.rcp_work.cap_log7;
    }

    /* R + up - down - queue, within [rate_min_kbps, C]; the close's figures. */
    action rcp_update_rate() {
        hdr.rcp_work.rate = (int<64>)hdr.rcp_work.rate64 + (int<64>)hdr.rcp_work.up - (int<64>)hdr.rcp_work.down
                        - (int<64>)hdr.rcp_work.queue;
        if (hdr.rcp_work.rate < (int<64>)(bit<64>)hdr.rcp_work.rate_min_kbps) {
            hdr.rcp_work.rate = (int<64>)(bit<64>)hdr.rcp_work.rate_min_kbps;
        }
        if (hdr.rcp_work.rate > (int<64>)(bit<64>)hdr.rcp_work.cap_kbps) {
            hdr.rcp_work.rate = (int<64>)(bit<64>)hdr.rcp_work.cap_kbps;
        }
        hdr.rcp_work.rate_kbps = (bit<32>)(bit<64>)hdr.rcp_work.rate;
        rcp_intervals.read(hdr.rcp_work.intervals, standard_metadata.egress_port);
        rcp_intervals.write(standard_metadata.egress_port, hdr.rcp_work.intervals + 1);
        rcp_closed_us.write(standard_metadata.egress_port, (bit<32>)hdr.rcp_work.t_us);
        rcp_closed_bytes.write(standard_metadata.egress_port, (bit<32>)hdr.rcp_work.y_bytes);
        rcp_closed_queue.write(standard_metadata.egress_port, (bit<32>)hdr.rcp_work.queue_pkts);
    }

    /* The next interval starts with this packet: the interval's registers. */
    action rcp_open_interval() {
        rcp_interval_end.write(standard_metadata.egress_port,
                               standard_metadata.ingress_global_timestamp + (bit<48>)hdr.rcp_work.next_us);
        rcp_interval_start.write(standard_metadata.egress_port, standard_metadata.ingress_global_timestamp);
        rcp_rx_mark.write(standard_metadata.egress_port, hdr.rcp_work.rx_before);
        rcp_rate_kbps.write(standard_metadata.egress_port, hdr.rcp_work.rate_kbps);
    }

    /* rate_kbps = min(rate_kbps, R); the RTT average. */
    action rcp_stamp_rate() {
        if (hdr.rcp_work.rate_kbps < hdr.xr.rate_kbps) {
            hdr.xr.rate_kbps = hdr.rcp_work.rate_kbps;
        }
        rcp_d0_us.write(standard_metadata.egress_port, hdr.rcp_work.d0_us);
    }

    apply {
        if (hdr.xr.isValid() && hdr.xr.cwnd_bytes == 0) {
            hdr.rcp_work.setValid();
            hdr.logexp.setValid();
            if (rcp_port.apply().hit) {
                rcp_read_port();
            }
            if (hdr.rcp_work.cap_kbps != 0) {
                if (hdr.xr.rtt_us != 0) {
                    rcp_average_rtt();
                }
                if (hdr.rcp_work.interval_end == 0
                        || standard_metadata.ingress_global_timestamp >= hdr.rcp_work.interval_end) {
                    rcp_read_interval();
                    rcp_next_interval();
                    if (hdr.rcp_work.interval_end == 0) {
                        rcp_first_rate();
                    } else {
                        rcp_measure_interval();
                        log_rate.apply(hdr.rcp_work.rate64, hdr.rcp_work.log_rate, hdr.logexp);
                        log_t.apply(hdr.rcp_work.t_us, hdr.rcp_work.log_t, hdr.logexp);
                        log_d0.apply(hdr.rcp_work.d0_64, hdr.rcp_work.log_d0, hdr.logexp);
                        rcp_arg_up();
                        exp_up.apply(hdr.rcp_work.log_arg, hdr.rcp_work.up, hdr.logexp);
                        log_y.apply(hdr.rcp_work.y_bytes, hdr.rcp_work.log_x, hdr.logexp);
                        rcp_arg_down();
                        exp_down.apply(hdr.rcp_work.log_arg, hdr.rcp_work.down, hdr.logexp);
                        log_queue.apply(hdr.rcp_work.queue_pkts, hdr.rcp_work.log_x, hdr.logexp);
                        rcp_arg_queue();
                        exp_queue.apply(hdr.rcp_work.log_arg, hdr.rcp_work.queue, hdr.logexp);
                        rcp_update_rate();
                    }
                    rcp_open_interval();
                }
                rcp_stamp_rate();
            }
        }
    }
}

#endif
