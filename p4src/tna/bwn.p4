/* -*- P4_16 -*- */
/*
 * bwn.p4 (TNA, Intel Tofino / Tofino 2, bf-p4c --arch tna)
 *
 * The Tofino port of p4src/v1model/bwn.p4: same headers (p4src/shared), same
 * table / action / register / key names (controller/entries.py), same
 * arithmetic (docs/dataplane.md). Every difference from the BMv2 program is
 * listed in p4src/tna/README.md; the short version:
 *
 *   - registers are read-modify-written by RegisterActions, at most one per
 *     register per packet, and the per-port state is laid out so that every
 *     RegisterAction needs at most two PHV operands (a Tofino stateful ALU
 *     has two 32-bit PHV inputs, two comparators and one output word);
 *   - time is counted in "ticks" of 1024 ns (v1model: 1 us), so a window the
 *     controller sets as 2^k "us" lasts 2^k * 1.024 us; window ids are kept in
 *     units of 64 ticks (global_tstamp[47:16], a byte-aligned slice);
 *   - the queue depth is in 80-byte cells (v1model: packets);
 *   - the IPv4 checksum is written by the ingress deparser's Checksum unit:
 *     full recomputation for a 20-byte header with a correct checksum, RFC 1624
 *     incremental update (eq. 3) otherwise, so options are handled exactly and
 *     a wrong checksum stays wrong, as on BMv2;
 *   - a truncated BWN header is detected from the UDP length too (Ethernet
 *     pads short frames on a real wire, so the parser alone cannot tell).
 *
 * Stage comments ("sN") give the MAU stage each step needs at the earliest,
 * from its data dependencies; Tofino 1 has 12 stages per gress. The longest
 * chain is the egress EBN stamp: s0 (tables) .. s10 (ebn_code).
 */
#include <core.p4>
#include <tna.p4>

/* define.p4 declares `typedef bit<9> PortId_t` so that target-independent
 * code reads like TNA; tna.p4 already declares the same type, and P4 rejects a
 * second declaration. Rename the shared one while including it (same width). */
#define PortId_t bwn_shared_PortId_t
#include "../shared/define.p4"
#include "../shared/headers.p4"
#undef PortId_t

/*************************************************************************
 ******************  T N A - O N L Y   C O N S T A N T S  ***************
 *************************************************************************/

/* Outcome of a window / epoch RegisterAction (window_roll, flow_epoch_roll). */
typedef bit<8> roll_t;
const roll_t ROLL_SAME = 0;   /* packet belongs to the open window */
const roll_t ROLL_NEXT = 1;   /* window rolled over; the closed one was the previous window */
const roll_t ROLL_GAP  = 2;   /* window rolled over after >= 1 window without packets (idle) */

/* Queues of reserved (conforming) and best-effort traffic. */
#define PRIO_BEST_EFFORT 0
#define PRIO_RESERVED 7

/* UDP length of a complete BWN packet: UDP header (8) + BWN header (24). */
const bit<16> BWN_MIN_UDP_LENGTH = 32;

/* queue_rate_hi is keyed on deq_qdepth[18:5] (14 bits): size it for the whole
 * key range, since a Tofino queue can hold far more than 2048 cells (160 KB). */
const bit<32> QUEUE_HI_SIZE_TNA = 16384;

typedef bit<6>  port_idx_t;   /* egress_port & PORT_INDEX_MASK */
typedef bit<14> slot_idx_t;   /* port_idx ++ 8-bit flow hash   */

/*************************************************************************
 ***************************  M E T A D A T A  ***************************
 *************************************************************************/

/* Nothing is bridged from ingress to egress: the egress pipeline re-parses the
 * packet and needs only its own intrinsic metadata. */

