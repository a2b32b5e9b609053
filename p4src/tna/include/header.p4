/* -*- P4_16 -*- */
/*
 * bwn (TNA): the headers a packet is parsed into, what the ingress bridges to
 * the egress, and the metadata of each gress.
 */
#ifndef __BWN_TNA_HEADER__
#define __BWN_TNA_HEADER__

#include "../../shared/define.p4"
#include "../../shared/headers.p4"

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
    bit<1>  red;              /* the port runs RED with ECN marking (the route's option) */
    bit<7>  pad;
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
    bit<32> options;              /* bit 31 reservations, 30 guaranteed, 29 RED, 28..0 AF threshold */
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
    /* RED */
    bit<8>   red_verdict;         /* the Wred unit's pick (RED_PICKED) */
    bit<1>   ipv4_csum;           /* the egress changed IPv4 (ECN): the deparser recomputes the checksum */
}


#endif
