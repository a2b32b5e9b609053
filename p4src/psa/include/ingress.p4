/* -*- P4_16 -*- */
/*
 * bwn on PSA-eBPF: the ingress control, where the whole job is done.
 *
 * PSA-eBPF runs the ingress at the TC ingress hook of the port a packet
 * arrives on, and the egress at the TC egress hook of the port it leaves by,
 * before that port's qdisc. The egress would see nothing the ingress does not
 * (no queue depth either), and an empty egress pipeline is not loaded at all
 * (one program per packet instead of two), so the ingress routes, measures,
 * stamps and decrements the TTL; the egress pipeline is empty.
 *
 * What PSA-eBPF cannot do, and the design that meets it (docs/dataplane.md,
 * "PSA on eBPF", derives each error bound against the BMv2 program):
 *   - no queue depth: a virtual queue per port, a fluid FIFO drained at the
 *     rate the controller writes (the rate of the port's qdisc) and filled
 *     by the bytes the program forwards to it, with the qdisc's byte limit;
 *     it gives BI, the Assured Forwarding threshold and the queue-emptied count;
 *   - registers of at most 64 bits (p4c-ebpf computes on C integers): the
 *     per-port state is in named registers of 64 bits or less;
 *   - no atomics across CPUs (a register read and its write are separate map
 *     operations): counters are atomic (p4c-ebpf adds with __sync_fetch_and_add),
 *     registers are not, so each switch's packets are steered to one CPU
 *     (controller/ebpf.py sets RPS on its ports), which makes every register's
 *     read-modify-write single-writer, as BMv2's one ingress thread is.
 */
#ifndef __BWN_PSA_INGRESS__
#define __BWN_PSA_INGRESS__

/* Ethernet header bytes: a frame is its IPv4 total length + 14 (on veths,
 * which do not pad, that is the skb's length, which the qdisc counts). */
#define ETHERNET_BYTES 14
/* The virtual queue counts 2^-16 bytes (docs/dataplane.md). */
#define QUEUE_FP_SHIFT 16
#define QUEUE_FP_HALF 64w0x8000
/* Reservations: class_of_service of in-profile packets (AF11); the rest 0. */
#define COS_BEST_EFFORT 0
#define COS_IN_PROFILE 1

