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
 *   INGRESS  parse and check (drop reasons as on BMv2), IPv4 LPM routing, TTL
 *            and the IPv4 checksum (deparser Checksum units), random loss,
 *            GTCP reservations (meter, AF11/AF13 marking), Assured Forwarding
 *            as a packet colour the traffic manager drops on (its per-colour
 *            queue limits), OBP's BR as a cumulative count of the bytes each
 *            egress port received, EBN's active flows (linear counting);
 *            bridges to the egress what the egress cannot see.
 *   EGRESS   closes OBP's measurement windows: BR = bytes received in the
 *            window, BI = the queue the closing packet leaves behind, AB =
 *            IC - BR - BI (OBP eq. 6) in kb/s; the EBN share from the flow
 *            count; stamps BWN DATA packets with min() of each field.
 *
 * Tofino rules the program is shaped by: a register belongs to one gress and
 * one stage, and a packet runs at most one RegisterAction on it (two PHV
 * operands, one output); an action writes each field once with one ALU
 * operation; no multiplication, division or shift by a runtime amount; 12 MAU
 * stages per gress on Tofino 1 ("sN" comments give the earliest stage a step's
 * data dependencies allow).
 *
 * Time base: global_tstamp is in ns. A "tick" is 1024 ns (bit 10), so the
 * controller's power-of-two windows of 2^K "us" last 2^K ticks = 2^K * 1.024 us
 * on Tofino, and controller/tofino.py sizes IC per window for that length.
 */
#include <core.p4>
#include <tna.p4>

/* define.p4 declares `typedef bit<9> PortId_t` so that target-independent
 * code reads like TNA; tna.p4 declares the same type and P4 rejects a second
 * declaration: rename the shared one while including it (same width). */
#define PortId_t bwn_shared_PortId_t
#include "../shared/define.p4"
#include "../shared/headers.p4"
#undef PortId_t

/*************************************************************************
 ******************  T N A - O N L Y   D E F I N I T I O N S  ***********
 *************************************************************************/

/* Outcome of a window RegisterAction (window_roll, flow_epoch_roll). */
typedef bit<8> roll_t;
const roll_t ROLL_SAME = 0;   /* the packet belongs to the open window */
const roll_t ROLL_NEXT = 1;   /* a window closed; the packet opens the next one */
const roll_t ROLL_GAP  = 2;   /* a window closed after >= 1 window without packets (idle) */

/* UDP length of a complete BWN packet: UDP header (8) + BWN header (24). */
const bit<16> BWN_MIN_UDP_LENGTH = 32;

/* Ethernet header bytes: what BMv2's packet_length adds to the IPv4 total
 * length (no FCS). Tofino's ingress has no packet length; bytes received are
 * IPv4 total length + 14 (docs/dataplane.md, BR). */
const bit<16> ETHERNET_BYTES = 14;

/* TNA packet colours (tofino*_base.p4): the traffic manager admits a YELLOW
 * packet only below the queue's yellow limit, which the controller sets from
 * the port's AF threshold (controller/tofino.py). */
const bit<2> COLOR_YELLOW = 1;

typedef bit<6>  port_idx_t;   /* per-port register index (route's pidx) */
typedef bit<14> slot_idx_t;   /* port index * FLOW_SLOTS + flow hash */

/* Ingress -> egress. The egress cannot read ingress registers, so every packet
 * carries the port's received-bytes count and the window ids of its arrival. */
header bridge_t {
    bit<32> rx_before;        /* bytes the egress port had received before this packet (wraps) */
    bit<32> win;              /* rate window of the arrival: ids in units of 64 ticks */
    bit<32> win_prev;         /* id of the window before it: win - W */
    bit<32> flows;            /* EBN's N: max(flows this flow window, last), <= FLOW_SLOTS */
    bit<8>  pidx;             /* the route's port index */
    bit<8>  pad;
}

struct tna_headers_t {
    bridge_t   bridge;
    ethernet_t ethernet;
    ipv4_t     ipv4;
    l4_ports_t tcp;
    udp_t      udp;
    bwn_t      bwn;
}

/*************************************************************************
 ***************************  M E T A D A T A  ***************************
 *************************************************************************/

