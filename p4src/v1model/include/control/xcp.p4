/* -*- P4_16 -*- */
/*
 * bwn (v1model): XCP's router at the egress port (Katabi, Handley, Rohrs,
 * "Congestion Control for High Bandwidth-Delay Product Networks", sec. 3.5;
 * docs/dataplane.md, "XCP"). controller/xr_math.py's xcp_packet() is the
 * reference model, bit for bit.
 *
 * For a BWN DATA packet with the XR header of an XCP sender (cwnd_bytes != 0),
 * at a port where the controller turned XCP on (xcp_port) and set the capacity:
 *
 *   - the port's control interval d is the flows' average RTT: each XCP
 *     sender's packet adds a = rtt s / cwnd and b = rtt a to the port's sums,
 *     and at the interval's close d = sum(b) / sum(a) (every flow weighs the
 *     same: a flow sends cwnd / (rtt s) packets per second);
 *   - the first packet after the interval's end closes it and computes, over
 *     the T us since it opened and the y bytes the port received in them
 *     (Window's count, so every packet routed to the port, XCP or not, in
 *     what it costs the link: one slot each on a port BMv2 serves in packets):
 *       eq. (1) phi = alpha d (C - y / T) - beta Q, Q the smallest queue an XCP
 *               packet met in the interval (the persistent queue; in bytes by
 *               xcp_port's unit, BMv2 counts packets);
 *       eq. (2) h = max(0, gamma y d / T - |phi|), the shuffled traffic;
 *       xi_p = (h + max(phi, 0)) / (d sum(a)),  xi_n = (h + max(-phi, 0)) / (d sum(s));
 *     an interval without XCP packets leaves xi_p = xi_n = 0 and d as it was;
 *   - each such packet with rtt_us != 0 gets the feedback
 *       p - n = xi_p rtt^2 s / cwnd - xi_n rtt s    (bytes, int32)
 *     from the interval in force, and feedback_bytes = min(feedback_bytes, p - n).
 *
 * Products and quotients are sums of log7 (control/logexp.p4); the arrival
 * timestamps time the interval. Stamp, which runs after, zeroes the UDP
 * checksum of every packet at a configured port.
 */
#ifndef __BWN_V1MODEL_XCP__
#define __BWN_V1MODEL_XCP__

