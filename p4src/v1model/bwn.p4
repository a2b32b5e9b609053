/* -*- P4_16 -*- */
/*
 * bwn.p4 (v1model, BMv2 simple_switch_grpc)
 *
 * A router that tells end hosts how much bandwidth the network has:
 *   - EBN (Dutta & Zhang): per-flow fair share of each egress link, stamped as
 *     an 8-bit log code, the minimum along the path;
 *   - OBP (Loureiro & Monteiro): "narrow link" (min capacity) and "tight link"
 *     (min available bandwidth, AB = IC - BR - BI, OBP eq. 6).
 * plus what the papers' scenarios need from a switch: IPv4 LPM forwarding,
 * per-port random loss (lossy wireless links: SARBE, DFT) and per-flow meters
 * that serve reserved traffic from a priority queue (GTCP).
 *
 * Arithmetic is Tofino-friendly: no division, no multiplication or shift by a
 * runtime value. Rates come from power-of-two measurement windows (aligned by
 * a mask); bytes-per-window to rate conversion and log2 are lookup tables the
 * controller fills (controller/dataplane_math.py). docs/dataplane.md derives
 * every approximation and its error.
 */
#include <core.p4>
#include <v1model.p4>

#include "../shared/define.p4"
#include "../shared/headers.p4"

struct metadata_t {
    bit<32>  port_idx;
    /* port_config */
    bit<1>   port_configured;
    qkbps_t  cap_qkbps;
    bit<32>  cap_kbps;
    log7_t   cap_log7;
    /* length and queue -> rate conversion */
    qkbps_t  len_hi_qkbps;
    qkbps_t  len_lo_qkbps;
    qkbps_t  q_hi_qkbps;
    qkbps_t  q_lo_qkbps;
    /* window configuration */
    bit<48>  window_mask;
    bit<32>  window_us;
    bit<48>  flow_window_mask;
    bit<32>  flow_window_us;
    /* flow hashing */
    bit<16>  l4_src_port;
    bit<16>  l4_dst_port;
    bit<16>  flows_n;
    log7_t   flows_log7;
    /* ingress */
    bit<32>  loss_threshold;
    bit<2>   meter_color;
    bit<6>   reserved_dscp;
    bit<1>   is_reserved;
}

/*************************************************************************
 *  Per-port measurements shared by egress (which writes them when a window
 *  closes) and ingress (which reports them to the controller in a digest:
 *  BMv2's P4Runtime server cannot read registers, and v1model digests can only
 *  be sent from ingress). Indexed by egress port.
 *************************************************************************/
register<bit<32>>(MAX_PORTS)  window_id;        /* (now & window_mask) | 1 of the current window */
register<qkbps_t>(MAX_PORTS)  last_rate_qkbps;  /* rate of the last complete window (BR) */
register<bit<32>>(MAX_PORTS)  queue_pkts;       /* queue at the start of the current window, packets */
register<bit<32>>(MAX_PORTS)  avail_qkbps;      /* AB = IC - BR - BI (int32 as bits) */
register<qkbps_t>(MAX_PORTS)  capacity_qkbps;   /* IC used for the last AB */
register<bit<32>>(MAX_PORTS)  flows_current;    /* distinct hash slots seen this flow window */
register<bit<32>>(MAX_PORTS)  flows_last;       /* ... in the last complete flow window */
register<bit<32>>(MAX_PORTS)  share_ebn;        /* EBN code of the port's per-flow share */

/* One telemetry report per port and measurement window (P4Runtime digest). */
struct port_telemetry_t {
    bit<16> port;
    bit<32> window_id;        /* switch time of the window start, us (| 1) */
    bit<32> capacity_qkbps;
    bit<32> rate_qkbps;
    bit<32> avail_qkbps;      /* two's complement */
    bit<32> queue_pkts;
    bit<32> flows;
    bit<32> share_ebn;
}

/*************************************************************************
 *  Parser
 *************************************************************************/