struct ingress_metadata_t {
    bit<16> l4_src_port;          /* TCP/UDP ports (0 when neither), set by the parser */
    bit<16> l4_dst_port;
    /* random loss */
    bit<32> loss_draw;
    bit<32> loss_margin;          /* threshold |-| draw: non-zero <=> draw < threshold */
    /* reservations */
    bit<8>  meter_color;
    bit<6>  reserved_dscp;
    bit<1>  is_reserved;
    /* IPv4 checksum (deparser) */
    bool    ipv4_checksum_err;    /* parser: 20-byte header does not verify */
    bit<1>  ipv4_csum_full;       /* recompute over the 20-byte header */
    bit<1>  ipv4_csum_incr;       /* RFC 1624 update (options, or wrong checksum on arrival) */
    bit<16> csum_inv_hc;          /* ~HC: complement of the checksum on arrival */
    bit<16> csum_inv_tos_word;    /* ~(version ihl dscp ecn) on arrival */
    bit<16> csum_inv_ttl_word;    /* ~(ttl protocol) on arrival */
}

struct egress_metadata_t {
    bit<16>    l4_src_port;       /* set by the parser */
    bit<16>    l4_dst_port;
    /* port_config */
    bit<1>     port_configured;
    qkbps_t    cap_qkbps;
    bit<32>    cap_kbps;
    log7_t     cap_log7;
    log7_t     cap_log7_r;        /* cap_log7 + 8: the EBN code's rounding, folded in early */
    /* length and queue -> rate conversion */
    qkbps_t    len_hi_qkbps;
    qkbps_t    len_lo_qkbps;
    qkbps_t    q_hi_qkbps;
    qkbps_t    q_lo_qkbps;
    qkbps_t    pkt_qkbps;
    qkbps_t    bi_qkbps;
    sqkbps_t   cap_minus_bi;
    /* windows: ids are now & mask in units of 64 ticks (65.536 us) */
    bit<32>    win;
    bit<32>    win_len;           /* W in the same units */
    bit<32>    win_prev;          /* id the previous window had: win - W */
    bit<32>    epoch;
    bit<32>    epoch_len;
    bit<32>    epoch_prev;
    roll_t     win_state;
    roll_t     flow_state;
    /* OBP */
    qkbps_t    closed_qkbps;      /* bytes (as a rate) of the window that just closed */
    sqkbps_t   ab_qkbps;          /* AB computed at this packet's roll */
    bit<32>    ab_now;            /* AB in force (avail_qkbps), int32 as bits */
    /* EBN */
    bit<8>     flow_hash;
    bit<32>    flow_inc;          /* 1 when the packet's slot is new in this flow window */
    bit<32>    flows_rv;          /* flows_current's output */
    bit<32>    n_cur;
    bit<32>    n_last;
    bit<32>    flows_n32;         /* max(n_cur, n_last) <= FLOW_SLOTS */
    log7_t     flows_log7;
    bit<16>    share_log7_r;      /* log7(C / N) + 8, saturated at 0 */
    bit<16>    ebn_raw;           /* share_log7_r >> 4 */
    bit<16>    ebn;               /* EBN code of this port, <= EBN_CODE_MAX */
}

/*************************************************************************
 ***********************  I N G R E S S   P A R S E R  *******************
 *************************************************************************/

parser BwnIngressParser(packet_in pkt,
                        out headers_t hdr,
                        out ingress_metadata_t ig_md,
                        out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_checksum;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);   /* phase-0 port metadata: unused */
        /* Metadata is not zeroed on Tofino: initialise what is read before written. */
        ig_md.l4_src_port = 0;
        ig_md.l4_dst_port = 0;
        ig_md.loss_margin = 0;
        ig_md.is_reserved = 0;
        ig_md.ipv4_checksum_err = false;
        ig_md.ipv4_csum_full = 0;
        ig_md.ipv4_csum_incr = 0;
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    /* As on v1model: only IPv4 without options and not fragmented is parsed
     * beyond IP. The checksum unit sums the 20 bytes extracted here; the
     * result is only meaningful (and only used) when IHL == 5. */
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_checksum.add(hdr.ipv4);
        ig_md.ipv4_checksum_err = ipv4_checksum.verify();
        transition select(hdr.ipv4.ihl, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, 0, IP_PROTO_UDP): parse_udp;
            (5, 0, 0, IP_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_tcp {
        pkt.extract(hdr.tcp);
        ig_md.l4_src_port = hdr.tcp.src_port;
        ig_md.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        ig_md.l4_src_port = hdr.udp.src_port;
        ig_md.l4_dst_port = hdr.udp.dst_port;
        transition select(hdr.udp.dst_port) {
            BWN_UDP_PORT: parse_bwn;
            default: accept;
        }
    }

    /* A frame that ends inside the BWN header stops here with a parser error
     * (hdr.bwn stays invalid). On a real wire Ethernet pads short frames to
     * 60 bytes, so the ingress also checks the UDP length. */
    state parse_bwn {
        pkt.extract(hdr.bwn);
        transition accept;
    }
}

