/* -*- P4_16 -*- */
/*
 * bwn (v1model): the telemetry of a closed measurement window, sent to the
 * controller as one P4Runtime digest (port_telemetry_t, shared/telemetry.p4)
 * by the packet that closes it. BMv2's P4Runtime server cannot read
 * registers, so the switch pushes what the controller needs; a packet that
 * does not close a window costs nothing here. A port without capacity
 * reports nothing.
 */
#ifndef __BWN_V1MODEL_TELEMETRY__
#define __BWN_V1MODEL_TELEMETRY__

control Telemetry(in local_metadata_t meta, in standard_metadata_t standard_metadata) {
    apply {
        if (meta.window.closed && meta.stamp.narrow_kbps != 0) {
            digest<port_telemetry_t>(TELEMETRY_DIGEST_RECEIVER, {
                port = (bit<16>)standard_metadata.egress_spec,
                window_start_us = meta.window.start_us[31:0],
                capacity_kbps = meta.stamp.narrow_kbps,
                rate_kbps = meta.window.br_kbps,
                avail_kbps = meta.stamp.tight_kbps,
                queue_pkts = (bit<32>)meta.window.queue_pkts,
                flows = meta.flows.n,
                ebn_code = meta.stamp.ebn_code });
        }
    }
}

#endif
