/* -*- P4_16 -*- */
/*
 * bwn: the headers on the wire, as every architecture parses them. The BWN
 * header is specified in docs/wire-format.md; keep the two in sync (the PTF
 * tests check the bytes against the vectors).
 */
#ifndef __BWN_HEADERS__
#define __BWN_HEADERS__

#include "define.p4"

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

/* IPv4 without its options (RFC 791). */
header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<1>      flag_reserved;
    bit<1>      flag_df;
    bit<1>      flag_mf;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

/* The ports of TCP and of UDP: what a flow key and the reservations need.
 * A TCP segment is never modified, so only its ports are extracted. */
header l4_ports_t {
    bit<16> src_port;
    bit<16> dst_port;
}

/* The UDP header after its ports, for programs that parse the ports as
 * l4_ports_t: extracted for BWN packets only (the stamp zeroes the checksum). */
header udp_tail_t {
    bit<16> length;
    bit<16> checksum;
}

/* The whole UDP header, for programs that parse it as one. */
header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* 24 bytes. tight_kbps and echo_tight_kbps are two's-complement int32 on the
 * wire; P4 compares them after a cast to int<32>. */
header bwn_t {
    bit<4>  version;
    bit<4>  kind;
    bit<8>  hop_count;
    bit<8>  ebn_code;
    bit<8>  echo_ebn_code;
    bit<32> narrow_kbps;
    bit<32> tight_kbps;
    bit<32> echo_narrow_kbps;
    bit<32> echo_tight_kbps;
    bit<8>  echo_hop_count;
    bit<8>  flags;
    bit<16> reserved;
}

/* 24 bytes, after the BWN header when its flags have BWN_FLAG_XR (docs/wire-format.md,
 * "The XR header"): XCP's congestion header and RCP's rate. feedback_bytes and
 * echo_feedback_bytes are two's-complement int32 on the wire. */
header xr_t {
    bit<32> rtt_us;
    bit<32> cwnd_bytes;
    bit<32> feedback_bytes;
    bit<32> rate_kbps;
    bit<32> echo_feedback_bytes;
    bit<32> echo_rate_kbps;
}

/* Parser errors the switch counts as drop reasons (docs/wire-format.md). */
error {
    NotIPv4,
    IPv4HeaderTooShort,
    TtlExpired
}

#endif