struct ingress_metadata_t {
    bit<16> l4_src_port;          /* TCP/UDP ports (0 when neither), set by the parser */
    bit<16> l4_dst_port;
    bit<1>  has_flow_key;         /* TCP or UDP without options: a flow EBN counts */
    bit<1>  drop;
    bit<3>  drop_reason;
    /* route */
    bit<16> loss_threshold;       /* the route's threshold, top 16 bits */
    bit<32> options;              /* bit 31 reservations, bits 30..0 AF threshold */
    bit<16> loss_draw;
    bit<16> loss_margin;          /* threshold |-| draw: non-zero <=> draw < threshold */
    bit<16> frame_bytes;
    /* windows (ids in units of 64 ticks) */
    bit<32> epoch;
    bit<32> epoch_len;
    bit<32> epoch_prev;
    bit<32> win_len;
    roll_t  flow_state;
    bit<8>  flow_hash;
    bit<32> flow_inc;             /* 1 when the packet's slot is new in this flow window */
    bit<32> flows_closed;         /* count of the flow window that just closed */
    bit<32> flows_cur;
    bit<32> flows_last;
    /* reservations */
    bit<8>  meter_color;
    bit<6>  reserved_dscp;
    bit<1>  is_reserved;
    /* IPv4 checksum (deparser) */
    bool    ipv4_checksum_err;    /* parser: the 20-byte header does not verify */
    bit<1>  ipv4_csum_full;       /* recompute over the 20-byte header */
    bit<1>  ipv4_csum_incr;       /* RFC 1624 update (options) */
    bit<16> csum_inv_hc;          /* ~HC on arrival */
    bit<16> csum_ttl_delta;       /* ~m + m' of the (ttl, protocol) word when TTL drops by 1 */
}

struct egress_metadata_t {
    /* port_config */
    bit<1>   port_configured;
    bit<32>  cap_bytes;           /* IC: bytes per window of 2^K ticks */
    bit<32>  cap_kbps;
    bit<8>   cap_hi;              /* (log7(IC) + 8) >> 4: IC's code, rounded (1/8 octave) */
    bit<8>   cap_frac;            /* (log7(IC) + 8) & 15 */
    bit<8>   rate_k;              /* K of the window: which bytes -> kb/s action */
    /* OBP, bytes per window */
    bit<32>  queue_cells;         /* deq_qdepth: 80-byte cells */
    bit<32>  bi_hi;               /* queue cells * 64 */
    bit<32>  bi_lo;               /* queue cells * 16 */
    bit<32>  bi_bytes;            /* BI: queue cells * 80 */
    bit<32>  cap_minus_bi;
    roll_t   win_state;
    bit<32>  br_bytes;            /* BR of the window that closed */
    int<32>  ab_bytes;            /* AB = IC - BR - BI */
    int<32>  ab_y;                /* AB * 2^13 / 2^K */
    int<32>  ab_y5;               /* ab_y / 32 */
    int<32>  ab_y6;               /* ab_y / 64 */
    int<32>  ab_z;
    int<32>  ab_kbps;
    bit<32>  ab_now;              /* AB in force (avail_kbps), int32 as bits */
    /* EBN */
    bit<8>   n_hi;                /* log7(N) >> 4 */
    bit<8>   n_frac;              /* log7(N) & 15 */
    bit<8>   n_borrow;            /* != 0 when n_frac > cap_frac */
    bit<8>   ebn;                 /* EBN code of the port's share (<= 254, controller/tofino.py) */
}

/*************************************************************************
 ***********************  I N G R E S S   P A R S E R  *******************
 *************************************************************************/

