/* -*- P4_16 -*- */
/*
 * bwn on PSA-eBPF: headers, metadata and the telemetry digest.
 *
 * The packet's headers are p4src/shared's (docs/wire-format.md); PSA-eBPF
 * extracts and emits each field on its own, at no cost that depends on how
 * fields are grouped, so the program keeps the readable layouts. IPv4 options
 * are extracted word by word (opt1..opt10, extracted from opt10 down) so that
 * the header checksum can be verified over them: p4c-ebpf's InternetChecksum
 * takes fixed-width fields only.
 */
#ifndef __BWN_PSA_TYPES__
#define __BWN_PSA_TYPES__

/* Errors besides the shared ones: a header checksum that does not verify
 * (BMv2 reports it in standard_metadata.checksum_error; PSA has no such flag,
 * so the parser's last step verifies it and ends with this error). */
error {
    IPv4BadChecksum
}

header ipv4_option_word_t {
    bit<32> word;
}

struct psa_headers_t {
    ethernet_t         ethernet;
    ipv4_t             ipv4;
    ipv4_option_word_t opt10;   /* IHL 15: ten option words, extracted first */
    ipv4_option_word_t opt9;
    ipv4_option_word_t opt8;
    ipv4_option_word_t opt7;
    ipv4_option_word_t opt6;
    ipv4_option_word_t opt5;
    ipv4_option_word_t opt4;
    ipv4_option_word_t opt3;
    ipv4_option_word_t opt2;
    ipv4_option_word_t opt1;    /* IHL 6: only this one */
    l4_ports_t         l4;      /* TCP or UDP ports (IPv4 without options, not a fragment) */
    udp_tail_t         udp;     /* UDP length and checksum: BWN packets only */
    bwn_t              bwn;
}

/* The telemetry of one closed measurement window, sent to the controller as
 * a digest (one per port and window). Fields of at most 64 bits each: PSA-eBPF
 * keeps them as C integers. The fields of p4src/shared/telemetry.p4's
 * port_telemetry_t but two: the queue is the virtual queue's bytes (BI as the
 * program computed it; packets would take a division), and EBN's counts of
 * both flow windows are sent (the controller takes their maximum); the port
 * is both its ifindex and its register index. controller/ebpf.py
 * EbpfTelemetry decodes it into the same record as the shared struct. */
struct psa_port_telemetry_t {
    bit<32> port;              /* the egress port (its ifindex) */
    bit<32> window_start_us;   /* switch clock, low 32 bits */
    bit<32> capacity_kbps;     /* IC */
    bit<32> rate_kbps;         /* BR as a rate */
    bit<32> avail_kbps;        /* AB, int32 */
    bit<32> queue_bytes;       /* BI: the virtual queue when the window closed */
    bit<16> flows_current;     /* EBN's occupied hash slots, this flow window */
    bit<16> flows_last;        /* and the last complete one */
    bit<16> cap_log7;          /* log7(IC) */
    bit<8>  ebn_code;          /* the port's stamped EBN code */
    bit<8>  pidx;              /* the port's register index */
}

struct empty_t {}

/* Working values of one packet. PSA-eBPF keeps headers and metadata in a
 * per-CPU map and zeroes them for every packet. */
struct psa_metadata_t {
    /* parser */
    bit<1>  parsed;             /* the packet parsed and its IPv4 checksum verified */
    bit<1>  at_ipv4;            /* how far the parser got: the IPv4 header, */
    bit<1>  at_ttl;             /* a TTL below 2, */
    bit<1>  at_bwn;             /* the UDP tail and BWN header of a BWN packet, */
    bit<1>  at_checksum;        /* the header checksum (every header extracted) */
    bit<1>  flow_key;           /* TCP or UDP without IPv4 options, not a fragment */
    /* route */
    bit<1>  routed;             /* a route matched (the port is known) */
    bit<1>  dropped;            /* dropped by this program (after the route) */
    bit<1>  checked;            /* the route has options (loss, reservations, AF) */
    bit<32> port;               /* egress port (ifindex) */
    bit<32> pidx;               /* the port's register index (< MAX_PORTS) */
    bit<32> slot_base;
    bit<32> loss_threshold;
    bit<32> options;            /* bit 31 reservations, bits 30..0 AF threshold (bytes) */
    bit<32> frame_bytes;        /* IPv4 total length + 14: what the port's qdisc counts */
    /* time */
    bit<64> now_ns;
    bit<64> now_us;
    /* OBP's BR */
    bit<64> rx_before;          /* the port's received bytes before this packet */
    /* the virtual queue (docs/dataplane.md, "PSA on eBPF") */
    bit<1>  has_queue;
    bit<64> queue_rate;         /* bytes per ns * 2^32 */
    bit<64> queue_idle_ns;      /* a gap this long empties the queue */
    bit<64> queue_limit_fp;     /* the FIFO's limit, in 2^-16 bytes */
    bit<64> queue_drain;        /* ns per 2^-16 byte * 2^32 */
    bit<64> queue_fp;           /* the queue after draining to now, 2^-16 bytes */
    bit<32> queue_bytes;
    /* EBN's N */
    bit<32> slot_idx;
    bit<32> slot_seen;
    bit<64> flows;              /* epoch[63:32] ++ current[31:16] ++ last[15:0] */
    /* the rare path */
    bit<1>  window_closed;
    bit<32> br_bytes;
    bit<32> bi_bytes;
    bit<32> window_start_us;
    bit<32> flows_n;            /* N = max(current, last), <= FLOW_SLOTS */
    bit<64> stamp_links;        /* narrow[63:32] ++ tight[31:0] */
    bit<32> stamp_share;        /* log7(IC)[31:16] ++ 0 ++ EBN code[7:0] */
    /* telemetry */
    bool             send_digest;
    psa_port_telemetry_t telemetry;
}

#endif