/*************************************************************************
 **************  I N G R E S S   P R O C E S S I N G  *******************
 *************************************************************************/

control BwnIngress(inout headers_t hdr,
                   inout ingress_metadata_t ig_md,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    Counter<bit<64>, bit<3>>(DROP_REASONS, CounterType_t.PACKETS) drop_counter;
    DirectMeter(MeterType_t.BYTES) reservation_meter;
    Random<bit<32>>() loss_rng;

    action drop_with(bit<3> reason) {
        drop_counter.count(reason);
        ig_dprsr_md.drop_ctl = 1;
    }

    action drop_no_route() {
        drop_with(DROP_NO_ROUTE);
    }

    /* Next hop: egress port and the Ethernet addresses of that hop. The port
     * has define.p4's type, so the P4Runtime parameter is bit<9> as on BMv2
     * and the assignment below fails to compile if TNA's PortId_t differs. */
    action route(bwn_shared_PortId_t port, mac_addr_t dst_mac, mac_addr_t src_mac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr : lpm @name("dst_addr"); }
        actions = { route; drop_no_route; }
        default_action = drop_no_route();
        size = 1024;
    }

    /* Random loss on an egress port: drop when a uniform 32-bit number is below
     * threshold = round(p * 2^32). The comparison is folded into the action as
     * a saturating subtraction (one ALU op, no gateway on two fields). */
    action set_loss(bit<32> threshold) {
        ig_md.loss_margin = threshold |-| ig_md.loss_draw;
    }

    table port_loss {
        key = { ig_tm_md.ucast_egress_port : exact @name("egress_port"); }
        actions = { set_loss; NoAction; }
        default_action = NoAction();
        size = MAX_PORTS;
    }

    /* GTCP reservations: conforming (GREEN) packets of a reserved flow are marked
     * with `dscp` and queued in the port's high-priority queue; the excess is
     * best effort. The meter is trTCM in bytes, as on BMv2. */
    action reserved_flow(bit<6> dscp) {
        ig_md.meter_color = reservation_meter.execute();
        ig_md.is_reserved = 1;
        ig_md.reserved_dscp = dscp;
    }

    action best_effort() {
        ig_md.is_reserved = 0;
    }

    table reservations {
        key = {
            hdr.ipv4.src_addr  : ternary @name("src_addr");
            hdr.ipv4.dst_addr  : ternary @name("dst_addr");
            hdr.ipv4.protocol  : ternary @name("protocol");
            ig_md.l4_src_port  : ternary @name("src_port");
            ig_md.l4_dst_port  : ternary @name("dst_port");
        }
        actions = { reserved_flow; best_effort; }
        const default_action = best_effort();
        meters = reservation_meter;
        size = 256;
    }

    apply {
        /* s0: operands of the deparser's incremental checksum, taken before
         * anything in the header changes, and the loss draw. */
        ig_md.csum_inv_hc = ~hdr.ipv4.hdr_checksum;
        ig_md.csum_inv_tos_word = ~(hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn);
        ig_md.csum_inv_ttl_word = ~(hdr.ipv4.ttl ++ hdr.ipv4.protocol);
        ig_md.loss_draw = loss_rng.get();

        /* s0: validity checks are gateways in front of ipv4_lpm. */
        if (!hdr.ipv4.isValid()) {
            drop_with(DROP_NOT_IPV4);  /* hosts use static ARP; see docs/wire-format.md */
        } else if (hdr.ipv4.ihl < 5) {
            drop_with(DROP_IPV4_MALFORMED);
        } else if (hdr.udp.isValid() && hdr.udp.dst_port == BWN_UDP_PORT
                   && (!hdr.bwn.isValid() || hdr.udp.length < BWN_MIN_UDP_LENGTH)) {
            /* Fewer than 24 bytes after the UDP header: the parser ran out of
             * packet (bwn invalid) or the UDP length says so (padded frame). */
            drop_with(DROP_BWN_MALFORMED);
        } else if (hdr.ipv4.ttl <= 1) {
            drop_with(DROP_TTL);
        } else if (ipv4_lpm.apply().hit) {                       /* s0 */
            port_loss.apply();                                   /* s1: key = route's port */
            if (ig_md.loss_margin != 0) {                        /* s2 gateway */
                drop_with(DROP_RANDOM_LOSS);
            } else {
                /* s2: only packets that are really forwarded charge the meter. */
                reservations.apply();
                /* s3: the meter colour is known one stage after the meter. */
                if (ig_md.is_reserved == 1) {
                    if (ig_md.meter_color == METER_GREEN) {
                        hdr.ipv4.dscp = ig_md.reserved_dscp;
                        ig_tm_md.qid = PRIO_RESERVED;
                    } else {
                        hdr.ipv4.dscp = 0;  /* excess of a reservation: best effort */
                        ig_tm_md.qid = PRIO_BEST_EFFORT;
                    }
                }
                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
                /* The ingress deparser writes the checksum (BwnIngressDeparser). */
                if (hdr.ipv4.ihl == 5 && !ig_md.ipv4_checksum_err) {
                    ig_md.ipv4_csum_full = 1;
                } else {
                    ig_md.ipv4_csum_incr = 1;
                }
            }
        }
        /* A miss of ipv4_lpm runs drop_no_route (counted there). */
    }
}

