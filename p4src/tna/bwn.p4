/* -*- P4_16 -*- */
/*
 * bwn.p4 (TNA: Intel Tofino / Tofino 2, bf-p4c --arch tna)
 *
 * The Tofino port of p4src/v1model/bwn.p4 (the reference semantics, see
 * docs/dataplane.md): the same headers (p4src/shared), the same routing,
 * measurement and stamping, the same table/action/parameter names where the
 * two programs share a job, so that controller/entries.py drives both and
 * controller/tofino.py holds only what differs. p4src/tna/README.md lists
 * every difference and why the Tofino pipeline forces it. In short:
 *
 *   INGRESS  checks (drop reasons as on BMv2), IPv4 LPM routing, random loss,
 *            OBP's BR as a cumulative count of the bytes each egress port
 *            received, EBN's active flows (linear counting), GTCP
 *            reservations (meter, AF11/AF13 marking), Assured Forwarding as a
 *            packet colour the traffic manager drops on, TTL and the IPv4
 *            checksum (deparser Checksum units); bridges to the egress what
 *            the egress cannot see.
 *   EGRESS   closes OBP's measurement windows: BR = bytes received in the
 *            window, BI = the queue the closing packet leaves behind, AB =
 *            IC - BR - BI (OBP eq. 6) in kb/s; the EBN share from the flow
 *            count; stamps BWN DATA packets with min() of each field.
 *
 * Tofino rules the program is shaped by: a register belongs to one gress and
 * one stage, and a packet runs at most one RegisterAction on it (two PHV
 * operands, one output); an action writes each field once with one ALU
 * operation; no multiplication, division or shift by a runtime amount; 12 MAU
 * stages per gress on Tofino 1.
 *
 * This file only puts the blocks together; each job is a control of its own
 * under include/ (p4src/README.md). Every control of the ingress is
 * instantiated under the name ".BwnIngress" (of the egress ".BwnEgress"), so
 * that its tables, actions and registers keep the names the controller uses.
 */
#include <core.p4>
#include <tna.p4>

#include "include/header.p4"
#include "include/parser.p4"
#include "include/deparser.p4"
#include "include/control/malformed.p4"
#include "include/control/routing.p4"
#include "include/control/random_loss.p4"
#include "include/control/window.p4"
#include "include/control/flows.p4"
#include "include/control/reservations.p4"
#include "include/control/guaranteed.p4"
#include "include/control/port_counters.p4"
#include "include/control/port_config.p4"
#include "include/control/queue.p4"
#include "include/control/red_ecn.p4"
#include "include/control/stamp.p4"

/*************************************************************************
 **************  I N G R E S S   P R O C E S S I N G  *******************
 *************************************************************************/

control BwnIngress(inout tna_headers_t hdr,
                   inout ingress_metadata_t ig_md,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    Counter<bit<64>, bit<3>>(DROP_REASONS, CounterType_t.PACKETS) drop_counter;

    @name(".BwnIngress") MalformedInput() malformed;
    @name(".BwnIngress") Routing() routing;
    @name(".BwnIngress") Window() window;
    @name(".BwnIngress") RandomLoss() random_loss;
    @name(".BwnIngress") Flows() flows;
    @name(".BwnIngress") Reservations() reservations;
    @name(".BwnIngress") AssuredForwarding() assured_forwarding;
    @name(".BwnIngress") TtlDecrement() ttl;
    @name(".BwnIngress") GuaranteedService() guaranteed_service;
    @name(".BwnIngress") RedOption() red_option;
    @name(".BwnIngress") PortCounters() port_counters;

    /* A drop is decided in several places and counted once, at the end of the
     * ingress (a counter is used from one place per packet on Tofino). */
    action count_and_drop() {
        drop_counter.count(ig_md.drop_reason);
        ig_dprsr_md.drop_ctl = 1;
    }

    apply {
        malformed.apply(hdr, ig_md);
        if (ig_md.drop == 0) {
            routing.apply(hdr, ig_md, ig_tm_md);          /* a miss drops: no route */
        }
        if (ig_md.drop == 0) {
            /* OBP: every routed packet counts in BR, lost or not. */
            window.apply(hdr, ig_md, ig_prsr_md);
            random_loss.apply(ig_md);
            if (ig_md.drop == 0) {
                flows.apply(hdr, ig_md);
                reservations.apply(hdr, ig_md);           /* meter and mark (edge) */
                assured_forwarding.apply(hdr, ig_md, ig_tm_md);
                guaranteed_service.apply(hdr, ig_md, ig_tm_md);
                ttl.apply(hdr, ig_md);
            }
            red_option.apply(hdr, ig_md);
        }
        port_counters.apply(hdr, ig_md);
        if (ig_md.drop == 1) {
            count_and_drop();
        }
    }
}

/*************************************************************************
 ****************  E G R E S S   P R O C E S S I N G   *******************
 *************************************************************************/

control BwnEgress(inout tna_headers_t hdr,
                  inout egress_metadata_t eg_md,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {

    @name(".BwnEgress") PortConfig() port_config;
    @name(".BwnEgress") QueueMonitor() queue_monitor;
    @name(".BwnEgress") Share() share;
    @name(".BwnEgress") AvailableBandwidth() available_bandwidth;
    @name(".BwnEgress") RedEcn() red_ecn;
    @name(".BwnEgress") Stamp() stamp;

    apply {
        port_idx_t pidx = hdr.bridge.pidx[5:0];
        bool is_data = hdr.bwn.isValid() && hdr.bwn.version == BWN_VERSION
                       && hdr.bwn.kind == BWN_KIND_DATA;

        port_config.apply(eg_md, eg_intr_md);
        queue_monitor.apply(eg_intr_md, pidx);
        share.apply(hdr, eg_md, pidx);
        available_bandwidth.apply(hdr, eg_md, eg_intr_md, pidx, is_data);
        stamp.apply(hdr, eg_md, is_data);
        red_ecn.apply(hdr, eg_md, eg_intr_md, eg_dprsr_md, pidx);
        hdr.bridge.setInvalid();
    }
}

/*************************************************************************
 ***************************  S W I T C H  *******************************
 *************************************************************************/

Pipeline(BwnIngressParser(),
         BwnIngress(),
         BwnIngressDeparser(),
         BwnEgressParser(),
         BwnEgress(),
         BwnEgressDeparser()) pipe;

Switch(pipe) main;
