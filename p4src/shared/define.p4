/* -*- P4_16 -*- */
/*
 * bwn: constants shared by every architecture (v1model for BMv2, TNA for
 * Tofino, and any other program under p4src/ that includes this file).
 *
 * Units inside the dataplane (docs/dataplane.md explains each choice):
 *   - time:  microseconds on BMv2; ticks of 1.024 us on Tofino (p4src/tna);
 *            measurement windows are powers of two of that unit;
 *   - bytes: OBP's IC, BR and BI are counted in bytes per window, exactly;
 *            AB is converted to kb/s (the wire unit) once per window;
 *   - logs:  "log7", 128 * log2(x): 1/128 octave (0.54 %) resolution in 16 bits.
 *            The EBN code on the wire is 1/8 octave: log7 >> 4 (rounded).
 */
#ifndef __BWN_DEFINE__
#define __BWN_DEFINE__

#define ETHERTYPE_IPV4 0x0800
#define IP_PROTO_TCP 6
#define IP_PROTO_UDP 17

/* UDP destination port of BWN DATA packets: 0x4257, ASCII "BW". */
#define BWN_UDP_PORT 16983
#define BWN_VERSION 1
#define BWN_KIND_DATA 0
#define BWN_KIND_ACK 1
/* BWN flags: the XR header (XCP and RCP) follows the BWN header. */
#define BWN_FLAG_XR 0x02

/* Per-port registers hold MAX_PORTS entries, indexed by the egress port on
 * BMv2 and by the port index each route carries on Tofino (controller/tofino.py's
 * PortMap: Tofino's device ports go above 63). */
#define MAX_PORTS 64

/* Distinct-flow estimation: FLOW_SLOTS hash slots per port (linear counting). */
#define FLOW_SLOTS 256
#define FLOW_SLOTS_LOG2 8

/* Rate arithmetic. */
#define LOG7_TO_EBN_SHIFT 4   /* log7 >> 4 = EBN code (1/8 octave) */
#define EBN_CODE_MAX 254

/* Queue depth (packets on BMv2) -> bytes: one exact table up to this depth. */
#define QUEUE_TABLE_SIZE 4096

/* v1model digest receiver of the per-port telemetry (one per closed window). */
#define TELEMETRY_DIGEST_RECEIVER 1

/* v1model's drop port (egress_spec after mark_to_drop). */
#define DROP_PORT 511

/* The `options` word of a route to a port with options (route_checked):
 * bit 31 says this switch is the edge of reservations to the destination
 * (meter and mark them), bit 30 that the port gives in-profile (AF11)
 * packets the guaranteed service (a strict-priority queue), bit 29 that the
 * port runs RED with ECN marking, bits 28..0 are the port's Assured
 * Forwarding threshold in packets (0: off). controller/entries.py
 * PortOptions.options_word. */

/* Reason codes of the drop counter (controller/entries.py DROP_REASONS). */
#define DROP_NO_ROUTE 0
#define DROP_TTL 1
#define DROP_IPV4_MALFORMED 2
#define DROP_BWN_MALFORMED 3
#define DROP_RANDOM_LOSS 4
#define DROP_NOT_IPV4 5
#define DROP_AF_OUT_OF_PROFILE 6   /* Assured Forwarding: queue above the threshold */
#define DROP_IPV4_CHECKSUM 7       /* the IPv4 header checksum does not verify */
#define DROP_REASONS 8

/* Meter colours (v1model / PSA numbering); METER_NONE: no reservation matched. */
#define METER_GREEN 0
#define METER_NONE 0xFF

/* DiffServ code points of GTCP reservations (RFC 2597 Assured Forwarding):
 * in profile AF11 (low drop precedence), the excess of a reservation AF13. */
#define DSCP_AF11 10
#define DSCP_AF13 14

/* The guaranteed service (GTCP's service model): the egress queue in-profile
 * packets take, above best effort's 0 (BMv2 --priority-queues 2: 1 is served
 * first; Tofino: the queue id the controller gives strict priority). */
#define PRIORITY_GUARANTEED 1

/* IPv4's ECN field (RFC 3168 sec. 5): ECN-capable transport ECT(1), ECT(0),
 * and Congestion Experienced. */
#define ECN_NOT_ECT 0
#define ECN_ECT1 1
#define ECN_ECT0 2
#define ECN_CE 3

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

#endif