parser BwnIngressParser(packet_in pkt,
                        out tna_headers_t hdr,
                        out ingress_metadata_t ig_md,
                        out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_checksum;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);   /* phase-0 port metadata: unused */
        /* Tofino does not zero metadata: set what may be read before written. */
        ig_md.l4_src_port = 0;
        ig_md.l4_dst_port = 0;
        ig_md.has_flow_key = 0;
        ig_md.drop = 0;
        ig_md.loss_margin = 0;
        ig_md.options = 0;
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
     * beyond IP (options are never extracted). The checksum unit sums the 20
     * bytes extracted here; the ingress uses its verdict only when IHL == 5. */
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
        ig_md.has_flow_key = 1;
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        ig_md.l4_src_port = hdr.udp.src_port;
        ig_md.l4_dst_port = hdr.udp.dst_port;
        ig_md.has_flow_key = 1;
        transition select(hdr.udp.dst_port) {
            BWN_UDP_PORT: parse_bwn;
            default: accept;
        }
    }

    /* A frame that ends inside the BWN header leaves hdr.bwn invalid. On a
     * real wire Ethernet pads short frames to 60 bytes, so the ingress also
     * checks the UDP length. */
    state parse_bwn {
        pkt.extract(hdr.bwn);
        transition accept;
    }
}

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
    DirectMeter(MeterType_t.BYTES) reservation_meter;
    Random<bit<16>>() loss_rng;   /* 16 bits: 2^-16 loss resolution (README.md) */
    Hash<bit<8>>(HashAlgorithm_t.CRC32) flow_hash;
    /* A register's index comes from the hash unit: the slot is port index ++
     * flow hash, an identity hash of the two (= slot_base + hash). */
    Hash<slot_idx_t>(HashAlgorithm_t.IDENTITY) slot_index;

    /* ---- per-port state, indexed by the route's port index ---------------
     * rx_bytes: OBP's BR, bytes received for each egress port (every routed
     * packet, before any drop), cumulative, wrapping at 2^32. flow_epoch,
     * flows_current, flows_last, flow_slot: EBN's active flows. */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) rx_bytes;
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) flow_epoch;
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) flows_current;
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) flows_last;
    Register<bit<32>, slot_idx_t>(MAX_PORTS * FLOW_SLOTS, 0) flow_slot;

    /* s1: count the packet, return the count before it. */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(rx_bytes) rx_bytes_add = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = value + (bit<32>)ig_md.frame_bytes;
        }
    };

    /* s2: the flow window: open, next, or after a gap? */
    RegisterAction<bit<32>, port_idx_t, roll_t>(flow_epoch) flow_epoch_roll = {
        void apply(inout bit<32> value, out roll_t rv) {
            if (value == ig_md.epoch) {
                rv = ROLL_SAME;
            } else if (value == ig_md.epoch_prev) {
                value = ig_md.epoch;
                rv = ROLL_NEXT;
            } else {
                value = ig_md.epoch;
                rv = ROLL_GAP;
            }
        }
    };

    /* s2: linear counting: a slot that does not hold the current epoch is new. */
    RegisterAction<bit<32>, slot_idx_t, bit<32>>(flow_slot) flow_slot_visit = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (value != ig_md.epoch) {
                value = ig_md.epoch;
                rv = 1;
            } else {
                rv = 0;
            }
        }
    };

    /* s3: distinct slots in the current flow window (or the closed one's count). */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_current) flows_current_add = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = value + ig_md.flow_inc;
            rv = value;
        }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_current) flows_current_roll = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = ig_md.flow_inc;
        }
    };

    /* s4: the last complete flow window's count. */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_last) flows_last_read = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
        }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_last) flows_last_set = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = ig_md.flows_closed;
            rv = value;
        }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(flows_last) flows_last_clear = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = 0;
            rv = 0;
        }
    };

    /* A drop is decided in several places and counted once, at the end of the
     * ingress (a counter is used from one place per packet on Tofino). */
    action drop_with(bit<3> reason) {
        ig_md.drop_reason = reason;
        ig_md.drop = 1;
    }

    action count_and_drop() {
        drop_counter.count(ig_md.drop_reason);
        ig_dprsr_md.drop_ctl = 1;
    }

    action drop_no_route() {
        drop_with(DROP_NO_ROUTE);
    }

    /* ---- routing: the same actions and parameters as v1model ------------- */
    action forward(bwn_shared_PortId_t port, bit<32> pidx, bit<96> macs) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst_addr = macs[95:48];
        hdr.ethernet.src_addr = macs[47:0];
        hdr.bridge.pidx = pidx[7:0];
    }

    /* The flow hash (and the loss draw) come from the hash unit and the RNG,
     * which feed an action through its table's immediate data (32 bits): so
     * they are computed in the route actions, not in a table of their own. */
    action route(bwn_shared_PortId_t port, bit<32> pidx, bit<32> slot_base, bit<96> macs) {
        forward(port, pidx, macs);
        ig_md.loss_threshold = 0;
        ig_md.flow_hash = flow_hash.get({ hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
                                          ig_md.l4_src_port, ig_md.l4_dst_port });
    }

    /* A route whose port has options: random loss (threshold = round(p *
     * 2^32), 0 = none), and `options` = reservations (bit 31) | AF threshold
     * (bits 30..0, enforced by the traffic manager on Tofino: only != 0 is
     * used here). */
    action route_checked(bwn_shared_PortId_t port, bit<32> pidx, bit<32> slot_base, bit<96> macs,
                         bit<32> loss_threshold, bit<32> options) {
        forward(port, pidx, macs);
        ig_md.loss_threshold = (bit<16>)loss_threshold[31:16];
        ig_md.options = options;
        ig_md.loss_draw = loss_rng.get();
        ig_md.flow_hash = flow_hash.get({ hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
                                          ig_md.l4_src_port, ig_md.l4_dst_port });
    }

    /* One table for every IPv4 packet (v1model splits it in two because BMv2
     * pays for where the destination address is; Tofino does not). */
    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr : lpm @name("dst_addr"); }
        actions = { route; route_checked; drop_no_route; }
        default_action = drop_no_route();
        size = 1024;
    }

    /* ---- windows: the controller's keyless table ---------------------------
     * The same action as on v1model, with its parameters in the units the
     * pipeline compares: window ids are global_tstamp[47:16], units of 64 ticks
     * of 1024 ns (a byte-aligned 32-bit slice: one AND with action data), so
     * `mask` is ~(W - 1) >> 6 and `window_us` is W >> 6, W in ticks, likewise
     * for the flow window (controller/tofino.py's window_config). Windows are
     * at least 64 ticks (the controller's minimum, 64); ids wrap after 3.3 days. */
    action roll_window(bit<32> mask, bit<32> window_us, bit<32> flow_mask, bit<32> flow_window_us) {
        hdr.bridge.win = ig_prsr_md.global_tstamp[47:16] & mask;
        ig_md.win_len = window_us;
        ig_md.epoch = ig_prsr_md.global_tstamp[47:16] & flow_mask;
        ig_md.epoch_len = flow_window_us;
    }

    /* The ids of the windows before this packet's, and the loss draw against
     * the port's threshold: non-zero <=> draw < threshold (a saturating
     * subtraction, since a gateway compares a field with a constant only). */
    action previous_windows_and_loss() {
        ig_md.loss_margin = ig_md.loss_threshold |-| ig_md.loss_draw;
        ig_md.epoch_prev = ig_md.epoch - ig_md.epoch_len;
        hdr.bridge.win_prev = hdr.bridge.win - ig_md.win_len;
    }

    table window_config {
        actions = { roll_window; }
        default_action = roll_window(32w0xFFFFFF00, 256, 32w0xFFFFF800, 2048);  /* 2^14, 2^17 ticks */
        size = 1;
    }

    /* ---- GTCP reservations (edge switch), as on v1model ------------------ */
    action reserved_flow(bit<6> dscp) {
        ig_md.meter_color = reservation_meter.execute();
        ig_md.is_reserved = 1;
        ig_md.reserved_dscp = dscp;
    }

    table reservations {
        key = {
            hdr.ipv4.src_addr  : ternary @name("src_addr");
            hdr.ipv4.dst_addr  : ternary @name("dst_addr");
            hdr.ipv4.protocol  : ternary @name("protocol");
            ig_md.l4_src_port  : ternary @name("src_port");
            ig_md.l4_dst_port  : ternary @name("dst_port");
        }
        /* A direct meter must run in every hit action: NoAction is the miss only. */
        actions = { reserved_flow; @defaultonly NoAction; }
        const default_action = NoAction();
        meters = reservation_meter;
        size = 256;
    }

    apply {
        /* s0: the checksum operands before anything changes; loss draw; flow hash. */
        ig_md.csum_inv_hc = ~hdr.ipv4.hdr_checksum;
        ig_md.frame_bytes = hdr.ipv4.total_len + ETHERNET_BYTES;

        /* The same checks, in the same order, as the v1model parser/ingress. */
        if (!hdr.ipv4.isValid()) {
            drop_with(DROP_NOT_IPV4);  /* hosts use static ARP; docs/wire-format.md */
        } else if (hdr.ipv4.ihl < 5) {
            drop_with(DROP_IPV4_MALFORMED);
        } else if (hdr.ipv4.ttl <= 1) {
            drop_with(DROP_TTL);
        } else if (hdr.udp.isValid() && hdr.udp.dst_port == BWN_UDP_PORT
                   && (!hdr.bwn.isValid() || hdr.udp.length < BWN_MIN_UDP_LENGTH)) {
            drop_with(DROP_BWN_MALFORMED);
        } else if (hdr.ipv4.ihl == 5 && ig_md.ipv4_checksum_err) {
            drop_with(DROP_IPV4_CHECKSUM);  /* RFC 1812 5.2.2 (options: README.md) */
        } else if (ipv4_lpm.apply().hit) {                                   /* s0 */
            window_config.apply();                                           /* s0 */
            hdr.bridge.setValid();
            hdr.bridge.pad = 0;
            previous_windows_and_loss();                                     /* s1 */
            hdr.bridge.rx_before = rx_bytes_add.execute(hdr.bridge.pidx[5:0]);
            if (ig_md.loss_margin != 0) {                                    /* s2 */
                drop_with(DROP_RANDOM_LOSS);
            } else {
                /* ---- EBN's N: flow windows and linear counting (s2..s5) ---- */
                ig_md.flow_state = flow_epoch_roll.execute(hdr.bridge.pidx[5:0]);
                ig_md.flow_inc = 0;
                if (ig_md.has_flow_key == 1) {
                    ig_md.flow_inc = flow_slot_visit.execute(
                        slot_index.get({ hdr.bridge.pidx[5:0], ig_md.flow_hash }));
                }
                if (ig_md.flow_state == ROLL_SAME) {
                    ig_md.flows_cur = flows_current_add.execute(hdr.bridge.pidx[5:0]);
                    ig_md.flows_last = flows_last_read.execute(hdr.bridge.pidx[5:0]);
                } else {
                    /* the closed window's count moves to `last` (0 after a gap) */
                    ig_md.flows_closed = flows_current_roll.execute(hdr.bridge.pidx[5:0]);
                    ig_md.flows_cur = ig_md.flow_inc;
                    if (ig_md.flow_state == ROLL_NEXT) {
                        ig_md.flows_last = flows_last_set.execute(hdr.bridge.pidx[5:0]);
                    } else {
                        ig_md.flows_last = flows_last_clear.execute(hdr.bridge.pidx[5:0]);
                    }
                }
                hdr.bridge.flows = max(ig_md.flows_cur, ig_md.flows_last);

                /* ---- GTCP reservations and Assured Forwarding ------------- */
                if (ig_md.options[31:31] == 1 && hdr.ipv4.ihl == 5) {
                    reservations.apply();                 /* meter and mark (edge) */
                    if (ig_md.is_reserved == 1) {
                        if (ig_md.meter_color == METER_GREEN) {
                            hdr.ipv4.dscp = ig_md.reserved_dscp;
                        } else {
                            hdr.ipv4.dscp = DSCP_AF13;
                        }
                    }
                }
                /* Out-of-profile and best-effort packets on an AF port are
                 * YELLOW: the TM drops them above the port queue's yellow
                 * limit (the AF threshold); AF11 packets are GREEN. */
                if (ig_md.options[30:0] != 0 && hdr.ipv4.dscp != DSCP_AF11) {
                    ig_tm_md.packet_color = COLOR_YELLOW;
                }

                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
                /* The ingress deparser writes the IPv4 checksum. */
                if (hdr.ipv4.ihl == 5) {
                    ig_md.ipv4_csum_full = 1;
                } else {
                    ig_md.ipv4_csum_incr = 1;
                    ig_md.csum_ttl_delta = 0xFEFF;
                }
            }
        }
        /* A miss of ipv4_lpm ran drop_no_route. */
        if (ig_md.drop == 1) {
            count_and_drop();
        }
    }
}

