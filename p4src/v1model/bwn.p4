/* -*- P4_16 -*- */
/*
 * bwn.p4 (v1model, BMv2 simple_switch_grpc)
 *
 * A router that tells end hosts how much bandwidth the network has:
 *   - EBN (Dutta & Zhang): per-flow fair share of each egress link, stamped as
 *     an 8-bit log code, the minimum along the path;
 *   - OBP (Loureiro & Monteiro): "narrow link" (min capacity) and "tight link"
 *     (min available bandwidth, AB = IC - BR - BI, OBP eq. 6),
 * plus what the papers' scenarios need from a switch: IPv4 LPM forwarding,
 * per-port random loss (lossy wireless links: SARBE, DFT), and GTCP
 * reservations as RFC 2597 Assured Forwarding (meter and mark at the edge,
 * drop out-of-profile traffic first at a congested port, never reorder a flow).
 *
 * Arithmetic is Tofino-friendly: no division, no multiplication or shift by a
 * runtime value. Measurement windows are powers of two (aligned by a mask),
 * byte counts are exact, and the conversions to kb/s happen once per window,
 * with constant shifts or controller lookup tables (docs/dataplane.md derives
 * every approximation and its error).
 *
 * Cost on BMv2 (docs/dataplane.md, "Per-packet cost on BMv2"): BMv2 interprets
 * the program, and what a packet pays for is, above all, every field it writes
 * (about 700 instructions each, with the fast build: BMv2 keeps values as GMP
 * integers and re-serialises a field on every write), every operator it
 * evaluates (about 200), every header it has (validity is reset for every
 * packet) and every metadata field, which BMv2 zeroes for every packet. So:
 *   - a packet's whole common path is the one action of a routing table; per
 *     port state the packet needs is packed into one register (one read, one
 *     write), indexed by the port itself, and action parameters carry
 *     everything else;
 *   - the working values are a handful of wide fields, reused by the rare
 *     paths, in a header that is never valid (`work_t`): BMv2 zeroes metadata
 *     for every packet, a header's fields never; one metadata field is left,
 *     for what needs a zero or a table key;
 *   - the common path's test for the rare paths reads two fields and the
 *     bottom of the port state (a dropped or non-flow packet's values make
 *     it false), so it needs no validity or drop test;
 *   - the rare paths (a measurement window closes, a flow is new in its flow
 *     window, a port has options) are branches taken only when needed;
 *   - values that a switch changes together are one field (TTL and the IPv4
 *     checksum; the whole BWN header and UDP's tail), and a stamp is one
 *     expression of masks and `?:` over bits laid out alike in the packet and
 *     in the stamp register;
 *   - no `return`, no `?:` in apply blocks, no expression handed to an extern
 *     and no slice as a table key: p4c turns each of them into more metadata
 *     and more tables on BMv2.
 */
#include <core.p4>
/* v1model's typed indices (register<T, I>, counter<I>): per-port state is
 * indexed by the port itself (PortId_t), with no cast and so no temporary. */
#define V1MODEL_VERSION 20200408
#include <v1model.p4>

#define BWN_ARCH_DECLARES_PORT_ID   /* v1model declares PortId_t (bit<9>) */
#include "../shared/define.p4"
#include "../shared/headers.p4"

/* Headers as BMv2 handles them cheaply: the same bytes as p4src/shared's
 * headers (docs/wire-format.md), with fields that are always written together
 * merged into one, so that one write does (BMv2 pays per field written, per
 * field extracted and per field emitted):
 *   - Ethernet: both MAC addresses (rewritten by every route);
 *   - IPv4 in two parts: the head, then either the flow key (TCP and UDP
 *     without IPv4 options: addresses and ports, one header that BMv2 hashes
 *     without copying it) or only the addresses (everything else); the head
 *     as two fields: the 64 bits no switch writes on the common path, and TTL
 *     ++ protocol ++ checksum (one write decrements the TTL and updates the
 *     checksum);
 *   - UDP's length and checksum and the whole BWN header: one field (a stamp
 *     writes hop count, EBN code, narrow and tight link and zeroes the UDP
 *     checksum at once; the echo is never touched by a switch). */
header ethernet_v1_t {
    bit<96> macs;            /* dst_addr ++ src_addr */
    bit<16> ether_type;
}

header bwn_v1_t {
    bit<224> all;            /* UDP length ++ checksum ++ the BWN header: layout at BWN_* */
}

/* IPv4's addresses and its options (up to the 40 bytes IHL allows), for every
 * packet that is not TCP or UDP without options: one header, so one validity
 * to reset per packet. The options are parsed only to verify the header
 * checksum (RFC 1812 sec. 5.2.2), never changed. */
header ipv4_rest_t {
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
    varbit<320> options;
}