parser BwnParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    /* Only IPv4 without options and not fragmented is parsed beyond IP:
     * options and fragments are routed but never stamped. */
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, 0, IP_PROTO_UDP): parse_udp;
            (5, 0, 0, IP_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            BWN_UDP_PORT: parse_bwn;
            default: accept;
        }
    }

    /* A truncated BWN header ends parsing with error.PacketTooShort; the
     * ingress drops it (docs/wire-format.md, "Packets that are not well formed"). */
    state parse_bwn {
        packet.extract(hdr.bwn);
        transition accept;
    }
}

control BwnVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }  /* IPv4 checksums are updated incrementally, not verified */
}

/* RFC 1624 eq. 3: HC' = ~(~HC + ~m + m'), one's complement, end-around carry. */
bit<16> csum16_replace(in bit<16> hc, in bit<16> old_word, in bit<16> new_word) {
    bit<32> sum = (bit<32>)(~hc) + (bit<32>)(~old_word) + (bit<32>)new_word;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return ~(sum[15:0]);
}

/*************************************************************************
 *  Ingress: forwarding, random loss, reservation meters
 *************************************************************************/
control BwnIngress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    counter(DROP_REASONS, CounterType.packets) drop_counter;
    direct_meter<bit<2>>(MeterType.bytes) reservation_meter;
    register<bit<32>>(MAX_PORTS) reported_window;  /* last window reported per port */

    action drop_with(bit<32> reason) {
        drop_counter.count(reason);
        mark_to_drop(standard_metadata);
    }

    action drop_no_route() {
        drop_with(DROP_NO_ROUTE);
    }

    /* Next hop: egress port and the Ethernet addresses of that hop. */
    action route(PortId_t port, mac_addr_t dst_mac, mac_addr_t src_mac) {
        standard_metadata.egress_spec = port;
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
     * threshold = round(p * 2^32) (resolution 2.3e-10, so 0.001 % is exact enough). */
    action set_loss(bit<32> threshold) {
        meta.loss_threshold = threshold;
    }

    table port_loss {
        key = { standard_metadata.egress_spec : exact @name("egress_port"); }
        actions = { set_loss; NoAction; }
        default_action = NoAction();
        size = MAX_PORTS;
    }

    /* GTCP reservations: conforming (GREEN) packets of a reserved flow are marked
     * with `dscp` and served from the high-priority queue; the excess is best effort. */
    action reserved_flow(bit<6> dscp) {
        reservation_meter.read(meta.meter_color);
        meta.is_reserved = 1;
        meta.reserved_dscp = dscp;
    }

    action best_effort() {
        meta.is_reserved = 0;
    }

    table reservations {
        key = {
            hdr.ipv4.src_addr : ternary @name("src_addr");
            hdr.ipv4.dst_addr : ternary @name("dst_addr");
            hdr.ipv4.protocol : ternary @name("protocol");
            meta.l4_src_port  : ternary @name("src_port");
            meta.l4_dst_port  : ternary @name("dst_port");
        }
        actions = { reserved_flow; best_effort; }
        const default_action = best_effort();
        meters = reservation_meter;
        size = 256;
    }

    apply {
        if (!hdr.ipv4.isValid()) {
            drop_with(DROP_NOT_IPV4);  /* hosts use static ARP; see docs/wire-format.md */
            return;
        }
        if (hdr.ipv4.ihl < 5) {
            drop_with(DROP_IPV4_MALFORMED);
            return;
        }
        if (standard_metadata.parser_error == error.PacketTooShort
                && hdr.udp.isValid() && !hdr.bwn.isValid()) {
            /* The parser only reaches parse_bwn for UDP to BWN_UDP_PORT. */
            drop_with(DROP_BWN_MALFORMED);
            return;
        }
        if (hdr.ipv4.ttl <= 1) {
            drop_with(DROP_TTL);
            return;
        }
        if (ipv4_lpm.apply().miss) {
            return;  /* counted by drop_no_route */
        }

        meta.loss_threshold = 0;
        port_loss.apply();
        if (meta.loss_threshold != 0) {
            bit<32> draw;
            random(draw, 32w0, 32w0xFFFFFFFF);
            if (draw < meta.loss_threshold) {
                drop_with(DROP_RANDOM_LOSS);
                return;
            }
        }

        /* Telemetry: the first packet towards a port after its window closed
         * reports the closed window's measurements. */
        bit<32> tport = (bit<32>)(standard_metadata.egress_spec & PORT_INDEX_MASK);
        bit<32> closed_window;
        bit<32> reported;
        window_id.read(closed_window, tport);
        reported_window.read(reported, tport);
        if (closed_window != reported) {
            reported_window.write(tport, closed_window);
            port_telemetry_t t;
            t.port = (bit<16>)tport;
            t.window_id = closed_window;
            capacity_qkbps.read(t.capacity_qkbps, tport);
            last_rate_qkbps.read(t.rate_qkbps, tport);
            avail_qkbps.read(t.avail_qkbps, tport);
            queue_pkts.read(t.queue_pkts, tport);
            bit<32> n_cur;
            bit<32> n_last;
            flows_current.read(n_cur, tport);
            flows_last.read(n_last, tport);
            t.flows = (n_cur > n_last) ? n_cur : n_last;
            share_ebn.read(t.share_ebn, tport);
            digest<port_telemetry_t>(1, t);
        }

        if (hdr.udp.isValid()) {
            meta.l4_src_port = hdr.udp.src_port;
            meta.l4_dst_port = hdr.udp.dst_port;
        } else if (hdr.tcp.isValid()) {
            meta.l4_src_port = hdr.tcp.src_port;
            meta.l4_dst_port = hdr.tcp.dst_port;
        }
        reservations.apply();

        bit<16> old_tos_word = hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn;
        bit<16> old_ttl_word = hdr.ipv4.ttl ++ hdr.ipv4.protocol;
        if (meta.is_reserved == 1) {
            if (meta.meter_color == METER_GREEN) {
                hdr.ipv4.dscp = meta.reserved_dscp;
                standard_metadata.priority = PRIO_RESERVED;
            } else {
                hdr.ipv4.dscp = 0;  /* excess of a reservation: best effort */
                standard_metadata.priority = PRIO_BEST_EFFORT;
            }
        }
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        bit<16> new_tos_word = hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn;
        bit<16> new_ttl_word = hdr.ipv4.ttl ++ hdr.ipv4.protocol;
        hdr.ipv4.hdr_checksum = csum16_replace(hdr.ipv4.hdr_checksum, old_ttl_word, new_ttl_word);
        hdr.ipv4.hdr_checksum = csum16_replace(hdr.ipv4.hdr_checksum, old_tos_word, new_tos_word);
    }
}