/*************************************************************************
 ********************  I N G R E S S   D E P A R S E R  *****************
 *************************************************************************/

control BwnIngressDeparser(packet_out pkt,
                           inout headers_t hdr,
                           in ingress_metadata_t ig_md,
                           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_checksum_full;
    Checksum() ipv4_checksum_incr;

    apply {
        /* IHL == 5 and correct on arrival: recompute over the whole header. */
        if (ig_md.ipv4_csum_full == 1) {
            hdr.ipv4.hdr_checksum = ipv4_checksum_full.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.total_len,
                hdr.ipv4.identification,
                hdr.ipv4.flag_reserved, hdr.ipv4.flag_df, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset,
                hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr,
                hdr.ipv4.dst_addr});
        }
        /* Options (IHL > 5: the options are not extracted, so they cannot be
         * summed here) or a wrong checksum on arrival: RFC 1624 eq. 3,
         *   HC' = ~(~HC + ~m_tos + m'_tos + ~m_ttl + m'_ttl),
         * exactly what v1model's csum16_replace computes. The unit sums the
         * list in 16-bit words and complements the sum; ~HC and the ~m words
         * were prepared by the ingress MAU. Each header field sits at the
         * same byte position (mod 2) in the list as in the packet. */
        if (ig_md.ipv4_csum_incr == 1) {
            hdr.ipv4.hdr_checksum = ipv4_checksum_incr.update({
                ig_md.csum_inv_hc,
                ig_md.csum_inv_tos_word,
                ig_md.csum_inv_ttl_word,
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.ttl, hdr.ipv4.protocol});
        }
        pkt.emit(hdr);  /* ethernet, ipv4, tcp, udp, bwn: the valid ones */
    }
}

/*************************************************************************
 ************************  E G R E S S   P A R S E R  *******************
 *************************************************************************/

parser BwnEgressParser(packet_in pkt,
                       out headers_t hdr,
                       out egress_metadata_t eg_md,
                       out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        eg_md.l4_src_port = 0;
        eg_md.l4_dst_port = 0;
        eg_md.port_configured = 0;
        eg_md.flow_inc = 0;
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, 0, IP_PROTO_UDP): parse_udp;
            (5, 0, 0, IP_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_tcp {
        pkt.extract(hdr.tcp);
        eg_md.l4_src_port = hdr.tcp.src_port;
        eg_md.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        eg_md.l4_src_port = hdr.udp.src_port;
        eg_md.l4_dst_port = hdr.udp.dst_port;
        transition select(hdr.udp.dst_port) {
            BWN_UDP_PORT: parse_bwn;
            default: accept;
        }
    }

    state parse_bwn {
        pkt.extract(hdr.bwn);
        transition accept;
    }
}