/* IPv4's first 12 bytes (the same bytes as ipv4_head_t):
 *   head      = version[63:60] ++ ihl[59:56] ++ dscp[55:50] ++ ecn[49:48]
 *               ++ total_len[47:32] ++ identification[31:16]
 *               ++ flags[15:13] (reserved, DF, MF) ++ frag_offset[12:0];
 *   ttl_csum  = ttl[31:24] ++ protocol[23:16] ++ hdr_checksum[15:0]. */
header ipv4_head_v1_t {
    bit<64> head;
    bit<32> ttl_csum;
}
#define IP_IHL(h)      h.head[59:56]
#define IP_DSCP(h)     h.head[55:50]
#define IP_TOS_WORD(h) h.head[63:48]   /* version ++ ihl ++ dscp ++ ecn */
#define IP_PROTO(h)    h.ttl_csum[23:16]
#define IP_CSUM(h)     h.ttl_csum[15:0]
#define IHL_MASK         64w0x0F00000000000000
#define IHL_0_3_MASK     64w0x0C00000000000000   /* IHL & 0xC == 0: IHL 0..3 */
#define IHL_4            64w0x0400000000000000
#define IHL_5            64w0x0500000000000000
#define IHL_MF_FRAG_MASK 64w0x0F00000000003FFF   /* IHL, MF and the fragment offset */
#define PROTO_MASK       32w0x00FF0000           /* the protocol in ttl_csum */
#define PROTO_UDP_WORD   32w0x00110000
#define PROTO_TCP_WORD   32w0x00060000

/* The working values of a packet. A header that is never valid nor emitted:
 * BMv2 zeroes every metadata field for every packet, but of a header it only
 * resets the validity, so these cost no reset (about 3 900 instructions a packet
 * fewer, counted with callgrind: docs/dataplane.md). P4-16 leaves writes to a field of an invalid
 * header to the target; BMv2 performs them, and the Tofino program keeps
 * metadata. Nothing is zero here: every field is written before it is read,
 * on every path (the PTF suite covers each). */
header work_t {
    bit<176> ps;         /* port_state of the egress port, see below */
    bit<32>  slot_idx;   /* this flow's hash slot (port-major) */
    bit<32>  slot_seen;  /* flow epoch in which that slot was last seen */
    bit<32>  a;          /* working values of the rare paths */
    bit<32>  b;
    bit<19>  q;          /* a queue depth read back (the width BMv2 reports) */
    bit<5>   spare;
    bit<256> t;          /* the port's stamp (with its telemetry) being built or read */
    bit<224> s;          /* the stamp register's value (t without the port) */
}

struct v1_headers_t {
    ethernet_v1_t  ethernet;
    ipv4_head_v1_t ipv4;
    flow_key_t     fk;
    ipv4_rest_t    addrs;
    bwn_v1_t       bwn;
    work_t         w;      /* never valid, never emitted */
}

/* BWN DATA as one field, `all` (bits):
 *   [223:208] UDP length    [207:192] UDP checksum   [191:184] version ++ kind
 *   [183:176] hop count     [175:168] EBN code       [167:160] echo EBN code
 *   [159:128] narrow (kb/s) [127:96]  tight (kb/s, int32)      [95:0] the echo
 * The stamp register (below) keeps EBN code, narrow and tight at the same bits,
 * so a switch takes each minimum on masked values, with no shifts. */
#define BWN_KIND_WORD  224w0x00000000FF0000000000000000000000000000000000000000000000  /* version ++ kind */
#define BWN_DATA_WORD  224w0x00000000100000000000000000000000000000000000000000000000  /* version 1, kind DATA */
#define BWN_HOP        224w0x0000000000FF00000000000000000000000000000000000000000000  /* hop count */
#define BWN_HOP_ONE    224w0x00000000000100000000000000000000000000000000000000000000
#define BWN_KEPT       224w0xFFFF0000FFFF00FF0000000000000000FFFFFFFFFFFFFFFFFFFFFFFF  /* what no switch changes, and the hop count (the UDP checksum is not kept: zeroed) */
#define BWN_EBN        224w0x000000000000FF000000000000000000000000000000000000000000  /* EBN code */
#define BWN_NARROW     224w0x0000000000000000FFFFFFFF00000000000000000000000000000000  /* narrow link (kb/s) */
#define BWN_TIGHT      224w0x000000000000000000000000FFFFFFFF000000000000000000000000  /* tight link (kb/s, int32) */
#define BWN_TIGHT_SIGN 224w0x00000000000000000000000080000000000000000000000000000000  /* its sign bit */

/* min() without a branch (BMv2 evaluates it as one expression): b ^ ((a ^ b) & mask),
 * mask all ones when a < b. */
#define MIN_U8(a, b)  ((b) ^ (((a) ^ (b)) & (8w0 - (bit<8>)(bit<1>)((a) < (b)))))
#define MIN_U32(a, b) ((b) ^ (((a) ^ (b)) & (32w0 - (bit<32>)(bit<1>)((a) < (b)))))
#define MIN_S32(a, b) ((b) ^ (((a) ^ (b)) & (32w0 - (bit<32>)(bit<1>)((int<32>)(a) < (int<32>)(b)))))