/*************************************************************************
 *  Egress: per-port measurement (every packet) and BWN stamping (DATA)
 *************************************************************************/
control BwnEgress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    /* Per-port state of the egress only, indexed by egress port. */
    register<qkbps_t>(MAX_PORTS)  window_qkbps;    /* bytes of the current window, as a rate */
    register<qkbps_t>(MAX_PORTS)  queue_qkbps;     /* queue at the start of the current window (BI) */
    register<bit<32>>(MAX_PORTS)  flow_epoch;      /* (now & flow_window_mask) | 1 */
    register<bit<32>>(MAX_PORTS * FLOW_SLOTS) flow_slot;  /* epoch in which a slot was last seen */

    /* ---- configuration set by the controller ---------------------------- */
    action set_window(bit<48> mask, bit<32> window_us,
                      bit<48> flow_mask, bit<32> flow_window_us) {
        meta.window_mask = mask;
        meta.window_us = window_us;
        meta.flow_window_mask = flow_mask;
        meta.flow_window_us = flow_window_us;
    }

    /* Keyless: the controller modifies the default action. Defaults: 16.384 ms
     * rate window, 131.072 ms flow window. */
    table window_config {
        actions = { set_window; }
        default_action = set_window(48w0xFFFFFFFFC000, 16384, 48w0xFFFFFFFE0000, 131072);
    }

    action set_port(qkbps_t cap_qkbps, bit<32> cap_kbps, log7_t cap_log7) {
        meta.port_configured = 1;
        meta.cap_qkbps = cap_qkbps;
        meta.cap_kbps = cap_kbps;
        meta.cap_log7 = cap_log7;
    }

    table port_config {
        key = { standard_metadata.egress_port : exact @name("egress_port"); }
        actions = { set_port; NoAction; }
        default_action = NoAction();
        size = MAX_PORTS;
    }

    /* rate(x) = hi[x >> 5] + lo[x & 31], with the window's bytes->qkbps factor
     * folded in by the controller. */
    action set_len_hi(qkbps_t qkbps) { meta.len_hi_qkbps = qkbps; }
    action set_len_lo(qkbps_t qkbps) { meta.len_lo_qkbps = qkbps; }
    action set_q_hi(qkbps_t qkbps) { meta.q_hi_qkbps = qkbps; }
    action set_q_lo(qkbps_t qkbps) { meta.q_lo_qkbps = qkbps; }

    table len_rate_hi {
        key = { standard_metadata.packet_length[15:5] : exact @name("len_hi"); }
        actions = { set_len_hi; }
        default_action = set_len_hi(0);
        size = LUT_HI_SIZE;
    }
    table len_rate_lo {
        key = { standard_metadata.packet_length[4:0] : exact @name("len_lo"); }
        actions = { set_len_lo; }
        default_action = set_len_lo(0);
        size = LUT_LO_SIZE;
    }
    table queue_rate_hi {
        key = { standard_metadata.deq_qdepth[18:5] : exact @name("q_hi"); }
        actions = { set_q_hi; }
        default_action = set_q_hi(0);
        size = LUT_HI_SIZE;
    }
    table queue_rate_lo {
        key = { standard_metadata.deq_qdepth[4:0] : exact @name("q_lo"); }
        actions = { set_q_lo; }
        default_action = set_q_lo(0);
        size = LUT_LO_SIZE;
    }

    /* log7 of the linear-counting estimate of the number of flows, from the
     * number of occupied hash slots (docs/dataplane.md, "Active flows"). */
    action set_flows_log7(log7_t log7) { meta.flows_log7 = log7; }

    table flows_log {
        key = { meta.flows_n : exact @name("flows"); }
        actions = { set_flows_log7; }
        default_action = set_flows_log7(0);
        size = FLOW_SLOTS + 1;
    }

    apply {
        meta.port_idx = (bit<32>)(standard_metadata.egress_port & PORT_INDEX_MASK);
        bit<48> now = standard_metadata.egress_global_timestamp;
        window_config.apply();
        port_config.apply();

        /* ---- OBP: bytes per window, queue at window start, AB (eq. 6) ---- */
        len_rate_hi.apply();
        len_rate_lo.apply();
        qkbps_t pkt_qkbps = meta.len_hi_qkbps + meta.len_lo_qkbps;

        bit<32> win = (bit<32>)(now & meta.window_mask) | 1;
        bit<32> win_prev;
        window_id.read(win_prev, meta.port_idx);
        if (win != win_prev) {
            /* First packet of a new window: close the previous one. A window
             * with no packets at all in between means the link was idle. */
            qkbps_t closed;
            window_qkbps.read(closed, meta.port_idx);
            qkbps_t br = (win - win_prev == meta.window_us) ? closed : 32w0;
            queue_rate_hi.apply();
            queue_rate_lo.apply();
            qkbps_t bi = meta.q_hi_qkbps + meta.q_lo_qkbps;
            sqkbps_t ab = (sqkbps_t)meta.cap_qkbps - (sqkbps_t)br - (sqkbps_t)bi;
            last_rate_qkbps.write(meta.port_idx, br);
            queue_qkbps.write(meta.port_idx, bi);
            queue_pkts.write(meta.port_idx, (bit<32>)standard_metadata.deq_qdepth);
            avail_qkbps.write(meta.port_idx, (bit<32>)ab);
            capacity_qkbps.write(meta.port_idx, meta.cap_qkbps);
            window_qkbps.write(meta.port_idx, pkt_qkbps);
            window_id.write(meta.port_idx, win);
        } else {
            qkbps_t acc;
            window_qkbps.read(acc, meta.port_idx);
            window_qkbps.write(meta.port_idx, acc + pkt_qkbps);
        }

        /* ---- EBN: distinct active flows per port (linear counting) ------- */
        bit<32> epoch = (bit<32>)(now & meta.flow_window_mask) | 1;
        bit<32> epoch_prev;
        bit<32> n_cur;
        bit<32> n_last;
        flow_epoch.read(epoch_prev, meta.port_idx);
        flows_current.read(n_cur, meta.port_idx);
        flows_last.read(n_last, meta.port_idx);
        if (epoch != epoch_prev) {
            n_last = (epoch - epoch_prev == meta.flow_window_us) ? n_cur : 32w0;
            n_cur = 0;
            flows_last.write(meta.port_idx, n_last);
            flow_epoch.write(meta.port_idx, epoch);
        }
        if (hdr.ipv4.isValid()) {
            bit<32> slot;
            bit<16> sport = 0;
            bit<16> dport = 0;
            if (hdr.udp.isValid()) {
                sport = hdr.udp.src_port;
                dport = hdr.udp.dst_port;
            } else if (hdr.tcp.isValid()) {
                sport = hdr.tcp.src_port;
                dport = hdr.tcp.dst_port;
            }
            hash(slot, HashAlgorithm.crc32, 32w0,
                 { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol, sport, dport },
                 (bit<32>)FLOW_SLOTS);
            bit<32> slot_idx = (meta.port_idx << FLOW_SLOTS_LOG2) | slot;
            bit<32> seen_in;
            flow_slot.read(seen_in, slot_idx);
            if (seen_in != epoch) {
                flow_slot.write(slot_idx, epoch);
                n_cur = n_cur + 1;
            }
        }
        flows_current.write(meta.port_idx, n_cur);

        /* ---- EBN share = C / N  ->  log7(C) - log7(N), rounded to 1/8 octave */
        bit<32> n = (n_cur > n_last) ? n_cur : n_last;
        meta.flows_n = (n > FLOW_SLOTS) ? (bit<16>)FLOW_SLOTS : n[15:0];
        flows_log.apply();
        bit<16> share_log7 = (meta.cap_log7 > meta.flows_log7) ? meta.cap_log7 - meta.flows_log7 : 0;
        bit<16> code = (share_log7 + 8) >> LOG7_TO_EBN_SHIFT;
        bit<8> ebn = (code > EBN_CODE_MAX) ? (bit<8>)EBN_CODE_MAX : code[7:0];
        share_ebn.write(meta.port_idx, (bit<32>)ebn);

        /* ---- stamp DATA packets ------------------------------------------ */
        if (hdr.bwn.isValid() && hdr.bwn.version == BWN_VERSION
                && hdr.bwn.kind == BWN_KIND_DATA && meta.port_configured == 1) {
            if (ebn < hdr.bwn.ebn_code) {
                hdr.bwn.ebn_code = ebn;
            }
            /* OBP narrow link: min capacity. */
            if (meta.cap_kbps < hdr.bwn.narrow_kbps) {
                hdr.bwn.narrow_kbps = meta.cap_kbps;
            }
            /* OBP tight link: min available bandwidth (signed). */
            bit<32> ab_bits;
            avail_qkbps.read(ab_bits, meta.port_idx);
            int<32> ab_kbps = ((int<32>)ab_bits) >> QKBPS_SHIFT;
            if (ab_kbps < (int<32>)hdr.bwn.tight_kbps) {
                hdr.bwn.tight_kbps = (bit<32>)ab_kbps;
            }
            if (hdr.bwn.hop_count != 255) {
                hdr.bwn.hop_count = hdr.bwn.hop_count + 1;
            }
            hdr.udp.checksum = 0;  /* the UDP checksum rule, docs/wire-format.md */
        }
    }
}

control BwnComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }  /* done incrementally in ingress (RFC 1624), options included */
}

control BwnDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
        packet.emit(hdr.bwn);
    }
}

V1Switch(BwnParser(), BwnVerifyChecksum(), BwnIngress(), BwnEgress(),
         BwnComputeChecksum(), BwnDeparser()) main;