control Xcp(inout headers_t hdr,
            inout local_metadata_t meta,
            in standard_metadata_t standard_metadata) {

    /* The port's interval: when it ends and opened, the received-byte count then. */
    register<bit<48>, PortId_t>(MAX_PORTS) xcp_interval_end;    /* arrival time, us; 0: none yet */
    register<bit<48>, PortId_t>(MAX_PORTS) xcp_interval_start;
    register<bit<32>, PortId_t>(MAX_PORTS) xcp_rx_mark;
    /* The interval's sums over XCP packets, and the smallest queue they met. */
    register<bit<64>, PortId_t>(MAX_PORTS) xcp_sum_a;           /* rtt s / cwnd, 1/1024 us */
    register<bit<64>, PortId_t>(MAX_PORTS) xcp_sum_b;           /* rtt^2 s / cwnd, us^2 */
    register<bit<64>, PortId_t>(MAX_PORTS) xcp_sum_s;           /* s, bytes */
    register<bit<64>, PortId_t>(MAX_PORTS) xcp_queue_min;       /* packets */
    /* What the last close set: the interval d, and xi_p, xi_n in force (log7). */
    register<bit<32>, PortId_t>(MAX_PORTS) xcp_d_us;
    register<int<32>, PortId_t>(MAX_PORTS) xcp_log_d;
    register<int<32>, PortId_t>(MAX_PORTS) xcp_log_xi_p;
    register<int<32>, PortId_t>(MAX_PORTS) xcp_log_xi_n;
    /* The last close's figures, for the controller and the tests (Thrift). */
    register<bit<32>, PortId_t>(MAX_PORTS) xcp_phi_bytes;       /* int32 */
    register<bit<32>, PortId_t>(MAX_PORTS) xcp_shuffle_bytes;   /* h */
    register<bit<32>, PortId_t>(MAX_PORTS) xcp_closed_us;       /* T */
    register<bit<32>, PortId_t>(MAX_PORTS) xcp_closed_bytes;    /* y */
    register<bit<32>, PortId_t>(MAX_PORTS) xcp_closed_queue;    /* Q, packets */
    register<bit<32>, PortId_t>(MAX_PORTS) xcp_intervals;       /* closes so far */

    @name("xcp_log_rtt")   Log7() log_rtt;
    @name("xcp_log_cwnd")  Log7() log_cwnd;
    @name("xcp_log_size")  Log7() log_size;
    @name("xcp_exp_a")     Exp7() exp_a;
    @name("xcp_exp_b")     Exp7() exp_b;
    @name("xcp_exp_p")     Exp7() exp_p;
    @name("xcp_exp_n")     Exp7() exp_n;
    @name("xcp_log_sum_a") Log7() log_sum_a;
    @name("xcp_log_sum_b") Log7() log_sum_b;
    @name("xcp_exp_d")     Exp7() exp_d;
    @name("xcp_log_y")     Log7() log_y;
    @name("xcp_log_t")     Log7() log_t;
    @name("xcp_exp_t1")    Exp7() exp_t1;
    @name("xcp_exp_t2")    Exp7() exp_t2;
    @name("xcp_log_queue") Log7() log_queue;
    @name("xcp_exp_t3")    Exp7() exp_t3;
    @name("xcp_exp_t4")    Exp7() exp_t4;
    @name("xcp_log_pos")   Log7() log_pos;
    @name("xcp_log_neg")   Log7() log_neg;
    @name("xcp_log_sum_s") Log7() log_sum_s;

    /* The ports that run XCP, each with its parameters (controller/entries.py
     * xcp_port, from controller/xr_math.py XcpConfig): log7 of alpha, beta,
     * gamma and of the bytes a queued packet counts for, the first interval, the
     * interval's bounds. A port without an entry leaves XR packets untouched. */
    action set_xcp(bit<32> log_alpha, bit<32> log_beta, bit<32> log_gamma, bit<32> log_queue_unit,
                   bit<32> d_init_us, bit<32> log_d_init, bit<32> log_d_min, bit<32> log_d_max) {
        hdr.xcp_work.log_alpha = (int<32>)log_alpha;
        hdr.xcp_work.log_beta = (int<32>)log_beta;
        hdr.xcp_work.log_gamma = (int<32>)log_gamma;
        hdr.xcp_work.log_queue_unit = (int<32>)log_queue_unit;
        hdr.xcp_work.d_init_us = d_init_us;
        hdr.xcp_work.log_d_init = (int<32>)log_d_init;
        hdr.xcp_work.log_d_min = (int<32>)log_d_min;
        hdr.xcp_work.log_d_max = (int<32>)log_d_max;
    }

    table xcp_port {
        key = { standard_metadata.egress_port : exact @name("port"); }
        actions = { set_xcp; @defaultonly NoAction; }
        default_action = NoAction();
        size = MAX_PORTS;
    }

    /* What every packet of an XCP sender needs of the port's state. */
    action xcp_read_port() {
        stamp_narrow_kbps.read(hdr.xcp_work.cap_kbps, standard_metadata.egress_port);
        xcp_interval_end.read(hdr.xcp_work.interval_end, standard_metadata.egress_port);
        xcp_sum_a.read(hdr.xcp_work.sum_a, standard_metadata.egress_port);
        xcp_sum_b.read(hdr.xcp_work.sum_b, standard_metadata.egress_port);
        xcp_sum_s.read(hdr.xcp_work.sum_s, standard_metadata.egress_port);
        xcp_queue_min.read(hdr.xcp_work.queue_min, standard_metadata.egress_port);
        xcp_log_xi_p.read(hdr.xcp_work.log_xi_p, standard_metadata.egress_port);
        xcp_log_xi_n.read(hdr.xcp_work.log_xi_n, standard_metadata.egress_port);
        hdr.xcp_work.queue_pkts = (bit<64>)standard_metadata.enq_qdepth;
    }

    /* ... and what opening or closing an interval needs besides. */
    action xcp_read_interval() {
        capacity_log7.read(hdr.xcp_work.cap_log7, standard_metadata.egress_port);
        xcp_interval_start.read(hdr.xcp_work.interval_start, standard_metadata.egress_port);
        xcp_rx_mark.read(hdr.xcp_work.rx_mark, standard_metadata.egress_port);
        xcp_d_us.read(hdr.xcp_work.d_us, standard_metadata.egress_port);
        xcp_log_d.read(hdr.xcp_work.log_d, standard_metadata.egress_port);
        xcp_intervals.read(hdr.xcp_work.intervals, standard_metadata.egress_port);
        hdr.xcp_work.rx_before = meta.window.rx_bytes - meta.window.charge_bytes;
    }

    /* The port's first packet of an XCP sender opens its first interval. */
    action xcp_open_first_interval() {
        hdr.xcp_work.d_us = hdr.xcp_work.d_init_us;
        hdr.xcp_work.log_d = hdr.xcp_work.log_d_init;
        hdr.xcp_work.log_xi_p = LOG7_ZERO;
        hdr.xcp_work.log_xi_n = LOG7_ZERO;
    }

    /* The interval that closes: T (at least 1 us, at most 2^32 - 1) and y. */
    action xcp_measure_interval() {
        hdr.xcp_work.t_us = (bit<64>)(standard_metadata.ingress_global_timestamp - hdr.xcp_work.interval_start);
        if (hdr.xcp_work.t_us == 0) {
            hdr.xcp_work.t_us = 1;
        } else if (hdr.xcp_work.t_us > 0xFFFFFFFF) {
            hdr.xcp_work.t_us = 0xFFFFFFFF;
        }
        hdr.xcp_work.y_bytes = (bit<64>)(hdr.xcp_work.rx_before - hdr.xcp_work.rx_mark);
    }

    /* d = sum(b) / sum(a), within the controller's bounds. */
    action xcp_control_interval() {
        hdr.xcp_work.log_d = hdr.xcp_work.log_x - hdr.xcp_work.log_sum_a + A_SCALE_LOG7;
        if (hdr.xcp_work.log_d < hdr.xcp_work.log_d_min) {
            hdr.xcp_work.log_d = hdr.xcp_work.log_d_min;
        }
        if (hdr.xcp_work.log_d > hdr.xcp_work.log_d_max) {
            hdr.xcp_work.log_d = hdr.xcp_work.log_d_max;
        }
    }

    action xcp_set_d() {
        hdr.xcp_work.d_us = (bit<32>)hdr.xcp_work.d64;
    }

    /* log7(y d / T), and the argument of alpha d C (C in bytes per us). */
    action xcp_spare_terms() {
        hdr.xcp_work.log_ydt = hdr.xcp_work.log_x + hdr.xcp_work.log_d - hdr.xcp_work.log_t;
        hdr.xcp_work.log_arg = hdr.xcp_work.log_alpha + hdr.xcp_work.log_d + (int<32>)(bit<32>)hdr.xcp_work.cap_log7
                           - LOG7_8000;
    }

    action xcp_arg_alpha_ydt() {
        hdr.xcp_work.log_arg = hdr.xcp_work.log_alpha + hdr.xcp_work.log_ydt;
    }

    action xcp_arg_beta_queue() {
        hdr.xcp_work.log_arg = hdr.xcp_work.log_beta + hdr.xcp_work.log_x + hdr.xcp_work.log_queue_unit;
    }

    action xcp_arg_gamma_ydt() {
        hdr.xcp_work.log_arg = hdr.xcp_work.log_gamma + hdr.xcp_work.log_ydt;
    }

    /* eq. (1) and eq. (2): phi, h, and what xi_p and xi_n share out. */
    action xcp_aggregate_feedback() {
        hdr.xcp_work.phi = (int<64>)hdr.xcp_work.t1 - (int<64>)hdr.xcp_work.t2 - (int<64>)hdr.xcp_work.t3;
        if (hdr.xcp_work.phi < 0) {
            hdr.xcp_work.abs_phi = (bit<64>)(-hdr.xcp_work.phi);
            hdr.xcp_work.pos = 0;
        } else {
            hdr.xcp_work.abs_phi = (bit<64>)hdr.xcp_work.phi;
            hdr.xcp_work.pos = hdr.xcp_work.abs_phi;
        }
        hdr.xcp_work.neg = hdr.xcp_work.abs_phi - hdr.xcp_work.pos;
        hdr.xcp_work.h = 0;
        if (hdr.xcp_work.t4 > hdr.xcp_work.abs_phi) {
            hdr.xcp_work.h = hdr.xcp_work.t4 - hdr.xcp_work.abs_phi;
        }
        hdr.xcp_work.pos = hdr.xcp_work.pos |+| hdr.xcp_work.h;
        hdr.xcp_work.neg = hdr.xcp_work.neg |+| hdr.xcp_work.h;
    }

    action xcp_set_xi_p() {
        hdr.xcp_work.log_xi_p = hdr.xcp_work.log_x - hdr.xcp_work.log_d - hdr.xcp_work.log_sum_a + A_SCALE_LOG7;
    }

    action xcp_set_xi_n() {
        hdr.xcp_work.log_xi_n = hdr.xcp_work.log_x - hdr.xcp_work.log_d - hdr.xcp_work.log_arg;
    }

    /* No packet of an XCP sender in the interval: nobody to give feedback to. */
    action xcp_no_traffic() {
        hdr.xcp_work.log_xi_p = LOG7_ZERO;
        hdr.xcp_work.log_xi_n = LOG7_ZERO;
    }

    /* The close's figures, for the controller and the tests. */
    action xcp_record_close() {
        hdr.xcp_work.intervals = hdr.xcp_work.intervals + 1;
        if (hdr.xcp_work.phi > 0x7FFFFFFF) {
            hdr.xcp_work.phi = 0x7FFFFFFF;
        } else if (hdr.xcp_work.phi < -0x80000000) {
            hdr.xcp_work.phi = -0x80000000;
        }
        if (hdr.xcp_work.h > 0x7FFFFFFF) {
            hdr.xcp_work.h = 0x7FFFFFFF;
        }
        xcp_phi_bytes.write(standard_metadata.egress_port, (bit<32>)(bit<64>)hdr.xcp_work.phi);
        xcp_shuffle_bytes.write(standard_metadata.egress_port, (bit<32>)hdr.xcp_work.h);
        xcp_closed_us.write(standard_metadata.egress_port, (bit<32>)hdr.xcp_work.t_us);
        xcp_closed_bytes.write(standard_metadata.egress_port, (bit<32>)hdr.xcp_work.y_bytes);
        xcp_closed_queue.write(standard_metadata.egress_port, (bit<32>)hdr.xcp_work.queue_min);
        xcp_intervals.write(standard_metadata.egress_port, hdr.xcp_work.intervals);
    }

    /* The next interval starts with this packet: the interval's registers. */
    action xcp_open_interval() {
        hdr.xcp_work.interval_end = standard_metadata.ingress_global_timestamp + (bit<48>)hdr.xcp_work.d_us;
        hdr.xcp_work.sum_a = 0;
        hdr.xcp_work.sum_b = 0;
        hdr.xcp_work.sum_s = 0;
        hdr.xcp_work.queue_min = hdr.xcp_work.queue_pkts;
        xcp_interval_end.write(standard_metadata.egress_port, hdr.xcp_work.interval_end);
        xcp_interval_start.write(standard_metadata.egress_port, standard_metadata.ingress_global_timestamp);
        xcp_rx_mark.write(standard_metadata.egress_port, hdr.xcp_work.rx_before);
        xcp_d_us.write(standard_metadata.egress_port, hdr.xcp_work.d_us);
        xcp_log_d.write(standard_metadata.egress_port, hdr.xcp_work.log_d);
        xcp_log_xi_p.write(standard_metadata.egress_port, hdr.xcp_work.log_xi_p);
        xcp_log_xi_n.write(standard_metadata.egress_port, hdr.xcp_work.log_xi_n);
    }

    action xcp_keep_queue_min() {
        if (hdr.xcp_work.queue_pkts < hdr.xcp_work.queue_min) {
            hdr.xcp_work.queue_min = hdr.xcp_work.queue_pkts;
        }
    }

    /* The packet's terms: log7 of a = rtt s / cwnd; the arguments of a and b. */
    action xcp_packet_terms() {
        hdr.xcp_work.log_a = hdr.xcp_work.log_rtt + hdr.xcp_work.log_size - hdr.xcp_work.log_cwnd;
        hdr.xcp_work.log_arg = hdr.xcp_work.log_a + A_SCALE_LOG7;
    }

    action xcp_arg_b() {
        hdr.xcp_work.log_arg = hdr.xcp_work.log_a + hdr.xcp_work.log_rtt;
    }

    action xcp_arg_p() {
        hdr.xcp_work.log_arg = hdr.xcp_work.log_xi_p + hdr.xcp_work.log_a + hdr.xcp_work.log_rtt;
    }

    action xcp_arg_n() {
        hdr.xcp_work.log_arg = hdr.xcp_work.log_xi_n + hdr.xcp_work.log_rtt + hdr.xcp_work.log_size;
    }

    /* The sums, and feedback_bytes = min(feedback_bytes, p - n) (int32). */
    action xcp_feedback_of_packet() {
        hdr.xcp_work.sum_a = hdr.xcp_work.sum_a |+| hdr.xcp_work.a;
        hdr.xcp_work.sum_b = hdr.xcp_work.sum_b |+| hdr.xcp_work.b;
        hdr.xcp_work.sum_s = hdr.xcp_work.sum_s |+| (bit<64>)standard_metadata.packet_length;
        if (hdr.xcp_work.pos >= hdr.xcp_work.neg) {
            hdr.xcp_work.abs_phi = hdr.xcp_work.pos - hdr.xcp_work.neg;
            if (hdr.xcp_work.abs_phi > 0x7FFFFFFF) {
                hdr.xcp_work.abs_phi = 0x7FFFFFFF;
            }
            hdr.xcp_work.feedback = (bit<32>)hdr.xcp_work.abs_phi;
        } else {
            hdr.xcp_work.abs_phi = hdr.xcp_work.neg - hdr.xcp_work.pos;
            if (hdr.xcp_work.abs_phi > 0x80000000) {
                hdr.xcp_work.abs_phi = 0x80000000;
            }
            hdr.xcp_work.feedback = -(bit<32>)hdr.xcp_work.abs_phi;
        }
        if ((int<32>)hdr.xcp_work.feedback < (int<32>)hdr.xr.feedback_bytes) {
            hdr.xr.feedback_bytes = hdr.xcp_work.feedback;
        }
    }

    /* The interval's sums and smallest queue. */
    action xcp_store_sums() {
        xcp_sum_a.write(standard_metadata.egress_port, hdr.xcp_work.sum_a);
        xcp_sum_b.write(standard_metadata.egress_port, hdr.xcp_work.sum_b);
        xcp_sum_s.write(standard_metadata.egress_port, hdr.xcp_work.sum_s);
        xcp_queue_min.write(standard_metadata.egress_port, hdr.xcp_work.queue_min);
    }

    apply {
        if (hdr.xr.isValid() && hdr.xr.cwnd_bytes != 0) {
            hdr.xcp_work.setValid();
            hdr.logexp.setValid();
            if (xcp_port.apply().hit) {
                xcp_read_port();
            }
            if (hdr.xcp_work.cap_kbps != 0) {
                if (hdr.xcp_work.interval_end == 0
                        || standard_metadata.ingress_global_timestamp >= hdr.xcp_work.interval_end) {
                    xcp_read_interval();
                    if (hdr.xcp_work.interval_end == 0) {
                        xcp_open_first_interval();
                    } else {
                        xcp_measure_interval();
                        if (hdr.xcp_work.sum_a != 0 && hdr.xcp_work.sum_s != 0) {
                            log_sum_a.apply(hdr.xcp_work.sum_a, hdr.xcp_work.log_sum_a, hdr.logexp);
                            log_sum_b.apply(hdr.xcp_work.sum_b, hdr.xcp_work.log_x, hdr.logexp);
                            xcp_control_interval();
                            exp_d.apply(hdr.xcp_work.log_d, hdr.xcp_work.d64, hdr.logexp);
                            xcp_set_d();
                            log_y.apply(hdr.xcp_work.y_bytes, hdr.xcp_work.log_x, hdr.logexp);
                            log_t.apply(hdr.xcp_work.t_us, hdr.xcp_work.log_t, hdr.logexp);
                            xcp_spare_terms();
                            exp_t1.apply(hdr.xcp_work.log_arg, hdr.xcp_work.t1, hdr.logexp);
                            xcp_arg_alpha_ydt();
                            exp_t2.apply(hdr.xcp_work.log_arg, hdr.xcp_work.t2, hdr.logexp);
                            log_queue.apply(hdr.xcp_work.queue_min, hdr.xcp_work.log_x, hdr.logexp);
                            xcp_arg_beta_queue();
                            exp_t3.apply(hdr.xcp_work.log_arg, hdr.xcp_work.t3, hdr.logexp);
                            xcp_arg_gamma_ydt();
                            exp_t4.apply(hdr.xcp_work.log_arg, hdr.xcp_work.t4, hdr.logexp);
                            xcp_aggregate_feedback();
                            log_pos.apply(hdr.xcp_work.pos, hdr.xcp_work.log_x, hdr.logexp);
                            xcp_set_xi_p();
                            log_neg.apply(hdr.xcp_work.neg, hdr.xcp_work.log_x, hdr.logexp);
                            log_sum_s.apply(hdr.xcp_work.sum_s, hdr.xcp_work.log_arg, hdr.logexp);
                            xcp_set_xi_n();
                        } else {
                            xcp_no_traffic();
                        }
                        xcp_record_close();
                    }
                    xcp_open_interval();
                } else {
                    xcp_keep_queue_min();
                }
                if (hdr.xr.rtt_us != 0) {
                    log_rtt.apply((bit<64>)hdr.xr.rtt_us, hdr.xcp_work.log_rtt, hdr.logexp);
                    log_cwnd.apply((bit<64>)hdr.xr.cwnd_bytes, hdr.xcp_work.log_cwnd, hdr.logexp);
                    log_size.apply((bit<64>)standard_metadata.packet_length, hdr.xcp_work.log_size, hdr.logexp);
                    xcp_packet_terms();
                    exp_a.apply(hdr.xcp_work.log_arg, hdr.xcp_work.a, hdr.logexp);
                    xcp_arg_b();
                    exp_b.apply(hdr.xcp_work.log_arg, hdr.xcp_work.b, hdr.logexp);
                    xcp_arg_p();
                    exp_p.apply(hdr.xcp_work.log_arg, hdr.xcp_work.pos, hdr.logexp);
                    xcp_arg_n();
                    exp_n.apply(hdr.xcp_work.log_arg, hdr.xcp_work.neg, hdr.logexp);
                    xcp_feedback_of_packet();
                }
                xcp_store_sums();
            }
        }
    }
}

#endif