/* The telemetry digest of a closed window: the port's stamp register as it is
 * written then (layout below, at `stamp`). */
struct port_telemetry_t {
    bit<256> stamp;
}

/* The one metadata field: BMv2 zeroes every metadata field for every packet
 * (about 700 instructions each), so the working values are in `w` instead.
 * k is 0 when the checksum is verified (its target), then the key of the
 * rare path's tables: BMv2 matches a field of an invalid header as 0. */
struct metadata_t {
    bit<32> k;
}

/*************************************************************************
 *  Per-port state, indexed by the port index (pidx < MAX_PORTS) the
 *  controller gives with each route (the port itself on BMv2). The
 *  controller reads them over Thrift as telemetry.
 *************************************************************************/
/* port_state = rx_bytes[175:144] ++ rx_mark[143:112] ++ flow_epoch[111:80]
 *              ++ flows_current[79:64] ++ flows_last[63:48] ++ window_end[47:0]
 * (rx_bytes on top and window_end at the bottom: the two every packet uses
 * are the cheapest to reach, an addition that drops its carry and a mask):
 *   rx_bytes:   bytes received for the port (OBP's BR, eq. 6), cumulative,
 *               wrapping at 2^32 (the top bits: the carry of a wrap falls off);
 *               read and written by every packet;
 *   rx_mark:    rx_bytes when the last window closed;
 *   window_end: switch time (us) the current measurement window ends;
 *   flow_epoch: (now & flow_mask) | 1 of the current flow window;
 *   flows:      EBN's active flows (linear counting): hash slots seen in the
 *               current flow window, and in the last complete one. */
register<bit<176>, PortId_t>(MAX_PORTS) port_state;
#define PS_RX(x)      x[175:144]
#define PS_MARK(x)    x[143:112]
#define PS_EPOCH(x)   x[111:80]
#define PS_CURRENT(x) x[79:64]
#define PS_LAST(x)    x[63:48]
#define PS_END(x)     x[47:0]
/* A dropped packet's port state: no window ends and no flow is new (the rare
 * path must not run for it: it writes registers at the egress port). */
#define PS_NEVER_RARE 176w0xFFFFFFFFFFFF
/* stamp: what a DATA packet is stamped with (narrow 0: the port is not
 * configured and stamps nothing), written when a window closes or the flow
 * count changes, and the telemetry of the last closed window, which the
 * switch also sends to the controller as a digest when the window closes
 * (BMv2's P4Runtime server cannot read registers). Layout (bits):
 *   [255:224] port          [223:208] flows current  [207:192] flows last
 *   [191:176] log7(IC)      [175:168] EBN code       [167:160] 0
 *   [159:128] IC (kb/s)     [127:96]  AB (kb/s, int32)
 *   [95:64]   BR (kb/s)     [63:32]   queue (pkts)   [31:0]    window start (us)
 * (EBN code, IC and AB at the bits of the stamp they go into, `all` above).
 * The register keeps bits 223..0, as wide as `all`, so that the egress
 * compares them with no slice; the port is added for the digest. */
register<bit<224>, PortId_t>(MAX_PORTS) stamp;   /* t[223:0]: the port is only in the digest */
#define ST_LOG7(x)   x[191:176]
#define ST_EBN(x)    x[175:168]
#define ST_NARROW(x) x[159:128]
#define ST_FLOWS(x)  x[223:192]
#define WINDOW_CLOSED 0x7FFFF   /* hdr.w.q once a window's telemetry is in t */
register<bit<32>, bit<32>>(MAX_PORTS * FLOW_SLOTS) flow_slot;  /* epoch in which a slot was last seen */
/* egress: the queue the port's last BWN DATA packet left behind (AF drops,
 * BI). DATA packets sample the FIFO that every packet of the port shares; a
 * port that carries no DATA has no reader of its AB. */
register<bit<19>, PortId_t>(MAX_PORTS) queue_depth;

/*************************************************************************
 *  Parser. Malformed input ends with a parser error that the ingress counts
 *  and drops (docs/wire-format.md, "Packets that are not well formed").
 *************************************************************************/