/*************************************************************************
 ********************  I N G R E S S   D E P A R S E R  *****************
 *************************************************************************/

control BwnIngressDeparser(packet_out pkt,
                           inout tna_headers_t hdr,
                           in ingress_metadata_t ig_md,
                           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_checksum_full;
    Checksum() ipv4_checksum_incr;

    apply {
        /* IHL == 5 (verified on arrival): recompute over the whole header. */
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
        /* IHL > 5: the options are never extracted, so the header cannot be
         * summed here: RFC 1624 eq. 3, HC' = ~(~HC + ~m + m'), where the only
         * change is TTL - 1 in the (ttl, protocol) word: ~m + m' = 0xFEFF, the
         * constant v1model adds too (such packets are not re-marked, README.md). */
        if (ig_md.ipv4_csum_incr == 1) {
            hdr.ipv4.hdr_checksum = ipv4_checksum_incr.update({
                ig_md.csum_inv_hc, ig_md.csum_ttl_delta});
        }
        pkt.emit(hdr);  /* bridge (routed packets), then the packet's valid headers */
    }
}

/*************************************************************************
 ************************  E G R E S S   P A R S E R  *******************
 *************************************************************************/

parser BwnEgressParser(packet_in pkt,
                       out tna_headers_t hdr,
                       out egress_metadata_t eg_md,
                       out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        eg_md.port_configured = 0;
        eg_md.rate_k = 0;
        pkt.extract(hdr.bridge);   /* every packet that reaches the egress was routed */
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
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
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

control BwnEgress(inout tna_headers_t hdr,
                  inout egress_metadata_t eg_md,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {

    /* ---- per-port state, indexed by the bridged port index ---------------
     * [T] = telemetry, read over P4Runtime (Tofino has no egress digest). */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) window_id;   /* id of the open window */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) rx_mark;     /* [T] rx_before when the last window closed */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) avail_kbps;  /* [T] AB in force, kb/s (int32 as bits) */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) window_br;   /* [T] BR bytes of the last closed window */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) window_bi;   /* [T] BI cells when it closed */
    Register<bit<32>, port_idx_t>(MAX_PORTS, 0) share_ebn;   /* [T] EBN code of the port's share */
    /* [T] packets that left their port's queue empty behind them (as on
     * v1model: the fidelity monitor's evidence that a port was backlogged). */
    Counter<bit<64>, port_idx_t>(MAX_PORTS, CounterType_t.PACKETS) queue_emptied;

    /* s2: open window, the next one, or after a gap (idle link)? */
    RegisterAction<bit<32>, port_idx_t, roll_t>(window_id) window_roll = {
        void apply(inout bit<32> value, out roll_t rv) {
            if (value == hdr.bridge.win) {
                rv = ROLL_SAME;
            } else if (value == hdr.bridge.win_prev) {
                value = hdr.bridge.win;
                rv = ROLL_NEXT;
            } else {
                value = hdr.bridge.win;
                rv = ROLL_GAP;
            }
        }
    };

    /* s3: a window closed: BR = bytes received since the last close. */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(rx_mark) rx_mark_close = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = hdr.bridge.rx_before - value;
            value = hdr.bridge.rx_before;
        }
    };

    RegisterAction<bit<32>, port_idx_t, bit<32>>(window_br) window_br_write = {
        void apply(inout bit<32> value) { value = eg_md.br_bytes; }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(window_bi) window_bi_write = {
        void apply(inout bit<32> value) { value = (bit<32>)eg_intr_md.deq_qdepth; }
    };

    /* s8: AB is written when a window closes and read by every DATA packet. */
    RegisterAction<bit<32>, port_idx_t, bit<32>>(avail_kbps) avail_write = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = (bit<32>)eg_md.ab_kbps;
            rv = value;
        }
    };
    RegisterAction<bit<32>, port_idx_t, bit<32>>(avail_kbps) avail_read = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
        }
    };

    RegisterAction<bit<32>, port_idx_t, bit<32>>(share_ebn) share_ebn_write = {
        void apply(inout bit<32> value) { value = (bit<32>)eg_md.ebn; }
    };

    /* The 19-bit queue depth as a 32-bit value, through the hash unit
     * (identity): ALU arithmetic on the intrinsic field itself would tie its
     * container to the 32-bit arithmetic that follows. A hash reaches an action
     * through a keyed table's immediate data, so port_config's actions do it. */
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) queue_cells;

    /* ---- the port's capacity: the same actions as v1model ---------------- *
     * IC as bytes per window of 2^K ticks (controller/tofino.py), as kb/s, and
     * log7; K picks the bytes -> kb/s conversion (ab_to_kbps). */
