/* -*- P4_16 -*- */
/*
 * bwn.p4 (v1model, BMv2 simple_switch_grpc)
 *
 * A router that tells end hosts how much bandwidth the network has:
 *   - EBN (Dutta & Zhang): per-flow fair share of each egress link, stamped as
 *     an 8-bit log code, the minimum along the path;
 *   - OBP (Loureiro & Monteiro): "narrow link" (min capacity) and "tight link"
 *     (min available bandwidth, AB = IC - BR - BI, OBP eq. 6),
 *   - XCP (Katabi, Handley, Rohrs) and RCP (Dukkipati, McKeown): per-packet
 *     window feedback and a per-port rate, the path minimum of each, in the
 *     XR header that follows BWN when a sender asks for it,
 * plus what the papers' scenarios need from a switch: IPv4 LPM forwarding,
 * per-port random loss (lossy wireless links: SARBE, DFT), GTCP reservations
 * (meter and mark at the edge; then either RFC 2597 Assured Forwarding: drop
 * out-of-profile traffic first at a congested port, never reorder a flow; or
 * the guaranteed service: in-profile packets in a strict-priority queue), RED
 * with ECN marking (OBP's TCP baselines), and per-port drop counts.
 *
 * Arithmetic is Tofino-friendly: no division, no multiplication or shift by a
 * runtime value. Measurement windows are powers of two (aligned by a mask),
 * byte counts are exact, and the conversions to kb/s happen once per window,
 * with constant shifts or controller lookup tables (docs/dataplane.md derives
 * every approximation and its error).
 *
 * This file only puts the blocks together; each job is a control of its own
 * under include/ (p4src/README.md lists them, and where a new one goes).
 * Every control of the ingress is instantiated under the name ".BwnIngress"
 * (and of the egress ".BwnEgress"), so that its tables, actions and counters
 * keep the names the controller uses (BwnIngress.ipv4_lpm, ...): the names in
 * one gress must be distinct.
 */
#include <core.p4>
/* v1model's typed indices (register<T, I>, counter<I>): per-port state is
 * indexed by the port itself (PortId_t). */
#define V1MODEL_VERSION 20200408
#include <v1model.p4>

#include "include/header.p4"
#include "include/port_state.p4"
#include "include/parser.p4"
#include "include/checksum.p4"
#include "include/control/malformed.p4"
#include "include/control/routing.p4"
#include "include/control/random_loss.p4"
#include "include/control/reservations.p4"
#include "include/control/window.p4"
#include "include/control/flows.p4"
#include "include/control/telemetry.p4"
#include "include/control/guaranteed.p4"
#include "include/control/port_counters.p4"
#include "include/control/queue.p4"
#include "include/control/red_ecn.p4"
#include "include/control/logexp.p4"
#include "include/control/xcp.p4"
#include "include/control/rcp.p4"
#include "include/control/stamp.p4"

/*************************************************************************
 *  Ingress: forwarding, the port's options, measurement, RED
 *************************************************************************/
control BwnIngress(inout headers_t hdr,
                   inout local_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    counter<bit<8>>(DROP_REASONS, CounterType.packets) drop_counter;

    @name(".BwnIngress") MalformedInput() malformed;
    @name(".BwnIngress") Routing() routing;
    @name(".BwnIngress") RandomLoss() random_loss;
    @name(".BwnIngress") Reservations() reservations;
    @name(".BwnIngress") AssuredForwarding() assured_forwarding;
    @name(".BwnIngress") Window() window;
    @name(".BwnIngress") Flows() flows;
    @name(".BwnIngress") Telemetry() telemetry;
    @name(".BwnIngress") GuaranteedService() guaranteed_service;
    @name(".BwnIngress") RedEcn() red_ecn;
    @name(".BwnIngress") PortCounters() port_counters;

    /* Every drop is decided by one control and carried out here, counted
     * once: under its reason, or RED's by RedEcn. */
    action count_and_drop() {
        drop_counter.count(meta.drop_reason);
        mark_to_drop(standard_metadata);
    }

    apply {
        if (standard_metadata.parser_error != error.NoError || standard_metadata.checksum_error == 1) {
            malformed.apply(hdr, meta, standard_metadata);
        } else {
            routing.apply(hdr, meta, standard_metadata);
            if (!meta.drop) {
                /* The port's options: a lost packet meets neither the
                 * reservation meter nor the AF rule. */
                if (meta.route.has_options) {
                    random_loss.apply(meta);
                    if (!meta.drop) {
                        reservations.apply(hdr, meta);
                        assured_forwarding.apply(hdr, meta, standard_metadata);
                        guaranteed_service.apply(hdr, meta, standard_metadata);
                    }
                }
                /* OBP: every routed packet counts in BR; a dropped one
                 * neither closes a window nor counts as a flow. */
                window.apply(meta, standard_metadata);
                if (!meta.drop) {
                    flows.apply(hdr, meta, standard_metadata);
                    telemetry.apply(meta, standard_metadata);
                    /* RED decides on arrival: a packet it drops never
                     * enters the queue (it counts in BR and as a flow, as
                     * every packet that reached the port does). */
                    if (meta.route.red == 1) {
                        red_ecn.apply(hdr, meta, standard_metadata);
                    }
                }
            }
        }
        port_counters.apply(meta, standard_metadata);   /* before a drop clears egress_spec */
        if (meta.drop) {
            count_and_drop();
        }
        if (meta.red.dropped) {
            mark_to_drop(standard_metadata);            /* RED's drop: RedEcn counts it */
        }
    }
}

/*************************************************************************
 *  Egress: TTL, the queue (and RED's sample of it), XCP and RCP feedback, BWN stamping
 *************************************************************************/
control BwnEgress(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    @name(".BwnEgress") TtlDecrement() ttl;
    @name(".BwnEgress") QueueMonitor() queue_monitor;
    @name(".BwnEgress") RedDeparture() red_departure;
    @name(".BwnEgress") Xcp() xcp;
    @name(".BwnEgress") Rcp() rcp;
    @name(".BwnEgress") Stamp() stamp;

    apply {
        ttl.apply(hdr);
        queue_monitor.apply(standard_metadata);
        if (meta.route.red == 1) {
            red_departure.apply(standard_metadata);
        }
        xcp.apply(hdr, meta, standard_metadata);
        rcp.apply(hdr, meta, standard_metadata);
        stamp.apply(hdr, meta, standard_metadata);
    }
}

V1Switch(BwnParser(), BwnVerifyChecksum(), BwnIngress(), BwnEgress(),
         BwnComputeChecksum(), BwnDeparser()) main;
