/* -*- P4_16 -*- */
/*
 * bwn: what a switch reports to the controller for each closed measurement
 * window of an egress port. Programs that send it as a digest (v1model; any
 * architecture with a digest from the ingress) send this struct, named
 * port_telemetry_t, which controller/entries.py PortTelemetry.from_digest
 * decodes by field name. Every field is at most 64 bits wide, so that targets
 * without wider arithmetic can build it.
 */
#ifndef __BWN_TELEMETRY__
#define __BWN_TELEMETRY__

struct port_telemetry_t {
    bit<16> port;              /* the egress port */
    bit<32> window_start_us;   /* the window's start, switch clock, low 32 bits */
    bit<32> capacity_kbps;     /* IC (the narrow-link stamp); 0: port not configured */
    bit<32> rate_kbps;         /* BR: bytes received for the port in the window, as a rate */
    bit<32> avail_kbps;        /* AB = IC - BR - BI (OBP eq. 6): int32 as bits */
    bit<32> queue_pkts;        /* BI's queue when the window closed, in packets */
    bit<16> flows;             /* EBN's N: occupied hash slots, max(this flow window, the last) */
    bit<8>  ebn_code;          /* the EBN code of the port's per-flow share */
}

#endif