#define SET_PORT(K) \
    action set_port_##K(bit<32> cap_bytes, bit<32> cap_kbps, bit<16> cap_log7_r) { \
        eg_md.port_configured = 1; \
        eg_md.cap_bytes = cap_bytes; \
        eg_md.cap_kbps = cap_kbps; \
        eg_md.cap_hi = cap_log7_r[11:4]; \
        eg_md.cap_frac = (bit<8>)cap_log7_r[3:0]; \
        eg_md.rate_k = K; \
        eg_md.queue_cells = queue_cells.get({ eg_intr_md.deq_qdepth }); \
    }
    SET_PORT(6)  SET_PORT(7)  SET_PORT(8)  SET_PORT(9)  SET_PORT(10)
    SET_PORT(11) SET_PORT(12) SET_PORT(13) SET_PORT(14) SET_PORT(15)
    SET_PORT(16) SET_PORT(17) SET_PORT(18) SET_PORT(19) SET_PORT(20)
    SET_PORT(21) SET_PORT(22) SET_PORT(23) SET_PORT(24)

    action port_unconfigured() {
        eg_md.port_configured = 0;
    }

    table port_config {
        key = { eg_intr_md.egress_port : exact @name("egress_port"); }
        actions = {
            set_port_6;  set_port_7;  set_port_8;  set_port_9;  set_port_10;
            set_port_11; set_port_12; set_port_13; set_port_14; set_port_15;
            set_port_16; set_port_17; set_port_18; set_port_19; set_port_20;
            set_port_21; set_port_22; set_port_23; set_port_24;
            port_unconfigured;
        }
        default_action = port_unconfigured();
        size = MAX_PORTS;
    }

    /* ---- bytes per window of 2^K ticks -> kb/s, without a multiplier ------
     * kb/s = x * 8 bit / (2^K * 1.024 us) * 1000 = x * 2^(13-K) * 0.95367...;
     * y = x * 2^(13-K) by a constant shift, then y - y/32 - y/64 = 0.953125 y
     * (0.06 % below the exact factor; README.md). Arithmetic shifts: AB may be
     * negative. */
