/* -*- P4_16 -*- */
/*
 * bwn.p4 (PSA, compiled by p4c-ebpf to a TC program that NIKSS loads)
 *
 * The switch program of p4src/v1model/bwn.p4 (the reference semantics, see
 * docs/dataplane.md) for the Linux kernel: IPv4 LPM routing with MAC rewrite,
 * TTL and checksums (RFC 1812, RFC 1624); per-port random loss; GTCP
 * reservations metered and marked as RFC 2597 Assured Forwarding; OBP's
 * available bandwidth AB = IC - BR - BI per port (Loureiro & Monteiro, eq. 6)
 * over aligned power-of-two windows; EBN's active flows (linear counting) and
 * per-flow share C / N (Dutta & Zhang); the narrow and tight link and the
 * EBN code stamped on BWN DATA packets as the path's minimum; a telemetry
 * digest per port and closed window.
 *
 * The kernel's qdisc on each egress port is the bottleneck (its rate and byte
 * FIFO); the program cannot see its queue, so it keeps a virtual queue per
 * port (include/ingress.p4). The same names as the v1model program where the
 * two share a job (tables, actions, parameters, drop reasons), with the
 * route's port index `pidx` as on Tofino (PSA ports are ifindexes).
 * p4src/psa/README.md lists every difference, docs/dataplane.md ("PSA on
 * eBPF") the designs and their error bounds.
 *
 * Build: make build-ebpf (build/ebpf/bwn.o).
 */
#include <core.p4>
#include <psa.p4>

#include "../shared/define.p4"   /* psa.p4 declares PortId_t: bit<32>, an ifindex */
#include "../shared/headers.p4"

/* Reservations (and their meters) one switch can hold. */
#define RESERVATION_METERS 256

#include "include/types.p4"
#include "include/parser.p4"
#include "include/ingress.p4"
#include "include/deparser.p4"

IngressPipeline(BwnIngressParser(), BwnIngress(), BwnIngressDeparser()) ip;
EgressPipeline(BwnEgressParser(), BwnEgress(), BwnEgressDeparser()) ep;
PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;