parser BwnParser(packet_in packet, out v1_headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: not_ipv4;
        }
    }

    state not_ipv4 {
        verify(false, error.NotIPv4);  /* hosts use static ARP; see docs/wire-format.md */
        transition accept;
    }

    /* Only IPv4 without options and not fragmented is parsed beyond IP:
     * options and fragments are routed but never stamped nor counted as flows.
     * The select masks the wide fields (layout at ipv4_head_v1_t): IHL is
     * head[59:56], MF head[13], the fragment offset head[12:0]; TTL is
     * ttl_csum[31:24], the protocol ttl_csum[23:16]. */
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.head, hdr.ipv4.ttl_csum) {
            (64w0 &&& IHL_0_3_MASK, _): ipv4_too_short;                     /* IHL 0..3 */
            (IHL_4 &&& IHL_MASK, _): ipv4_too_short;
            (_, 32w0 &&& 32w0xFE000000): ttl_expired;                      /* TTL 0 or 1 */
            (IHL_5 &&& IHL_MF_FRAG_MASK, PROTO_UDP_WORD &&& PROTO_MASK): parse_udp;
            (IHL_5 &&& IHL_MF_FRAG_MASK, PROTO_TCP_WORD &&& PROTO_MASK): parse_tcp;
            default: parse_addrs;
        }
    }

    /* The options' length in bits: (IHL - 5) * 32, 0 without options. */
    state parse_addrs {
        packet.extract(hdr.addrs, ((bit<32>)IP_IHL(hdr.ipv4) - 5) * 32);
        transition accept;
    }

    state ipv4_too_short {
        verify(false, error.IPv4HeaderTooShort);
        transition accept;
    }

    state ttl_expired {
        verify(false, error.TtlExpired);
        transition accept;
    }

    state parse_tcp {
        packet.extract(hdr.fk);
        transition accept;
    }

    /* The rest of the UDP header is only needed by BWN packets (the stamp
     * zeroes its checksum); for other UDP it stays payload, untouched. */
    state parse_udp {
        packet.extract(hdr.fk);
        transition select(hdr.fk.dst_port) {
            BWN_UDP_PORT: parse_bwn;
            default: accept;
        }
    }

    /* A truncated BWN header ends parsing with error.PacketTooShort. */
    state parse_bwn {
        packet.extract(hdr.bwn);
        transition accept;
    }
}

/* RFC 1812 sec. 5.2.2: a router verifies the IPv4 header checksum and drops a
 * header that does not verify (standard_metadata.checksum_error, counted under
 * its own reason), so that no packet leaves with a bad checksum: the ingress
 * then updates it incrementally (options included).
 * The checksum field is part of ttl_csum, so the sum covers the whole header,
 * checksum included: its one's complement (csum16) is 0 exactly when the
 * header verifies (RFC 1071). BMv2 compares it with a field, not a constant:
 * meta.k, which is 0 here (BMv2 zeroes metadata for every packet; the parser
 * writes none). */
control BwnVerifyChecksum(inout v1_headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.fk.isValid(),
            { hdr.ipv4.head, hdr.ipv4.ttl_csum, hdr.fk.src_addr, hdr.fk.dst_addr },
            meta.k, HashAlgorithm.csum16);
        verify_checksum(hdr.addrs.isValid(),
            { hdr.ipv4.head, hdr.ipv4.ttl_csum, hdr.addrs.src_addr, hdr.addrs.dst_addr,
              hdr.addrs.options },
            meta.k, HashAlgorithm.csum16);
    }
}

/*************************************************************************
 *  Ingress: forwarding, measurement, random loss, reservations
 *************************************************************************/
