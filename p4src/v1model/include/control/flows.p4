/* -*- P4_16 -*- */
/*
 * bwn (v1model): EBN's active flows N at the egress port, and the per-flow
 * fair share C / N (EBN sec. III-B; docs/dataplane.md, "EBN per-flow share"
 * and "Active flows: linear counting").
 *
 * Each port has FLOW_SLOTS hash slots. A TCP or UDP packet's addresses and
 * ports (CRC32) pick a slot; the slot holds the flow window in which it was
 * last seen, so a slot that does not hold the current flow window is new in
 * it: the switch counts it and writes the window. No clearing is ever needed.
 * N = max(slots seen in the current flow window, in the last complete one),
 * so a new flow counts at once and a finished one is forgotten after at most
 * two flow windows. The flow window rolls when a measurement window closes
 * (Window hands over its boundary).
 *
 * The share is recomputed when the measurement window closes (C may have
 * changed) and when a new flow is counted (N changed):
 *   log7(C / N) = log7(C) - log7(N), with log7(N) from the controller's table
 *   of the linear-counting estimate (flows_log); the EBN code is that rounded
 *   to 1/8 octave, (x + 8) >> 4, 0 below 1 kb/s and at most 254.
 */
#ifndef __BWN_V1MODEL_FLOWS__
#define __BWN_V1MODEL_FLOWS__

control Flows(in headers_t hdr,
              inout local_metadata_t meta,
              in standard_metadata_t standard_metadata) {

    register<bit<32>, PortId_t>(MAX_PORTS) flow_epoch;      /* (now & flow_mask) | 1 of the current flow window */
    register<bit<16>, PortId_t>(MAX_PORTS) flows_current;   /* slots seen in the current flow window */
    register<bit<16>, PortId_t>(MAX_PORTS) flows_last;      /* ... and in the last complete one */
    register<bit<32>, bit<32>>(MAX_PORTS * FLOW_SLOTS) flow_slot;  /* the flow window a slot was last seen in */

    /* The flow's slot, the flow window the slot was last seen in, and the port's. */
    action look_up_flow() {
        hash(meta.flows.slot_index, HashAlgorithm.crc32, meta.route.slot_base,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.l4_ports.src_port, hdr.l4_ports.dst_port },
             (bit<32>)FLOW_SLOTS);
        flow_slot.read(meta.flows.slot_epoch, meta.flows.slot_index);
        flow_epoch.read(meta.flows.epoch, standard_metadata.egress_spec);
    }

    /* A measurement window closed. If this packet is in another flow window,
     * the current count becomes the last one, or 0 when whole flow windows
     * passed without a packet, and the new flow window starts from 0. */
    action roll_flow_window() {
        flow_epoch.read(meta.flows.epoch, standard_metadata.egress_spec);
        flows_current.read(meta.flows.current, standard_metadata.egress_spec);
        flows_last.read(meta.flows.last, standard_metadata.egress_spec);
        if (meta.window.flow_epoch != meta.flows.epoch) {
            meta.flows.last = 0;
            if (meta.window.flow_epoch - meta.flows.epoch == meta.window.flow_window_us) {
                meta.flows.last = meta.flows.current;
            }
            meta.flows.current = 0;
            meta.flows.epoch = meta.window.flow_epoch;
        }
        flow_epoch.write(standard_metadata.egress_spec, meta.flows.epoch);
        flows_current.write(standard_metadata.egress_spec, meta.flows.current);
        flows_last.write(standard_metadata.egress_spec, meta.flows.last);
    }

    /* A new flow inside a measurement window: what the share needs besides it. */
    action read_counts() {
        flows_current.read(meta.flows.current, standard_metadata.egress_spec);
        flows_last.read(meta.flows.last, standard_metadata.egress_spec);
        capacity_log7.read(meta.window.cap_log7, standard_metadata.egress_spec);
    }

    action count_flow() {
        meta.flows.is_new = true;
        meta.flows.current = meta.flows.current + 1;
        flows_current.write(standard_metadata.egress_spec, meta.flows.current);
        flow_slot.write(meta.flows.slot_index, meta.flows.epoch);
    }

    /* N = max(current, last), at most FLOW_SLOTS: flows_log's key. */
    action flows_now() {
        meta.flows.n = meta.flows.current;
        if (meta.flows.last > meta.flows.n) {
            meta.flows.n = meta.flows.last;
        }
        if (meta.flows.n > FLOW_SLOTS) {
            meta.flows.n = FLOW_SLOTS;
        }
    }

    /* log7 of the linear-counting estimate of N, from the number of occupied
     * slots; then the EBN code of C / N. */
    action set_share(bit<16> log7) {
        meta.flows.share_log7 = (bit<32>)meta.window.cap_log7 - (bit<32>)log7;
        if ((int<32>)meta.flows.share_log7 < 0) {
            meta.flows.share_log7 = 0;                          /* below 1 kb/s: code 0 */
        }
        meta.flows.share_log7 = (meta.flows.share_log7 + 8) >> LOG7_TO_EBN_SHIFT;
        if (meta.flows.share_log7 > EBN_CODE_MAX) {
            meta.flows.share_log7 = EBN_CODE_MAX;
        }
        meta.stamp.ebn_code = meta.flows.share_log7[7:0];
    }

    table flows_log {
        key = { meta.flows.n : exact @name("flows"); }
        actions = { set_share; }
        default_action = set_share(0);
        size = FLOW_SLOTS + 1;
    }

    action write_share() {
        stamp_ebn_code.write(standard_metadata.egress_spec, meta.stamp.ebn_code);
    }

    apply {
        if (hdr.l4_ports.isValid()) {
            look_up_flow();
        }
        if (meta.window.closed) {
            roll_flow_window();
        }
        if (hdr.l4_ports.isValid() && meta.flows.slot_epoch != meta.flows.epoch) {
            if (!meta.window.closed) {
                read_counts();
            }
            count_flow();
        }
        if (meta.window.closed || meta.flows.is_new) {
            flows_now();
            flows_log.apply();
            write_share();
        }
    }
}

#endif
