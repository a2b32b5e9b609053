/* -*- P4_16 -*- */
/*
 * bwn (v1model): the headers a packet is parsed into, and the metadata the
 * controls hand each other, grouped by the control that writes them.
 */
#ifndef __BWN_V1MODEL_HEADER__
#define __BWN_V1MODEL_HEADER__

#include "../../shared/define.p4"
#include "../../shared/headers.p4"
#include "../../shared/telemetry.p4"

/* IPv4's options (up to the 40 bytes IHL allows): parsed only to verify the
 * header checksum (RFC 1812 sec. 5.2.2), never changed. */
header ipv4_options_t {
    varbit<320> options;
}

/*************************************************************************
 *  Working values of XCP and RCP (control/xcp.p4, control/rcp.p4) and of
 *  their logarithms (control/logexp.p4): headers that the control using them
 *  makes valid, never parsed nor emitted. BMv2 sets every metadata field to 0
 *  for every packet but resets a header by its valid bit only, so as headers
 *  they cost nothing to the packets that do not need them (docs/dataplane.md,
 *  "Per-packet cost on BMv2"). Every field is written before it is read.
 *  Logs are log7 (128 per octave).
 *************************************************************************/

/* Log7 and Exp7's scratch: every instance uses it and leaves nothing in it
 * that another needs. */
header logexp_t {
    bit<64> wide;               /* Log7: x shifted to keep LOG_MANTISSA_BITS + 1 bits */
    int<32> log_base;           /* Log7: 128 * the leading one's position */
    bit<16> log_m;              /* Log7: the mantissa, rounded (256 .. 512) */
    bit<64> exp_m;              /* Exp7: 2^(f / 128) * 2^15 */
}

/* XCP: the egress port's state, the packet's terms, and what the close of a
 * control interval computes. */
header xcp_work_t {
    bit<32> cap_kbps;           /* the port's capacity (0: not configured) */
    bit<16> cap_log7;           /* log7 of it, kb/s */
    bit<48> interval_end;       /* the port's registers (control/xcp.p4) */
    bit<48> interval_start;
    bit<32> rx_mark;
    bit<64> sum_a;
    bit<64> sum_b;
    bit<64> sum_s;
    bit<64> queue_min;
    bit<32> d_us;
    int<32> log_d;
    int<32> log_xi_p;
    int<32> log_xi_n;
    bit<32> intervals;
    bit<32> rx_before;          /* the port's received bytes before this packet */
    bit<64> queue_pkts;         /* the queue this packet met (enq_qdepth) */
    int<32> log_alpha;          /* xcp_port */
    int<32> log_beta;
    int<32> log_gamma;
    int<32> log_queue_unit;
    bit<32> d_init_us;
    int<32> log_d_init;
    int<32> log_d_min;
    int<32> log_d_max;
    int<32> log_rtt;            /* the packet: log7 of rtt, cwnd, size, a = rtt s / cwnd */
    int<32> log_cwnd;
    int<32> log_size;
    int<32> log_a;
    bit<64> a;                  /* rtt s / cwnd in 1/1024 us */
    bit<64> b;                  /* rtt^2 s / cwnd in us^2 */
    bit<64> pos;                /* p (a packet) or h + max(phi, 0) (a close), bytes */
    bit<64> neg;                /* n (a packet) or h + max(-phi, 0) (a close), bytes */
    bit<32> feedback;           /* p - n, int32 */
    bit<64> t_us;               /* the close: T, y, and the terms of eqs. (1) and (2) */
    bit<64> y_bytes;
    int<32> log_arg;            /* the log7 an Exp7 is handed */
    int<32> log_x;              /* log7 of what a close needs, one value after another */
    int<32> log_t;
    int<32> log_sum_a;
    int<32> log_ydt;            /* log7(y d / T) */
    bit<64> d64;
    bit<64> t1;                 /* alpha d C */
    bit<64> t2;                 /* alpha d y / T */
    bit<64> t3;                 /* beta Q */
    bit<64> t4;                 /* gamma y d / T */
    int<64> phi;
    bit<64> abs_phi;            /* |phi|; |p - n| of a packet */
    bit<64> h;
}