control BwnIngress(inout v1_headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    counter<bit<32>>(DROP_REASONS, CounterType.packets) drop_counter;
    direct_meter<bit<32>>(MeterType.bytes) reservation_meter;

    action drop_with(bit<32> reason) {
        drop_counter.count(reason);
        mark_to_drop(standard_metadata);
        hdr.w.ps = PS_NEVER_RARE;     /* epoch 0 = slot_seen's, end never reached */
        hdr.w.slot_seen = 0;
    }

    action drop_no_route() {
        drop_with(DROP_NO_ROUTE);
    }

    /* ---- the common path: one action per packet ------------------------- */
    /* Next hop (port, MACs) and the port's state: its received bytes grow by
     * this packet (OBP's BR counts bytes received, before any queue can drop
     * them). The TTL is decremented in the egress (BwnEgress), where BMv2
     * runs it beside the ingress of the next packet. */
    action forward(PortId_t port, bit<96> macs) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.macs = macs;
        port_state.read(hdr.w.ps, port);
        hdr.w.ps = hdr.w.ps + ((bit<176>)standard_metadata.packet_length << 144);
        port_state.write(port, hdr.w.ps);
    }

    /* A TCP or UDP packet also looks up its flow's hash slot (EBN's N). */
    action look_up_flow(bit<32> slot_base) {
        hash(hdr.w.slot_idx, HashAlgorithm.crc32, slot_base, hdr.fk, (bit<32>)FLOW_SLOTS);
        flow_slot.read(hdr.w.slot_seen, hdr.w.slot_idx);
    }

    action route(PortId_t port, bit<32> slot_base, bit<96> macs) {
        forward(port, macs);
        look_up_flow(slot_base);
    }

    /* A route whose egress port has options: random loss (threshold =
     * round(p * 2^32), 0 = none), and `options` = reservations (bit 31: this
     * switch is the edge of reservations to this destination) | Assured
     * Forwarding threshold (bits 30..0: out-of-profile and best-effort
     * packets are dropped while the port's queue holds that many packets;
     * 0 = off). Options are never 0 on such a route. */
    action route_checked(PortId_t port, bit<32> slot_base, bit<96> macs,
                         bit<32> loss_threshold, bit<32> options) {
        forward(port, macs);
        look_up_flow(slot_base);
        hdr.w.a = loss_threshold;
        hdr.w.b = options;
    }

    /* IPv4 packets other than TCP/UDP without options: routed and measured,
     * not counted as flows. The controller writes the same routes to both
     * tables (the destination address is in a different header). */
    action route_other(PortId_t port, bit<96> macs) {
        forward(port, macs);
        hdr.w.slot_seen = PS_EPOCH(hdr.w.ps);   /* not a flow: never new */
    }

    action route_other_checked(PortId_t port, bit<96> macs,
                               bit<32> loss_threshold, bit<32> options) {
        forward(port, macs);
        hdr.w.slot_seen = PS_EPOCH(hdr.w.ps);
        hdr.w.a = loss_threshold;
        hdr.w.b = options;
    }

    table ipv4_lpm {
        key = { hdr.fk.dst_addr : lpm @name("dst_addr"); }
        actions = { route; route_checked; drop_no_route; }
        default_action = drop_no_route();
        size = 1024;
    }

    table ipv4_lpm_other {
        key = { hdr.addrs.dst_addr : lpm @name("dst_addr"); }
        actions = { route_other; route_other_checked; drop_no_route; }
        default_action = drop_no_route();
        size = 1024;
    }

    /* ---- options of a route ---------------------------------------------- */
    /* Random loss: drop when a uniform 32-bit draw is below the threshold.
     * The draw goes into t, which every later reader writes first (slot_seen,
     * the flow's slot epoch, is still to be compared: a draw there made every
     * packet of a lossy port count as a new flow). A packet the draw drops
     * goes no further: its options word is cleared, so the reservation meter
     * never counts it and the AF rule never drops (and counts) it again. */
    action random_loss() {
        random(hdr.w.t, 256w0, 256w0xFFFFFFFF);
        if (hdr.w.t < (bit<256>)hdr.w.a) {
            drop_with(DROP_RANDOM_LOSS);
            hdr.w.b = 0;
        }
    }

    /* GTCP reservations (edge switch): in-profile (GREEN) packets of a
     * reserved flow are marked `dscp` (AF11 by default), the excess AF13; both
     * stay in the flow's one queue, so a flow is never reordered (RFC 2597).
     * Checksum: RFC 1624 eq. 3 over the changed word (version, IHL, TOS). */
    action reserved_flow(bit<6> dscp) {
        reservation_meter.read(hdr.w.a);
        hdr.w.t = (bit<256>)(~IP_TOS_WORD(hdr.ipv4));
        IP_DSCP(hdr.ipv4) = DSCP_AF13;
        if (hdr.w.a == METER_GREEN) {
            IP_DSCP(hdr.ipv4) = dscp;
        }
        hdr.w.t = (bit<256>)(~IP_CSUM(hdr.ipv4)) + hdr.w.t
                 + (bit<256>)IP_TOS_WORD(hdr.ipv4);
        hdr.w.t = (hdr.w.t & 0xffff) + (hdr.w.t >> 16);
        hdr.w.t = (hdr.w.t & 0xffff) + (hdr.w.t >> 16);
        IP_CSUM(hdr.ipv4) = ~(hdr.w.t[15:0]);
    }

    table reservations {
        key = {
            hdr.fk.src_addr   : ternary @name("src_addr");
            hdr.fk.dst_addr   : ternary @name("dst_addr");
            hdr.ipv4.ttl_csum & PROTO_MASK : ternary @name("protocol");   /* protocol << 16 */
            hdr.fk.src_port   : ternary @name("src_port");
            hdr.fk.dst_port   : ternary @name("dst_port");
        }
        actions = { reserved_flow; NoAction; }
        const default_action = NoAction();
        meters = reservation_meter;
        size = 256;
    }

    /* Assured Forwarding: only in-profile packets may use the queue above
     * the threshold; the tail drop of a full queue is the only drop they see. */
    action assured_forwarding() {
        queue_depth.read(hdr.w.q, standard_metadata.egress_spec);
        if ((bit<32>)hdr.w.q >= (hdr.w.b & 0x7FFFFFFF)) {
            drop_with(DROP_AF_OUT_OF_PROFILE);
        }
    }

    /* ---- a window closes: OBP's AB (eq. 6), the telemetry of the window ---- */
    /* Keyless: the controller sets the default action (masks and lengths of
     * the rate window W and of the flow window). The window that ended at
     * window_end closes and the next one starts at this packet's window
     * (aligned). BR is what rx_bytes grew by since the last close, or 0 when
     * whole windows passed without a packet (the latest one was idle). A new
     * flow window starts when the flow epoch changed: its count moves to
     * `last`, or 0 if a whole flow window passed without packets. Leaves
     * a = BR bytes, q = queued packets (BI, the queue the port's last packet
     * left behind), and the window's start in t (for the telemetry). */
    action roll_window(bit<48> mask, bit<48> window_us, bit<32> flow_mask, bit<32> flow_window_us) {
        hdr.w.b = PS_RX(hdr.w.ps) - standard_metadata.packet_length;   /* before this packet */
        hdr.w.a = hdr.w.b - PS_MARK(hdr.w.ps);
        PS_MARK(hdr.w.ps) = hdr.w.b;
        hdr.w.t = (bit<256>)(standard_metadata.ingress_global_timestamp & mask);
        if (hdr.w.t[47:0] != PS_END(hdr.w.ps)) {
            hdr.w.a = 0;
        }
        PS_END(hdr.w.ps) = hdr.w.t[47:0] + window_us;
        hdr.w.b = (standard_metadata.ingress_global_timestamp[31:0] & flow_mask) | 1;
        if (hdr.w.b != PS_EPOCH(hdr.w.ps)) {
            PS_LAST(hdr.w.ps) = 0;
            if (hdr.w.b - PS_EPOCH(hdr.w.ps) == flow_window_us) {
                PS_LAST(hdr.w.ps) = PS_CURRENT(hdr.w.ps);
            }
            PS_CURRENT(hdr.w.ps) = 0;
            PS_EPOCH(hdr.w.ps) = hdr.w.b;
        }
        port_state.write(standard_metadata.egress_spec, hdr.w.ps);
        queue_depth.read(hdr.w.q, standard_metadata.egress_spec);
        meta.k = (bit<32>)hdr.w.q;
    }

    table window_config {
        actions = { roll_window; }
        /* the controller sets the default: these are 16.384 ms and 131.072 ms */
        default_action = roll_window(48w0xFFFFFFFFC000, 16384, 32w0xFFFE0000, 131072);
    }

    /* BI: queued packets -> bytes (BMv2 counts packets: the controller's table
     * holds depth * the frame size it assumes). Leaves b = BI bytes. */
    action set_queue_bytes(bit<32> bytes) {
        hdr.w.b = bytes;
    }

    table queue_bytes {
        key = { meta.k : exact @name("queue"); }
        actions = { set_queue_bytes; }
        default_action = set_queue_bytes(0);
        size = QUEUE_TABLE_SIZE;
    }

    /* The port's capacity IC, as bytes per window of 2^K us, as kb/s and as
     * log7: AB = IC - BR - BI in bytes per window (int32), then bytes per
     * window -> kb/s: x * 8000 / 2^K = (x * 125) >> (K - 6), a constant shift:
     * the controller installs the action of its window's K. AB may be negative
     * (arithmetic shift: rounds toward -infinity by less than 1 kb/s). Builds
     * the port's new stamp in t (EBN code: set_share) with the window's
     * telemetry; t holds the window's start on entry. */