/*************************************************************************
 ****************  E G R E S S   P R O C E S S I N G   *******************
 *************************************************************************/

control BwnEgress(inout headers_t hdr,
                  inout egress_metadata_t eg_md,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {

    /* ---- per-port state, indexed by egress_port[5:0] -------------------
     * Same registers as v1model. [T] = telemetry, read over P4Runtime: Tofino
     * (Stratum, BF Runtime) reads registers, so it needs no digest (v1model
     * sends one from its ingress because BMv2 cannot; on Tofino the ingress
     * cannot see egress registers, README.md). Each register is touched by at
     * most one RegisterAction per packet; registers with several
     * RegisterActions run exactly one of them, chosen by the control flow. */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) window_id;        /* now & window_mask of the open window */
    Register<qkbps_t, port_idx_t>(MAX_PORTS, 0) window_qkbps;     /* bytes of the open window, as a rate */
    Register<qkbps_t, port_idx_t>(MAX_PORTS, 0) last_rate_qkbps;  /* [T] BR: rate of the last complete window */
    Register<qkbps_t, port_idx_t>(MAX_PORTS, 0) queue_qkbps;      /* [T] BI: queue at the start of the open window */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) queue_pkts;       /* [T] same queue in the target's unit: 80-byte cells */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) avail_qkbps;      /* [T] AB = IC - BR - BI (int32 as bits) */
    Register<qkbps_t, port_idx_t>(MAX_PORTS, 0) capacity_qkbps;   /* [T] IC used for the last AB */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) flow_epoch;       /* now & flow_window_mask */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) flows_current;    /* [T] distinct slots seen this flow window */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) flows_last;       /* [T] ... in the last complete flow window */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) share_ebn;        /* [T] EBN code of the port's per-flow share */
    Register<bit<32>, slot_idx_t>(MAX_PORTS * FLOW_SLOTS, 0) flow_slot;  /* epoch a slot was last seen in */

    Hash<bit<8>>(HashAlgorithm_t.CRC32) flow_hash;

    /* ---- RegisterActions ----------------------------------------------- *
     * Why the window id and its byte sum are two registers, not one 64-bit
     * pair: the roll decision compares the stored id with two PHV values (the
     * id of this window and of the one before it, which differ by the runtime
     * window length) and the sum needs a third (the packet's rate); a stateful
     * ALU gets two. The split puts the sum one stage later (s3), on a chain
     * (s0 .. s7) shorter than the EBN one. */

    /* s2: open window, previous window, or a gap (idle link)? */
    RegisterAction<bit<32>, port_idx_t, roll_t>(window_id) window_roll = {
        void apply(inout bit<32> value, out roll_t rv) {
            if (value == eg_md.win) {
                rv = ROLL_SAME;
            } else if (value == eg_md.win_prev) {
                value = eg_md.win;
                rv = ROLL_NEXT;
            } else {
                value = eg_md.win;
                rv = ROLL_GAP;
            }
        }
    };

    /* s3: accumulate, or close the window and return its sum. */
    RegisterAction<qkbps_t, port_idx_t, qkbps_t>(window_qkbps) window_qkbps_add = {
        void apply(inout qkbps_t value) {
            value = value + eg_md.pkt_qkbps;
        }
    };
    RegisterAction<qkbps_t, port_idx_t, qkbps_t>(window_qkbps) window_qkbps_close = {
        void apply(inout qkbps_t value, out qkbps_t rv) {
            rv = value;
            value = eg_md.pkt_qkbps;
        }
    };

    /* Telemetry written when a window closes (write-only RegisterActions). */
    RegisterAction<qkbps_t, port_idx_t, qkbps_t>(queue_qkbps) queue_qkbps_write = {
        void apply(inout qkbps_t value) { value = eg_md.bi_qkbps; }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(queue_pkts) queue_pkts_write = {
        void apply(inout bit<32> value) { value = (bit<32>)eg_intr_md.deq_qdepth; }
    };
    RegisterAction<qkbps_t, port_idx_t, qkbps_t>(capacity_qkbps) capacity_qkbps_write = {
        void apply(inout qkbps_t value) { value = eg_md.cap_qkbps; }
    };
    RegisterAction<qkbps_t, port_idx_t, qkbps_t>(last_rate_qkbps) last_rate_set = {
        void apply(inout qkbps_t value) { value = eg_md.closed_qkbps; }
    };
    RegisterAction<qkbps_t, port_idx_t, qkbps_t>(last_rate_qkbps) last_rate_clear = {
        void apply(inout qkbps_t value) { value = 0; }
    };

    /* s5: AB is written at the roll and read back by every DATA packet. */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(avail_qkbps) avail_write = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = (bit<32>)eg_md.ab_qkbps;
            rv = value;
        }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(avail_qkbps) avail_read = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
        }
    };

    /* s2: flow window, same three outcomes as window_roll. */
    RegisterAction<bit<32>, port_idx_t, roll_t>(flow_epoch) flow_epoch_roll = {
        void apply(inout bit<32> value, out roll_t rv) {
            if (value == eg_md.epoch) {
                rv = ROLL_SAME;
            } else if (value == eg_md.epoch_prev) {
                value = eg_md.epoch;
                rv = ROLL_NEXT;
            } else {
                value = eg_md.epoch;
                rv = ROLL_GAP;
            }
        }
    };

    /* s1: linear counting. A slot not holding the current epoch is new. */
    RegisterAction<bit<32>, slot_idx_t, bit<32>>(flow_slot) flow_slot_visit = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (value != eg_md.epoch) {
                value = eg_md.epoch;
                rv = 1;
            } else {
                rv = 0;
            }
        }
    };

    /* s3: distinct slots in the current flow window. */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_current) flows_current_add = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = value + eg_md.flow_inc;
            rv = value;
        }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_current) flows_current_roll = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;                /* count of the window that closed */
            value = eg_md.flow_inc;
        }
    };

    /* s4: count of the last complete flow window. */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_last) flows_last_read = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
        }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_last) flows_last_set = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = eg_md.flows_rv;
            rv = value;
        }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_last) flows_last_clear = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = 0;
            rv = 0;
        }
    };

    /* s10 */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(share_ebn) share_ebn_write = {
        void apply(inout bit<32> value) { value = (bit<32>)eg_md.ebn; }
    };

    /* ---- configuration set by the controller ---------------------------- */

    /* Keyless: the controller modifies the default action. The controller's
     * mask ~(W - 1) and W are read in ticks of 1024 ns: tick bit i is bit
     * i + 10 of the nanosecond timestamp. Window ids keep ticks 6..37, i.e.
     * global_tstamp[47:16] & mask[37:6], one AND of a byte-aligned 32-bit
     * PHV slice with action data (a slice at bit 10 would straddle PHV
     * containers and then feed a subtraction). So W >= 64 ticks, which is the
     * controller's minimum window (64 us); ids wrap after 3.3 days.
     * Defaults: 2^14 ticks (16.8 ms) and 2^17 ticks (134 ms). */
    action set_window(bit<48> mask, bit<32> window_us,
                      bit<48> flow_mask, bit<32> flow_window_us) {
        eg_md.win = eg_prsr_md.global_tstamp[47:16] & mask[37:6];
        eg_md.win_len = (bit<32>)window_us[31:6];
        eg_md.epoch = eg_prsr_md.global_tstamp[47:16] & flow_mask[37:6];
        eg_md.epoch_len = (bit<32>)flow_window_us[31:6];
    }

    table window_config {
        actions = { set_window; }
        default_action = set_window(48w0xFFFFFFFFC000, 16384, 48w0xFFFFFFFE0000, 131072);
    }

    action set_port(qkbps_t cap_qkbps, bit<32> cap_kbps, log7_t cap_log7) {
        eg_md.port_configured = 1;
        eg_md.cap_qkbps = cap_qkbps;
        eg_md.cap_kbps = cap_kbps;
        eg_md.cap_log7 = cap_log7;
        eg_md.cap_log7_r = cap_log7 + 8;
    }

    table port_config {
        key = { eg_intr_md.egress_port : exact @name("egress_port"); }
        actions = { set_port; NoAction; }
        default_action = NoAction();
        size = MAX_PORTS;
    }

    /* rate(x) = hi[x >> 5] + lo[x & 31], the window's bytes->qkbps factor
     * folded in by the controller. Same keys and widths as v1model. */
    action set_len_hi(qkbps_t qkbps) { eg_md.len_hi_qkbps = qkbps; }
    action set_len_lo(qkbps_t qkbps) { eg_md.len_lo_qkbps = qkbps; }
    action set_q_hi(qkbps_t qkbps) { eg_md.q_hi_qkbps = qkbps; }
    action set_q_lo(qkbps_t qkbps) { eg_md.q_lo_qkbps = qkbps; }

    table len_rate_hi {
        key = { eg_intr_md.pkt_length[15:5] : exact @name("len_hi"); }
        actions = { set_len_hi; }
        default_action = set_len_hi(0);
        size = LUT_HI_SIZE;
    }
    table len_rate_lo {
        key = { eg_intr_md.pkt_length[4:0] : exact @name("len_lo"); }
        actions = { set_len_lo; }
        default_action = set_len_lo(0);
        size = LUT_LO_SIZE;
    }
    table queue_rate_hi {
        key = { eg_intr_md.deq_qdepth[18:5] : exact @name("q_hi"); }
        actions = { set_q_hi; }
        default_action = set_q_hi(0);
        size = QUEUE_HI_SIZE_TNA;
    }
    table queue_rate_lo {
        key = { eg_intr_md.deq_qdepth[4:0] : exact @name("q_lo"); }
        actions = { set_q_lo; }
        default_action = set_q_lo(0);
        size = LUT_LO_SIZE;
    }

    /* log7 of the linear-counting estimate of the number of flows, from the
     * number of occupied hash slots (docs/dataplane.md, "Active flows"). */
    action set_flows_log7(log7_t log7) { eg_md.flows_log7 = log7; }

    table flows_log {
        key = { eg_md.flows_n32[15:0] : exact @name("flows"); }
        actions = { set_flows_log7; }
        default_action = set_flows_log7(0);
        size = FLOW_SLOTS + 1;
    }

    apply {
        port_idx_t port = eg_intr_md.egress_port[5:0];  /* & PORT_INDEX_MASK */

        /* ---- s0: configuration, lookup tables, flow hash (independent) ---- */
        window_config.apply();
        port_config.apply();
        len_rate_hi.apply();
        len_rate_lo.apply();
        queue_rate_hi.apply();
        queue_rate_lo.apply();
        eg_md.flow_hash = flow_hash.get({ hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                                          eg_md.l4_src_port, eg_md.l4_dst_port });

        /* DATA packets of version 1 on a configured port are stamped. */
        bool stamp = hdr.bwn.isValid() && hdr.bwn.version == BWN_VERSION
                     && hdr.bwn.kind == BWN_KIND_DATA && eg_md.port_configured == 1;

        /* ---- s1: one ALU op per field; flow slots ----------------------- *
         * No "| 1" on ids as in v1model: a register still at 0 reads as a
         * window with nothing counted, which is what it is (README.md). */
        eg_md.win_prev = eg_md.win - eg_md.win_len;
        eg_md.epoch_prev = eg_md.epoch - eg_md.epoch_len;
        if (hdr.ipv4.isValid()) {
            eg_md.flow_inc = flow_slot_visit.execute(port ++ eg_md.flow_hash);
        }
        eg_md.pkt_qkbps = eg_md.len_hi_qkbps + eg_md.len_lo_qkbps;
        eg_md.bi_qkbps = eg_md.q_hi_qkbps + eg_md.q_lo_qkbps;
        if (stamp) {
            /* OBP narrow link: min capacity. */
            hdr.bwn.narrow_kbps = min(hdr.bwn.narrow_kbps, eg_md.cap_kbps);
            hdr.bwn.hop_count = hdr.bwn.hop_count |+| 1;  /* saturates at 255 */
            hdr.udp.checksum = 0;  /* the UDP checksum rule, docs/wire-format.md */
        }

        /* ---- s2: roll decisions ----------------------------------------- */
        eg_md.win_state = window_roll.execute(port);
        eg_md.flow_state = flow_epoch_roll.execute(port);
        eg_md.cap_minus_bi = (sqkbps_t)eg_md.cap_qkbps - (sqkbps_t)eg_md.bi_qkbps;

        /* ---- s3: window bytes and flow count; telemetry at the roll ----- *
         * (the three telemetry writes depend on s2 only; bf-p4c may place
         * them in any later stage, as a stage holds four stateful ALUs) */
        if (eg_md.win_state == ROLL_SAME) {
            window_qkbps_add.execute(port);
        } else {
            eg_md.closed_qkbps = window_qkbps_close.execute(port);
            queue_qkbps_write.execute(port);
            queue_pkts_write.execute(port);
            capacity_qkbps_write.execute(port);
        }
        if (eg_md.flow_state == ROLL_SAME) {
            eg_md.flows_rv = flows_current_add.execute(port);
        } else {
            eg_md.flows_rv = flows_current_roll.execute(port);
        }

        /* ---- s4: OBP eq. 6 at the roll; last flow window ---------------- */
        if (eg_md.win_state == ROLL_NEXT) {
            eg_md.ab_qkbps = eg_md.cap_minus_bi - (sqkbps_t)eg_md.closed_qkbps;
            last_rate_set.execute(port);
        } else if (eg_md.win_state == ROLL_GAP) {
            eg_md.ab_qkbps = eg_md.cap_minus_bi;  /* idle link: BR = 0 */
            last_rate_clear.execute(port);
        }
        if (eg_md.flow_state == ROLL_SAME) {
            eg_md.n_cur = eg_md.flows_rv;
            eg_md.n_last = flows_last_read.execute(port);
        } else if (eg_md.flow_state == ROLL_NEXT) {
            eg_md.n_cur = eg_md.flow_inc;
            eg_md.n_last = flows_last_set.execute(port);
        } else {
            eg_md.n_cur = eg_md.flow_inc;
            eg_md.n_last = flows_last_clear.execute(port);
        }

        /* ---- s5: AB in force -------------------------------------------- */
        if (eg_md.win_state != ROLL_SAME) {
            eg_md.ab_now = avail_write.execute(port);
        } else if (stamp) {
            eg_md.ab_now = avail_read.execute(port);
        }

        /* ---- s5..s9: EBN share of the port, every packet (telemetry) ---- *
         * s5: N = max(current, last). Both count distinct slots of 256, so
         * N <= FLOW_SLOTS without the v1model's clamp. */
        eg_md.flows_n32 = max(eg_md.n_cur, eg_md.n_last);
        /* s6 */
        flows_log.apply();
        /* s7: C / N -> log7(C) - log7(N) (+ 8 rounding), saturated at 0 */
        eg_md.share_log7_r = eg_md.cap_log7_r |-| eg_md.flows_log7;
        /* s8: 1/128 -> 1/8 octave (a shift, not a misaligned slice) */
        eg_md.ebn_raw = eg_md.share_log7_r >> LOG7_TO_EBN_SHIFT;
        /* s9 */
        eg_md.ebn = min(eg_md.ebn_raw, (bit<16>)EBN_CODE_MAX);

        if (stamp) {
            /* s6 -> s7: OBP tight link, signed; AB >> 2 = kb/s. */
            hdr.bwn.tight_kbps = (bit<32>)min((int<32>)hdr.bwn.tight_kbps,
                                               ((int<32>)eg_md.ab_now) >> QKBPS_SHIFT);
            /* s10 */
            hdr.bwn.ebn_code = min(hdr.bwn.ebn_code, eg_md.ebn[7:0]);
        }
        share_ebn_write.execute(port);  /* s10 */
    }
}

/*************************************************************************
 *********************  E G R E S S   D E P A R S E R  *******************
 *************************************************************************/

control BwnEgressDeparser(packet_out pkt,
                          inout headers_t hdr,
                          in egress_metadata_t eg_md,
                          in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply {
        /* The IPv4 header is not modified in egress; the UDP checksum of a
         * stamped packet was set to 0 in BwnEgress. */
        pkt.emit(hdr);
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