/* RCP: the egress port's state and the close of an interval. */
header rcp_work_t {
    bit<32> cap_kbps;           /* the port's capacity, kb/s (0: not configured) */
    bit<16> cap_log7;           /* its log7 */
    bit<48> interval_end;       /* the port's registers (control/rcp.p4) */
    bit<48> interval_start;
    bit<32> rx_mark;
    bit<32> rate_kbps;
    bit<32> d0_us;
    bit<32> intervals;
    bit<32> rx_before;          /* the port's received bytes before this packet */
    bit<32> next_us;            /* the next interval: d0 within its bounds */
    int<32> log_alpha;          /* rcp_port */
    int<32> log_beta;
    int<32> log_queue_unit;
    bit<32> d_init_us;
    bit<32> d_min_us;
    bit<32> d_max_us;
    bit<32> rate_min_kbps;
    bit<64> t_us;               /* the close: T, y, q, d0 and R as Log7 takes them */
    bit<64> y_bytes;
    bit<64> queue_pkts;
    bit<64> d0_64;
    bit<64> rate64;
    int<32> log_rate;
    int<32> log_t;
    int<32> log_d0;
    int<32> log_x;
    int<32> log_arg;            /* the log7 an Exp7 is handed */
    bit<64> up;                 /* R alpha T / d0 */
    bit<64> down;               /* R alpha y / (d0 C) */
    bit<64> queue;              /* R beta T q / (d0^2 C) */
    int<64> rate;
}

struct headers_t {
    ethernet_t     ethernet;
    ipv4_t         ipv4;
    ipv4_options_t ipv4_options;
    l4_ports_t     l4_ports;    /* TCP or UDP ports: IPv4 without options, not a fragment */
    udp_tail_t     udp;         /* UDP length and checksum: BWN packets only */
    bwn_t          bwn;
    xr_t           xr;          /* XCP and RCP: BWN DATA with flag XR only */
    logexp_t       logexp;      /* working values (above): never on the wire */
    xcp_work_t     xcp_work;
    rcp_work_t     rcp_work;
}

/*************************************************************************
 *  Metadata. BMv2 sets every field to 0 for every packet: a field that a
 *  control reads is either written first on that path or meant to be 0.
 *************************************************************************/

/* Routing: what the packet's route says about its egress port. */
struct route_metadata_t {
    bool    has_options;        /* a route_*_checked action: loss, reservations or AF */
    bit<32> loss_threshold;     /* RandomLoss: drop when a uniform 32-bit draw is below it */
    bit<1>  reservation_edge;   /* Reservations: this switch meters and marks reserved flows */
    bit<1>  guaranteed;         /* GuaranteedService: AF11 packets take the priority queue */
    bit<1>  red;                /* RedEcn (ingress), RedDeparture (egress): the port runs RED with ECN marking */
    bit<31> af_threshold_pkts;  /* AssuredForwarding: the queue threshold (0: off) */
    bit<32> slot_base;          /* Flows: the egress port's first hash slot */
}

/* Reservations: the meter's colour, and RFC 1624's update of the checksum. */
struct reservation_metadata_t {
    bit<8>  color;              /* the direct meter's colour (METER_GREEN: in profile) */
    bit<16> tos_word;           /* IPv4's first 16 bits before the DSCP is marked (m) */
    bit<32> csum_sum;           /* ~HC + ~m + m', folded to 16 bits */
}