#define SET_PORT(K) \
    action set_port_##K(bit<32> cap_bytes, bit<32> cap_kbps, bit<16> cap_log7) { \
        hdr.w.b = cap_bytes - hdr.w.a - hdr.w.b; \
        hdr.w.t = (bit<32>)(bit<9>)standard_metadata.egress_spec ++ 32w0 \
                 ++ cap_log7 ++ 16w0 ++ cap_kbps \
                 ++ (bit<32>)(int<32>)(((int<64>)(int<32>)hdr.w.b * 125) >> (K - 6)) \
                 ++ (bit<32>)(((bit<64>)hdr.w.a * 125) >> (K - 6)) \
                 ++ (bit<32>)hdr.w.q ++ hdr.w.t[31:0]; \
        hdr.w.q = WINDOW_CLOSED; \
    }
    SET_PORT(6)  SET_PORT(7)  SET_PORT(8)  SET_PORT(9)  SET_PORT(10)
    SET_PORT(11) SET_PORT(12) SET_PORT(13) SET_PORT(14) SET_PORT(15)
    SET_PORT(16) SET_PORT(17) SET_PORT(18) SET_PORT(19) SET_PORT(20)
    SET_PORT(21) SET_PORT(22) SET_PORT(23) SET_PORT(24)

    /* A port without capacity is not stamped (narrow 0). */
    action port_unconfigured() {
        hdr.w.t = 0;
    }

    table port_config {
        key = { standard_metadata.egress_spec : exact @name("egress_port"); }
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

    action read_stamp() {
        hdr.w.q = 0;                             /* no window closed: no digest */
        stamp.read(hdr.w.s, standard_metadata.egress_spec);
        hdr.w.t = (bit<256>)hdr.w.s;
    }

    /* ---- EBN's N and the share ------------------------------------------ */
    /* Count the packet's flow (hash slot), new in this flow window; then
     * b = N = max(flows this flow window, flows in the last), at most
     * FLOW_SLOTS. */
    action count_flow() {
        hdr.w.slot_seen = PS_EPOCH(hdr.w.ps);
        PS_CURRENT(hdr.w.ps) = PS_CURRENT(hdr.w.ps) + 1;
        port_state.write(standard_metadata.egress_spec, hdr.w.ps);
    }

    /* (A separate action, so that p4c hands the register the field as it is.) */
    action mark_slot() {
        flow_slot.write(hdr.w.slot_idx, hdr.w.slot_seen);
    }

    action flows_now() {
        meta.k = (bit<32>)PS_LAST(hdr.w.ps);
        if ((bit<32>)PS_CURRENT(hdr.w.ps) > meta.k) {
            meta.k = (bit<32>)PS_CURRENT(hdr.w.ps);
        }
        if (meta.k > FLOW_SLOTS) {
            meta.k = FLOW_SLOTS;
        }
    }

    /* log7 of the linear-counting estimate of N, from the number of occupied
     * hash slots (docs/dataplane.md, "Active flows"); then the EBN share
     * C / N  ->  log7(C) - log7(N), rounded to 1/8 octave and clamped to 254,
     * goes into the port's stamp. */
    action set_share(bit<16> log7) {
        hdr.w.a = (bit<32>)ST_LOG7(hdr.w.t) - (bit<32>)log7 + 8;
        if ((int<32>)hdr.w.a < 8) {
            hdr.w.a = 8;                          /* share below 1 kb/s: code 0 */
        }
        hdr.w.a = hdr.w.a >> LOG7_TO_EBN_SHIFT;
        if (hdr.w.a > EBN_CODE_MAX) {
            hdr.w.a = EBN_CODE_MAX;
        }
        ST_EBN(hdr.w.t) = hdr.w.a[7:0];
        ST_FLOWS(hdr.w.t) = PS_CURRENT(hdr.w.ps) ++ PS_LAST(hdr.w.ps);
        hdr.w.s = hdr.w.t[223:0];
        if (hdr.w.q == WINDOW_CLOSED && ST_NARROW(hdr.w.t) != 0) {
            digest<port_telemetry_t>(TELEMETRY_DIGEST_RECEIVER, { hdr.w.t });
        }
    }

    /* (A separate action, so that p4c hands the register the field as it is.) */
    action write_stamp() {
        stamp.write(standard_metadata.egress_spec, hdr.w.s);
    }

    table flows_log {
        key = { meta.k : exact @name("flows"); }
        actions = { set_share; }
        default_action = set_share(0);
        size = FLOW_SLOTS + 1;
    }

    apply {
        if (standard_metadata.parser_error != error.NoError || standard_metadata.checksum_error == 1) {
            /* ---- malformed input: count the reason, drop ------------------- */
            if (standard_metadata.parser_error == error.NotIPv4) {
                drop_with(DROP_NOT_IPV4);
            } else if (standard_metadata.parser_error == error.NoError) {
                drop_with(DROP_IPV4_CHECKSUM);    /* the header does not verify */
            } else if (standard_metadata.parser_error == error.TtlExpired) {
                drop_with(DROP_TTL);
            } else if (hdr.fk.isValid() && hdr.fk.dst_port == BWN_UDP_PORT) {
                drop_with(DROP_BWN_MALFORMED);    /* PacketTooShort inside the BWN header */
            } else if (hdr.ethernet.ether_type == ETHERTYPE_IPV4) {
                drop_with(DROP_IPV4_MALFORMED);   /* IHL < 5, truncated IPv4/TCP/UDP */
            } else {
                drop_with(DROP_NOT_IPV4);         /* truncated Ethernet */
            }
        } else {
            /* ---- route: the common path is one of these two tables; a route
             * with options (loss, reservations, AF: rare) takes its branch ---- */
            if (hdr.fk.isValid()) {
                switch (ipv4_lpm.apply().action_run) {
                    route_checked: {
                        if (hdr.w.a != 0) {
                            random_loss();
                        }
                        if (hdr.w.b[31:31] == 1) {
                            reservations.apply();     /* meter and mark (edge) */
                        }
                        if (hdr.w.b[30:0] != 0 && IP_DSCP(hdr.ipv4) != DSCP_AF11) {
                            assured_forwarding();
                        }
                    }
                }
            } else {
                switch (ipv4_lpm_other.apply().action_run) {
                    route_other_checked: {
                        if (hdr.w.a != 0) {
                            random_loss();
                        }
                        if (hdr.w.b[30:0] != 0 && IP_DSCP(hdr.ipv4) != DSCP_AF11) {
                            assured_forwarding();
                        }
                    }
                }
            }
            /* ---- rare: a window closes, or a flow is new in its flow window -- */
            if (standard_metadata.ingress_global_timestamp >= PS_END(hdr.w.ps)
                    || hdr.w.slot_seen != PS_EPOCH(hdr.w.ps)) {
                if (standard_metadata.ingress_global_timestamp >= PS_END(hdr.w.ps)) {
                    window_config.apply();
                    queue_bytes.apply();
                    port_config.apply();
                } else {
                    read_stamp();
                }
                if (hdr.fk.isValid() && hdr.w.slot_seen != PS_EPOCH(hdr.w.ps)) {
                    count_flow();
                    mark_slot();
                }
                flows_now();
                flows_log.apply();                /* and the EBN share into the stamp */
                write_stamp();
            }
        }
    }
}

