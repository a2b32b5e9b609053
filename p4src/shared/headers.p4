/* -*- P4_16 -*- */
/*
 * bwn: packet headers. The BWN header is specified in docs/wire-format.md;
 * keep the two in sync (the PTF tests check the bytes against the vectors).
 */
#ifndef __BWN_HEADERS__
#define __BWN_HEADERS__

#include "define.p4"

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

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

/* IPv4's first 12 bytes (up to the checksum), for targets that extract the
 * addresses with what follows them (the flow key, flow_key_t) as one header:
 * BMv2 copies a list of fields into temporaries before hashing it, but not a
 * header. */
header ipv4_head_t {
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
}

/* IPv4 addresses and the TCP/UDP ports that follow them when the IPv4 header
 * has no options: the 5-tuple but the protocol, in one header, so that a
 * target can hash it (or match on it) as it stands. */
header flow_key_t {
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
    bit<16>     src_port;
    bit<16>     dst_port;
}

/* TCP: only the ports are needed (flow hashing, reservations), so only they
 * are extracted; a TCP segment is never modified. */
header l4_ports_t {
    bit<16> src_port;
    bit<16> dst_port;
}

/* The UDP header after its ports (targets that parse ports as l4_ports_t). */
header udp_tail_t {
    bit<16> length;
    bit<16> checksum;
}

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

/* Parser errors the switch counts as drop reasons (docs/wire-format.md). */
error {
    NotIPv4,
    IPv4HeaderTooShort,
    TtlExpired
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    l4_ports_t tcp;
    udp_t      udp;
    bwn_t      bwn;
}

#endif