/* Window: the egress port's measurement window (OBP's BR, BI and AB). */
struct window_metadata_t {
    bit<32> charge_bytes;       /* what this packet counts in BR: its length, or a slot */
    bit<32> rx_bytes;           /* bytes received for the port, this packet included */
    bit<32> rx_before;          /* ... and before it (when it closes the window) */
    bit<48> end_us;             /* when the port's current window ends */
    bool    closed;             /* this packet closed the port's window ... */
    bit<48> start_us;           /* ... and starts the next one here */
    bit<32> br_bytes;           /* BR of the window that closed */
    bit<32> br_kbps;            /* the same as a rate */
    bit<32> bi_bytes;           /* BI: the queue when it closed, in bytes */
    bit<19> queue_pkts;         /* that queue in packets, BMv2's unit (AF reads it too) */
    bit<16> cap_log7;           /* log7 of the port's capacity IC (for the EBN share) */
    bit<32> flow_epoch;         /* the flow window this packet is in (Flows rolls to it) */
    bit<32> flow_window_us;     /* the flow window's length */
}

/* Flows: EBN's active flows at the egress port (linear counting). */
struct flow_metadata_t {
    bit<32> slot_index;         /* the flow's hash slot: slot_base + crc32(flow key) % FLOW_SLOTS */
    bit<32> slot_epoch;         /* the flow window in which that slot was last seen */
    bit<32> epoch;              /* the port's current flow window */
    bit<16> current;            /* slots seen in the current flow window */
    bit<16> last;               /* slots seen in the last complete one */
    bit<16> n;                  /* N = max(current, last), at most FLOW_SLOTS */
    bool    is_new;             /* the packet's flow is new in this flow window */
    bit<32> share_log7;         /* log7(C / N), then the EBN code */
}

/* The egress port's stamp: computed by the ingress when the port's window
 * closes or its flow count changes, read back by the egress for BWN DATA. */
struct stamp_metadata_t {
    bit<8>  ebn_code;           /* EBN: the port's per-flow share */
    bit<32> narrow_kbps;        /* OBP's narrow link: its capacity IC (0: not configured, no stamp) */
    bit<32> tight_kbps;         /* OBP's tight link: its available bandwidth AB, int32 as bits */
}

/* RedEcn: RED's average queue at the egress port, and its decision on the
 * packet's arrival (control/red_ecn.p4; docs/dataplane.md, "RED with ECN marking"). */
struct red_metadata_t {
    bit<32> avg;                /* the port's average queue, packets << RED_FRAC_BITS */
    bit<19> queue_pkts;         /* the queue this packet joins (estimated: port_state.p4), packets */
    bit<19> arrivals;           /* the packets RED let in since the port's last departure */
    bit<32> sample;             /* queue_pkts << RED_FRAC_BITS */
    bit<32> level;              /* avg in RED_LEVEL units (1/4 packet): red_probability's key */
    bit<32> min_level;          /* min_th and 2 max_th of the port, same unit */
    bit<32> top_level;
    bit<32> prob;               /* the marking probability at avg, 2^-24 units */
    bit<32> since_mark;         /* the probabilities summed since the last mark */
    bit<32> next_mark;          /* the sum that triggers the next one, less 1 (uniform in [0, 1)) */
    bit<32> idle_us;            /* how long the queue was empty before this packet */
    bit<2>  decision;           /* RED_PASS, RED_SIGNAL (mark ECT, drop the rest), RED_FORCED (drop) */
    bool    dropped;            /* RED dropped it: not handed to the port (PortCounters) */
    bit<16> tos_word;           /* IPv4's first 16 bits before the mark (RFC 1624's m) */
    bit<32> csum_sum;
}

struct local_metadata_t {
    bool                   drop;          /* dropped at the end of the ingress ... */
    bit<8>                 drop_reason;   /* ... and counted under this reason */
    bit<32>                loss_draw;     /* RandomLoss's uniform draw */
    route_metadata_t       route;
    reservation_metadata_t reservation;
    window_metadata_t      window;
    flow_metadata_t        flows;
    stamp_metadata_t       stamp;
    red_metadata_t         red;
}

#endif