/*************************************************************************
 *  Egress: the queue the packet leaves behind, and BWN stamping (DATA)
 *************************************************************************/
control BwnEgress(inout v1_headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    /* Packets that left their port's queue empty behind them (any packet, by
     * egress port: every route's port is below MAX_PORTS, which the controller
     * checks, and only routed packets reach the egress). Between two reads with no increment the
     * port never ran dry: every departure had a successor waiting, so a
     * rate-limited port was backlogged and must have sent at its rate. The
     * fidelity monitor (bwn/analysis/fidelity.py, departure_rate) reads it every 0.1 s. */
    counter<PortId_t>(MAX_PORTS, CounterType.packets) queue_emptied;

    /* EBN code, narrow and tight link each become the minimum of what the
     * packet carries and this port's value (tight link is signed: compared with
     * its sign bit flipped), the hop count grows while below 255 (its bits below BWN_HOP's), and the
     * UDP checksum becomes 0 (the UDP checksum rule, docs/wire-format.md); one
     * expression over `all`, where each part is compared and kept under its
     * mask. A port without capacity (narrow 0) leaves the packet as it is. */
    action stamp_packet() {
        queue_depth.write(standard_metadata.egress_port, standard_metadata.deq_qdepth);
        stamp.read(hdr.w.s, standard_metadata.egress_port);
        if (hdr.w.s & BWN_NARROW != 0) {
            hdr.bwn.all =
                ((hdr.bwn.all & BWN_HOP) < BWN_HOP ? hdr.bwn.all + BWN_HOP_ONE : hdr.bwn.all) & BWN_KEPT
                | ((hdr.w.s & BWN_EBN) < (hdr.bwn.all & BWN_EBN)
                   ? hdr.w.s & BWN_EBN : hdr.bwn.all & BWN_EBN)
                | ((hdr.w.s & BWN_NARROW) < (hdr.bwn.all & BWN_NARROW)
                   ? hdr.w.s & BWN_NARROW : hdr.bwn.all & BWN_NARROW)
                | (((hdr.w.s ^ BWN_TIGHT_SIGN) & BWN_TIGHT) < ((hdr.bwn.all ^ BWN_TIGHT_SIGN) & BWN_TIGHT)
                   ? hdr.w.s & BWN_TIGHT : hdr.bwn.all & BWN_TIGHT);
        }
    }

    /* TTL - 1 (the parser let only TTL >= 2 in) and the checksum HC by
     * RFC 1624 eq. 3 (a TTL decrement adds the constant ~m + m' = 0xFEFF, so
     * IPv4 options stay correct): ~(~HC + 0xFEFF) in one's complement, which is
     * HC + 0x0100, or HC + 0x0101 when that sum carries (exactly when
     * HC >= 0xFEFF), mod 2^16. In one addition to TTL ++ protocol ++ HC:
     * -0x01000000 + 0x0100, or -0x01000000 + 0x0101 - 0x10000 (HC + 0x0101
     * carries out of HC then); tests/test_dataplane_math.py checks it against
     * eq. 3 for every HC. In the egress, not the ingress: BMv2 runs the ingress
     * of all packets in one thread and the egress in others, and a packet that
     * is not BWN DATA has no other egress work (docs/dataplane.md, "Per-packet
     * cost on BMv2"); a GTCP edge's re-marking in the ingress updates the same
     * checksum, and one's complement updates commute. */
    action decrement_ttl() {
        hdr.ipv4.ttl_csum = hdr.ipv4.ttl_csum
                            + (IP_CSUM(hdr.ipv4) < 16w0xFEFF ? 32w0xFF000100 : 32w0xFEFF0101);
    }

    apply {
        decrement_ttl();
        if (standard_metadata.deq_qdepth == 0) {
            queue_emptied.count(standard_metadata.egress_port);
        }
        if (hdr.bwn.isValid() && (hdr.bwn.all & BWN_KIND_WORD) == BWN_DATA_WORD) {
            stamp_packet();
        }
    }
}

control BwnComputeChecksum(inout v1_headers_t hdr, inout metadata_t meta) {
    apply { }  /* done incrementally in ingress (RFC 1624), options included */
}

control BwnDeparser(packet_out packet, in v1_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.fk);
        packet.emit(hdr.addrs);
        packet.emit(hdr.bwn);
    }
}

V1Switch(BwnParser(), BwnVerifyChecksum(), BwnIngress(), BwnEgress(),
         BwnComputeChecksum(), BwnDeparser()) main;