control BwnIngress(inout psa_headers_t hdr, inout psa_metadata_t meta,
                   in psa_ingress_input_metadata_t istd, inout psa_ingress_output_metadata_t ostd) {

    /* ---- state ---------------------------------------------------------- */
    /* Indexed by reason (p4c-ebpf counts atomically). */
    Counter<bit<32>, bit<32>>(DROP_REASONS, PSA_CounterType_t.PACKETS) drop_counter;
    /* By port index: packets that found the port's virtual queue empty, i.e.
     * the packet before them had left it empty (the fidelity monitor's
     * evidence that a port ran dry, as BMv2's egress counter). */
    Counter<bit<32>, bit<32>>(MAX_PORTS, PSA_CounterType_t.PACKETS) queue_emptied;
    /* By port index: packets the port's FIFO is full for (the virtual queue
     * says the qdisc drops them; the qdisc's own count is the truth). */
    Counter<bit<32>, bit<32>>(MAX_PORTS, PSA_CounterType_t.PACKETS) queue_full;

    /* Per port (index pidx < MAX_PORTS); the controller reads none of them:
     * telemetry comes as digests. */
    Register<bit<64>, bit<32>>(MAX_PORTS) rx_bytes;     /* OBP's BR: bytes received, cumulative */
    Register<bit<64>, bit<32>>(MAX_PORTS) rx_mark;      /* rx_bytes when the last window closed */
    Register<bit<64>, bit<32>>(MAX_PORTS) window_end;   /* switch time (us) the window ends */
    /* EBN's active flows: epoch[63:32] = (now & flow_mask) | 1 of the current
     * flow window, current[31:16] and last[15:0] = hash slots seen in the
     * current flow window and in the last complete one. */
    Register<bit<64>, bit<32>>(MAX_PORTS) flows;
    Register<bit<32>, bit<32>>(MAX_PORTS * FLOW_SLOTS) flow_slot;   /* epoch a slot was last seen in */
    /* The virtual queue: its bytes (2^-16 units) after the last packet, and
     * that packet's time (ns). */
    Register<bit<64>, bit<32>>(MAX_PORTS) queue_fp;
    Register<bit<64>, bit<32>>(MAX_PORTS) queue_time;
    /* When the virtual queue, as the last packet left it, runs dry (ns): the
     * controller compares it with its clock to see a port that ran dry after its
     * last packet (the queue-emptied count only moves with the next arrival). */
    Register<bit<64>, bit<32>>(MAX_PORTS) queue_dry;
    /* What DATA packets are stamped with (narrow 0: the port is not
     * configured and stamps nothing): narrow[63:32] ++ tight[31:0] (kb/s,
     * tight an int32), and log7(IC)[31:16] ++ EBN code[7:0]. */
    Register<bit<64>, bit<32>>(MAX_PORTS) stamp_links;
    Register<bit<32>, bit<32>>(MAX_PORTS) stamp_share;

    Hash<bit<32>>(PSA_HashAlgorithm_t.CRC32) flow_hash;
    Random<bit<32>>(0, 0xFFFFFFFF) loss_draw;
    /* GTCP reservations: one trTCM (bytes) per reservation, indexed by the
     * reservations table's entry (a DirectMeter cannot be used: PSA-eBPF's
     * ternary tables keep entries in maps that cannot hold its lock). */
    Meter<bit<32>>(RESERVATION_METERS, PSA_MeterType_t.BYTES) reservation_meter;

    /* Local copies: p4c-ebpf hands registers the address of their index and
     * value, so both are variables. */
    bit<32> idx;
    bit<64> v64;
    bit<32> v32;

    action drop_with(bit<32> reason) {
        drop_counter.count(reason);
        ingress_drop(ostd);
        meta.dropped = 1;
    }

    action drop_no_route() {
        drop_with(DROP_NO_ROUTE);
    }

    /* ---- the route ------------------------------------------------------ */
    /* Next hop: the port, its register index pidx and both MACs (two
     * parameters: p4c-ebpf computes on at most 64 bits, v1model's routes
     * carry one 96-bit word). */
    action route(PortId_t port, bit<32> pidx, bit<32> slot_base, bit<48> dst_mac, bit<48> src_mac) {
        send_to_port(ostd, port);
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
        meta.routed = 1;
        meta.port = (PortIdUint_t)port;
        meta.pidx = pidx;
        meta.slot_base = slot_base;
    }

    /* A route whose port has options: random loss (threshold = round(p *
     * 2^32), 0 = none) and `options` = reservations (bit 31: this switch is
     * the edge of reservations to this destination) | the Assured Forwarding
     * threshold (bits 30..0, bytes of the port's virtual queue; 0 = off). */
    action route_checked(PortId_t port, bit<32> pidx, bit<32> slot_base, bit<48> dst_mac,
                         bit<48> src_mac, bit<32> loss_threshold, bit<32> options) {
        route(port, pidx, slot_base, dst_mac, src_mac);
        meta.checked = 1;
        meta.loss_threshold = loss_threshold;
        meta.options = options;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr : lpm @name("dst_addr"); }
        actions = { route; route_checked; drop_no_route; }
        default_action = drop_no_route();
        size = 1024;
    }

    /* ---- the port's virtual queue (configuration) ----------------------- */
    /* rate: bytes per ns * 2^32 of the port's qdisc; idle_ns: a gap after
     * which the queue is surely empty (and rate * gap still fits 64 bits);
     * limit_bytes: the qdisc's FIFO limit; drain: ns per byte * 2^16 (the
     * queue's 2^-16 bytes -> ns, scaled by 2^32). A port without an entry has
     * no queue (BI 0; every packet finds it empty). */
    action set_queue(bit<64> rate, bit<64> idle_ns, bit<32> limit_bytes, bit<64> drain) {
        meta.has_queue = 1;
        meta.queue_rate = rate;
        meta.queue_idle_ns = idle_ns;
        meta.queue_limit_fp = (bit<64>)limit_bytes << QUEUE_FP_SHIFT;
        meta.queue_drain = drain;
    }

    action no_queue() {
        meta.has_queue = 0;
    }

    table port_queue {
        key = { meta.pidx : exact @name("pidx"); }
        actions = { set_queue; no_queue; }
        default_action = no_queue();
        size = MAX_PORTS;
    }

    /* ---- options of a route --------------------------------------------- */
    /* GTCP reservations (edge switch): in-profile (GREEN) packets of a
     * reserved flow are marked `dscp` (AF11 by default), the excess AF13; both
     * stay in the flow's one FIFO (RFC 2597: never reordered). Checksum: RFC
     * 1624 eq. 3 over the changed word (version, IHL, DSCP, ECN). A 16-bit
     * complement is written x ^ 0xFFFF: p4c-ebpf emits `~x` in C, where a
     * 16-bit x is promoted to int first and its complement gets 16 more bits. */
    action reserved_flow(bit<32> meter_index, bit<6> dscp) {
        PSA_MeterColor_t color = reservation_meter.execute(meter_index);
        bit<32> sum = (bit<32>)(hdr.ipv4.hdr_checksum ^ 0xFFFF)
                      + (bit<32>)((hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn) ^ 0xFFFF);
        hdr.ipv4.dscp = DSCP_AF13;
        if (color == PSA_MeterColor_t.GREEN) {
            hdr.ipv4.dscp = dscp;
            ostd.class_of_service = (ClassOfService_t)COS_IN_PROFILE;
        }
        sum = sum + (bit<32>)(hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn);
        sum = (sum & 0xFFFF) + (sum >> 16);
        sum = (sum & 0xFFFF) + (sum >> 16);
        hdr.ipv4.hdr_checksum = sum[15:0] ^ 0xFFFF;
    }

    /* Ternary, so that an entry can leave a field out; protocol is matched as
     * it is in the header (the v1model program matches it in a wider word). */
    table reservations {
        key = {
            hdr.ipv4.src_addr : ternary @name("src_addr");
            hdr.ipv4.dst_addr : ternary @name("dst_addr");
            hdr.l4.src_port   : ternary @name("src_port");
            hdr.l4.dst_port   : ternary @name("dst_port");
            hdr.ipv4.protocol : ternary @name("protocol");
        }
        actions = { reserved_flow; NoAction; }
        const default_action = NoAction();
        size = RESERVATION_METERS;
    }

    /* ---- a window closes: OBP's AB (eq. 6), the telemetry of the window ---- */
    /* Keyless: the controller sets the default action (masks and lengths of
     * the rate window W and of the flow window, in us). The window that ended
     * at window_end closes and the next one starts at this packet's window
     * (aligned). BR is what rx_bytes grew by since the last close, or 0 when
     * whole windows passed without a packet (the latest one was idle). A new
     * flow window starts when the flow epoch changed: its count moves to
     * `last`, or 0 if a whole flow window passed without packets. */
    action roll_window(bit<64> mask, bit<64> window_us, bit<32> flow_mask, bit<32> flow_window_us) {
        idx = meta.pidx;
        v64 = rx_mark.read(idx);
        meta.br_bytes = (bit<32>)(meta.rx_before - v64);
        v64 = meta.rx_before;
        rx_mark.write(idx, v64);
        v64 = window_end.read(idx);
        bit<64> start_us = meta.now_us & mask;
        if (start_us != v64) {
            meta.br_bytes = 0;
        }
        meta.window_start_us = (bit<32>)start_us;
        v64 = start_us + window_us;
        window_end.write(idx, v64);
        bit<32> epoch = (meta.now_us[31:0] & flow_mask) | 1;
        if (epoch != meta.flows[63:32]) {
            bit<16> last = 0;
            if (epoch - meta.flows[63:32] == flow_window_us) {
                last = meta.flows[31:16];
            }
            meta.flows = epoch ++ 16w0 ++ last;
        }
        meta.bi_bytes = meta.queue_bytes;
    }

    table window_config {
        actions = { roll_window; }
        /* the controller sets the default: these are 16.384 ms and 131.072 ms */
        default_action = roll_window(64w0xFFFFFFFFFFFFC000, 16384, 32w0xFFFE0000, 131072);
    }

    /* The port's capacity IC, as bytes per window of 2^K us, as kb/s and as
     * log7: AB = IC - BR - BI in bytes per window (int32), then bytes per
     * window -> kb/s: x * 8000 / 2^K = (x * 125) >> (K - 6), exact (floor;
     * AB may be negative: the arithmetic shift rounds toward -infinity by
     * less than 1 kb/s). kbps_shift = K - 6. Builds the port's new stamp and
     * the window's telemetry. */
    action set_port(bit<32> cap_bytes, bit<32> cap_kbps, bit<16> cap_log7, bit<5> kbps_shift) {
        int<64> ab_bytes = (int<64>)(int<32>)(cap_bytes - meta.br_bytes - meta.bi_bytes);
        int<64> ab_kbps = (ab_bytes * 125) >> kbps_shift;
        bit<64> br_kbps = ((bit<64>)meta.br_bytes * 125) >> kbps_shift;
        meta.stamp_links = cap_kbps ++ (bit<32>)(int<32>)ab_kbps;
        meta.stamp_share = cap_log7 ++ 16w0;
        meta.telemetry.capacity_kbps = cap_kbps;
        meta.telemetry.avail_kbps = (bit<32>)(int<32>)ab_kbps;
        meta.telemetry.rate_kbps = (bit<32>)br_kbps;
        meta.telemetry.cap_log7 = cap_log7;
    }

    /* A port without capacity is not stamped (narrow 0). */
    action port_unconfigured() {
        meta.stamp_links = 0;
        meta.stamp_share = 0;
    }

    table port_config {
        key = { meta.pidx : exact @name("pidx"); }
        actions = { set_port; port_unconfigured; }
        default_action = port_unconfigured();
        size = MAX_PORTS;
    }

    /* ---- EBN's N and the share ------------------------------------------ */
    /* log7 of the linear-counting estimate of N, from the number of occupied
     * hash slots (docs/dataplane.md, "Active flows"); then the EBN share
     * C / N -> log7(C) - log7(N), rounded to 1/8 octave and clamped to
     * 0..254, goes into the port's stamp. */
    action set_share(bit<16> log7) {
        bit<32> code = (bit<32>)meta.stamp_share[31:16] - (bit<32>)log7 + 8;
        if ((int<32>)code < 8) {
            code = 8;                              /* share below 1 kb/s: code 0 */
        }
        code = code >> LOG7_TO_EBN_SHIFT;
        if (code > EBN_CODE_MAX) {
            code = EBN_CODE_MAX;
        }
        meta.stamp_share[7:0] = code[7:0];
    }

    table flows_log {
        key = { meta.flows_n : exact @name("flows"); }
        actions = { set_share; }
        default_action = set_share(0);
        size = FLOW_SLOTS + 1;
    }

    /* EBN code, narrow and tight link each become the minimum of what the
     * packet carries and this port's value (tight link signed), the hop count
     * grows while below 255, and the UDP checksum becomes 0 (the UDP checksum
     * rule, docs/wire-format.md). A port without capacity (narrow 0) leaves
     * the packet as it is. */
    action stamp_packet() {
        bit<32> narrow = meta.stamp_links[63:32];
        bit<32> tight = meta.stamp_links[31:0];
        bit<8> ebn = meta.stamp_share[7:0];
        if (narrow != 0) {
            if (hdr.bwn.hop_count != 255) {
                hdr.bwn.hop_count = hdr.bwn.hop_count + 1;
            }
            if (ebn < hdr.bwn.ebn_code) {
                hdr.bwn.ebn_code = ebn;
            }
            if (narrow < hdr.bwn.narrow_kbps) {
                hdr.bwn.narrow_kbps = narrow;
            }
            if ((int<32>)tight < (int<32>)hdr.bwn.tight_kbps) {
                hdr.bwn.tight_kbps = tight;
            }
            hdr.udp.checksum = 0;
        }
    }

    apply {
        if (meta.parsed == 0) {
            /* ---- malformed input: count the reason, drop (the same reasons
             * as the v1model program's, from how far the parser got) ---------- */
            if (meta.at_checksum == 1) {
                drop_with(DROP_IPV4_CHECKSUM);    /* the header does not verify */
            } else if (meta.at_ttl == 1) {
                drop_with(DROP_TTL);
            } else if (meta.at_bwn == 1) {
                drop_with(DROP_BWN_MALFORMED);    /* PacketTooShort inside the BWN header */
            } else if (meta.at_ipv4 == 1) {
                drop_with(DROP_IPV4_MALFORMED);   /* IHL < 5, truncated IPv4/TCP/UDP */
            } else {
                drop_with(DROP_NOT_IPV4);         /* not IPv4, or truncated Ethernet */
            }
        } else {
            ipv4_lpm.apply();
        }
        if (meta.routed == 1) {
            meta.now_ns = (bit<64>)istd.ingress_timestamp;
            meta.now_us = meta.now_ns / 1000;
            meta.frame_bytes = (bit<32>)hdr.ipv4.total_len + ETHERNET_BYTES;
            idx = meta.pidx;

            /* ---- OBP's BR: bytes received for the port -------------------- */
            meta.rx_before = rx_bytes.read(idx);
            v64 = meta.rx_before + (bit<64>)meta.frame_bytes;
            rx_bytes.write(idx, v64);

            /* ---- the virtual queue, drained to now ------------------------ */
            port_queue.apply();
            if (meta.has_queue == 1) {
                meta.queue_fp = queue_fp.read(idx);
                v64 = queue_time.read(idx);
                bit<64> gap_ns = 0;
                if (meta.now_ns > v64) {
                    gap_ns = meta.now_ns - v64;
                }
                bit<64> drained = meta.queue_fp;
                if (gap_ns < meta.queue_idle_ns) {
                    drained = (gap_ns * meta.queue_rate + QUEUE_FP_HALF) >> QUEUE_FP_SHIFT;
                }
                if (drained >= meta.queue_fp) {
                    meta.queue_fp = 0;
                } else {
                    meta.queue_fp = meta.queue_fp - drained;
                }
                meta.queue_bytes = (bit<32>)(meta.queue_fp >> QUEUE_FP_SHIFT);
            }

            /* ---- the flow's hash slot (EBN's N) --------------------------- */
            meta.flows = flows.read(idx);
            if (meta.flow_key == 1) {
                meta.slot_idx = meta.slot_base
                    + (flow_hash.get_hash({hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
                                           hdr.l4.src_port, hdr.l4.dst_port}) & (FLOW_SLOTS - 1));
                meta.slot_seen = flow_slot.read(meta.slot_idx);
            } else {
                meta.slot_seen = meta.flows[63:32];    /* not a flow: never new */
            }

            /* ---- options: loss, reservations, Assured Forwarding ---------- */
            if (meta.checked == 1) {
                /* Random loss: drop when a uniform 32-bit draw is below the
                 * threshold; a lost packet goes no further (not metered, not
                 * dropped and counted again by the AF rule). */
                if (meta.loss_threshold != 0 && loss_draw.read() < meta.loss_threshold) {
                    drop_with(DROP_RANDOM_LOSS);
                } else {
                    if (meta.options & 0x80000000 != 0 && hdr.l4.isValid()) {
                        reservations.apply();             /* meter and mark (edge) */
                    }
                    /* Only in-profile packets may use the queue above the
                     * threshold; the FIFO's tail drop is all they see. (A mask,
                     * not the slice [30:0]: p4c-ebpf writes that slice as the
                     * whole 32-bit value.) */
                    if (meta.options & 0x7FFFFFFF != 0 && hdr.ipv4.dscp != DSCP_AF11
                            && meta.queue_bytes >= (meta.options & 0x7FFFFFFF)) {
                        drop_with(DROP_AF_OUT_OF_PROFILE);
                    }
                }
            }

            if (meta.dropped == 0) {
                /* ---- the packet joins the port's FIFO, unless it is full -- */
                if (meta.queue_fp == 0) {
                    queue_emptied.count(idx);
                }
                if (meta.has_queue == 1) {
                    v64 = meta.queue_fp + ((bit<64>)meta.frame_bytes << QUEUE_FP_SHIFT);
                    if (v64 <= meta.queue_limit_fp) {
                        meta.queue_fp = v64;
                    } else {
                        queue_full.count(idx);
                    }
                    queue_fp.write(idx, meta.queue_fp);
                    queue_time.write(idx, meta.now_ns);
                    v64 = meta.now_ns + (((meta.queue_fp >> 8) * meta.queue_drain) >> 24);
                    queue_dry.write(idx, v64);
                }

                /* ---- rare: a window closes, or a flow is new ------------ */
                v64 = window_end.read(idx);
                if (meta.now_us >= v64 || meta.slot_seen != meta.flows[63:32]) {
                    if (meta.now_us >= v64) {
                        window_config.apply();
                        meta.window_closed = 1;
                        port_config.apply();
                    } else {
                        meta.stamp_links = stamp_links.read(idx);
                        meta.stamp_share = stamp_share.read(idx);
                    }
                    if (meta.flow_key == 1 && meta.slot_seen != meta.flows[63:32]) {
                        /* current + 1 (at most FLOW_SLOTS: no carry into the
                         * epoch). Not a slice assignment: p4c-ebpf clears a
                         * 64-bit field's top half there (a 32-bit mask). */
                        meta.flows = meta.flows + 0x10000;
                        v32 = meta.flows[63:32];
                        flow_slot.write(meta.slot_idx, v32);
                    }
                    flows.write(idx, meta.flows);
                    /* N = max(flows this flow window, flows in the last) */
                    meta.flows_n = (bit<32>)meta.flows[15:0];
                    if ((bit<32>)meta.flows[31:16] > meta.flows_n) {
                        meta.flows_n = (bit<32>)meta.flows[31:16];
                    }
                    if (meta.flows_n > FLOW_SLOTS) {
                        meta.flows_n = FLOW_SLOTS;
                    }
                    flows_log.apply();                    /* the EBN share into the stamp */
                    stamp_links.write(idx, meta.stamp_links);
                    stamp_share.write(idx, meta.stamp_share);
                    if (meta.window_closed == 1 && meta.stamp_links[63:32] != 0) {
                        meta.send_digest = true;
                        meta.telemetry.port = meta.port;
                        meta.telemetry.pidx = meta.pidx[7:0];
                        meta.telemetry.window_start_us = meta.window_start_us;
                        meta.telemetry.queue_bytes = meta.bi_bytes;
                        meta.telemetry.flows_current = meta.flows[31:16];
                        meta.telemetry.flows_last = meta.flows[15:0];
                        meta.telemetry.ebn_code = meta.stamp_share[7:0];
                    }
                } else if (hdr.bwn.isValid()) {
                    meta.stamp_links = stamp_links.read(idx);
                    meta.stamp_share = stamp_share.read(idx);
                }

                /* ---- BWN DATA: the stamp ----------------------------------- */
                if (hdr.bwn.isValid() && hdr.bwn.version == BWN_VERSION && hdr.bwn.kind == BWN_KIND_DATA) {
                    stamp_packet();
                }

                /* ---- TTL - 1 and its checksum (RFC 1624 eq. 3) -------------- */
                /* The parser let only TTL >= 2 in. ~m + m' of the (TTL,
                 * protocol) word is 0xFEFF for a decrement, so HC' =
                 * ~(~HC + 0xFEFF) in one's complement: HC + 0x0100, or
                 * HC + 0x0101 when that sum carries (HC >= 0xFEFF), mod 2^16
                 * (tests/test_dataplane_math.py checks it for every HC). */
                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
                if (hdr.ipv4.hdr_checksum >= 0xFEFF) {
                    hdr.ipv4.hdr_checksum = hdr.ipv4.hdr_checksum + 0x0101;
                } else {
                    hdr.ipv4.hdr_checksum = hdr.ipv4.hdr_checksum + 0x0100;
                }
            }
        }
    }
}

control BwnEgress(inout psa_headers_t hdr, inout psa_metadata_t meta,
                  in psa_egress_input_metadata_t istd, inout psa_egress_output_metadata_t ostd) {
    apply { }   /* empty: PSA-eBPF then loads no egress program */
}

#endif