#define KBPS_L(K) \
    action kbps_##K() { \
        eg_md.ab_y  = eg_md.ab_bytes << (13 - K); \
        eg_md.ab_y5 = eg_md.ab_bytes << (8 - K); \
        eg_md.ab_y6 = eg_md.ab_bytes << (7 - K); \
    }
#define KBPS_M(K) \
    action kbps_##K() { \
        eg_md.ab_y  = eg_md.ab_bytes << (13 - K); \
        eg_md.ab_y5 = eg_md.ab_bytes >> (K - 8); \
        eg_md.ab_y6 = eg_md.ab_bytes >> (K - 7); \
    }
#define KBPS_R(K) \
    action kbps_##K() { \
        eg_md.ab_y  = eg_md.ab_bytes >> (K - 13); \
        eg_md.ab_y5 = eg_md.ab_bytes >> (K - 8); \
        eg_md.ab_y6 = eg_md.ab_bytes >> (K - 7); \
    }
    KBPS_L(6) KBPS_L(7)
    action kbps_8() {
        eg_md.ab_y  = eg_md.ab_bytes << 5;
        eg_md.ab_y5 = eg_md.ab_bytes;
        eg_md.ab_y6 = eg_md.ab_bytes >> 1;
    }
    KBPS_M(9)  KBPS_M(10) KBPS_M(11) KBPS_M(12)
    action kbps_13() {
        eg_md.ab_y  = eg_md.ab_bytes;
        eg_md.ab_y5 = eg_md.ab_bytes >> 5;
        eg_md.ab_y6 = eg_md.ab_bytes >> 6;
    }
    KBPS_R(14) KBPS_R(15) KBPS_R(16) KBPS_R(17) KBPS_R(18) KBPS_R(19)
    KBPS_R(20) KBPS_R(21) KBPS_R(22) KBPS_R(23) KBPS_R(24)

    table ab_to_kbps {
        key = { eg_md.rate_k : exact; }
        actions = {
            kbps_6;  kbps_7;  kbps_8;  kbps_9;  kbps_10; kbps_11; kbps_12;
            kbps_13; kbps_14; kbps_15; kbps_16; kbps_17; kbps_18; kbps_19;
            kbps_20; kbps_21; kbps_22; kbps_23; kbps_24; NoAction;
        }
        const entries = {
            6: kbps_6();   7: kbps_7();   8: kbps_8();   9: kbps_9();   10: kbps_10();
            11: kbps_11(); 12: kbps_12(); 13: kbps_13(); 14: kbps_14(); 15: kbps_15();
            16: kbps_16(); 17: kbps_17(); 18: kbps_18(); 19: kbps_19(); 20: kbps_20();
            21: kbps_21(); 22: kbps_22(); 23: kbps_23(); 24: kbps_24();
        }
        const default_action = NoAction();
        size = 32;
    }

    /* EBN: log7 of the linear-counting estimate of N (docs/dataplane.md,
     * "Active flows"); same table and action names as v1model. */
    action set_share(bit<16> log7) {
        eg_md.n_hi = log7[11:4];
        eg_md.n_frac = (bit<8>)log7[3:0];
    }

    table flows_log {
        key = { hdr.bridge.flows : exact @name("flows"); }
        actions = { set_share; }
        default_action = set_share(0);
        size = FLOW_SLOTS + 1;
    }

    /* ---- the steps of the egress, one stage each -------------------------- */

    /* BI = queue cells * 80 = *64 + *16.
     * The EBN code, max((log7(C) + 8 - log7(N)) >> 4, 0) as on v1model, in
     * 8-bit pieces (the code is 8 bits; 16-bit values feeding an 8-bit header
     * field do not fit Tofino's PHV here): with log7(C) + 8 = 16 ch + cf and
     * log7(N) = 16 nh + nf, the code is ch - nh, less 1 when nf > cf,
     * saturated at 0. */
    action bi_parts_and_borrow() {
        eg_md.bi_hi = eg_md.queue_cells << 6;
        eg_md.bi_lo = eg_md.queue_cells << 4;
        eg_md.n_borrow = eg_md.n_frac |-| eg_md.cap_frac;
    }

    action bi_and_code() {
        eg_md.bi_bytes = eg_md.bi_hi + eg_md.bi_lo;
        eg_md.ebn = eg_md.cap_hi |-| eg_md.n_hi;
    }

    action code_borrow() {
        eg_md.ebn = eg_md.ebn |-| 1;
    }

    action cap_minus_bi() {
        eg_md.cap_minus_bi = eg_md.cap_bytes - eg_md.bi_bytes;
    }

    action idle_window() {
        eg_md.br_bytes = 0;
    }

    action avail_bytes() {
        eg_md.ab_bytes = (int<32>)eg_md.cap_minus_bi - (int<32>)eg_md.br_bytes;
    }

    action kbps_first_term() {
        eg_md.ab_z = eg_md.ab_y - eg_md.ab_y5;
    }

    action kbps_second_term() {
        eg_md.ab_kbps = eg_md.ab_z - eg_md.ab_y6;
    }

    /* BWN DATA on a configured port: min() of each field, hop count + 1
     * (saturating at 255), UDP checksum 0 (docs/wire-format.md). */
    action stamp() {
        hdr.bwn.hop_count = hdr.bwn.hop_count |+| 1;
        hdr.bwn.narrow_kbps = min(hdr.bwn.narrow_kbps, eg_md.cap_kbps);
        hdr.bwn.ebn_code = min(hdr.bwn.ebn_code, eg_md.ebn);
        hdr.bwn.tight_kbps = (bit<32>)min((int<32>)hdr.bwn.tight_kbps, (int<32>)eg_md.ab_now);
        hdr.udp.checksum = 0;
    }

    apply {
        port_idx_t pidx = hdr.bridge.pidx[5:0];
        bool is_data = hdr.bwn.isValid() && hdr.bwn.version == BWN_VERSION
                       && hdr.bwn.kind == BWN_KIND_DATA;

        /* Each step that needs the one before it is an action of its own:
         * bf-p4c merges consecutive statements into one action, and an action
         * runs in one stage. */
        port_config.apply();                                             /* s0 */
        if (eg_intr_md.deq_qdepth == 0) {
            queue_emptied.count(pidx);
        }
        flows_log.apply();
        bi_parts_and_borrow();                                           /* s1 */
        bi_and_code();                                                   /* s2 */
        eg_md.win_state = window_roll.execute(pidx);
        cap_minus_bi();                                                  /* s3 */
        if (eg_md.n_borrow != 0) {
            code_borrow();                                               /* s3 */
        }
        share_ebn_write.execute(pidx);                                   /* s4 */

        if (eg_md.win_state != ROLL_SAME) {
            /* ---- a window closed: OBP eq. 6 (on every port, as on v1model, so
             * that a port configured later starts from a closed window) ------- */
            eg_md.br_bytes = rx_mark_close.execute(pidx);                /* s3 */
            if (eg_md.win_state == ROLL_GAP) {
                idle_window();                    /* whole windows without a packet */
            }
            window_br_write.execute(pidx);
            window_bi_write.execute(pidx);
            avail_bytes();                                               /* s4/5 */
            ab_to_kbps.apply();                                          /* s6 */
            kbps_first_term();                                           /* s7 */
            kbps_second_term();                                          /* s8 */
            eg_md.ab_now = avail_write.execute(pidx);                    /* s9 */
        } else if (is_data) {
            eg_md.ab_now = avail_read.execute(pidx);
        }
        if (eg_md.port_configured == 1) {
            if (is_data) {
                stamp();
            }
        }
        hdr.bridge.setInvalid();
    }
}

/*************************************************************************
 *********************  E G R E S S   D E P A R S E R  *******************
 *************************************************************************/

control BwnEgressDeparser(packet_out pkt,
                          inout tna_headers_t hdr,
                          in egress_metadata_t eg_md,
                          in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply {
        pkt.emit(hdr);  /* the bridge header is invalid by now */
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
