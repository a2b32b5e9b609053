#!/usr/bin/env bash
# =============================================================================
#  ebpf-build.sh: compile a PSA program for the Linux kernel (TC) with
#  p4c-ebpf, then clang and llc, into a BPF object that NIKSS loads.
#
#  Usage: scripts/ebpf-build.sh PROGRAM.p4 OUT_DIR    (make build-ebpf runs it)
#
#  Writes OUT_DIR/NAME.c (p4c-ebpf's C), OUT_DIR/NAME.o (the object) and
#  OUT_DIR/NAME.log. The steps are those of p4c's runtime/kernel.mk ("psa"),
#  with two fixes this p4c-ebpf (v1.2.5.16) needs on this kernel:
#    - its C names signed integers i8..i64, which its runtime headers do not
#      declare: clang gets -Di64=s64 (and the others);
#    - its TC ingress program reads PSA's global metadata (packet path, "pass
#      to kernel") from skb->cb without setting it, and the kernel leaves other
#      data there (GRO's, on veths): a packet may then skip the pipeline, or a
#      non-IPv4 frame keep the IPv4 EtherType that the XDP helper gave it. bwn
#      never resubmits across hooks, recirculates or sends a packet to the
#      kernel, so every packet that enters the TC ingress is a fresh NORMAL one:
#      the program sets those fields so before using them.
#  EBPF_RUNTIME (default /usr/local/share/p4c/backends/ebpf/runtime) is where
#  kernel.mk and the headers of the generated C are.
# =============================================================================
set -euo pipefail

die() { echo "ebpf-build: ERROR: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: $0 PROGRAM.p4 OUT_DIR"
src=$1 out=$2
[ -f "$src" ] || die "$src: no such file"
RT=${EBPF_RUNTIME:-/usr/local/share/p4c/backends/ebpf/runtime}
for tool in p4c-ebpf clang llc; do
    command -v "$tool" >/dev/null || die "$tool is not installed (scripts/p4-toolchain.sh: P4_EBPF_TOOLCHAIN=... or P4_WITH_EBPF=1)"
done
[ -f "$RT/psa.h" ] || die "$RT/psa.h missing: the eBPF runtime is not installed"
name=$(basename "$src" .p4)
mkdir -p "$out"
c="$out/$name.c" log="$out/$name.log"

# 1. P4 -> C (--Wdisable=unused: p4c-ebpf warns about PSA's unused metadata)
p4c-ebpf --arch psa --target kernel --Wdisable=unused -o "$c" "$src" >"$log" 2>&1 \
    || { cat "$log" >&2; die "p4c-ebpf failed on $src"; }
grep -v -e '^Setting XDP2TC' -e 'Invalid key type .* replacing with u32' "$log" >&2 || true

# 2. the skb->cb fix (see above); the pattern must be there exactly once
pattern='    if (compiler_meta__->pass_to_kernel == true) return TC_ACT_OK;'
[ "$(grep -cxF "$pattern" "$c")" = 1 ] \
    || die "$c: p4c-ebpf's TC ingress preamble is not the expected one; the skb->cb fix needs revisiting"
sed -i "s/^    if (compiler_meta__->pass_to_kernel == true) return TC_ACT_OK;\$/\
    \/* bwn (scripts\/ebpf-build.sh): a fresh packet from a port; skb->cb holds what the kernel left there *\/\n\
    compiler_meta__->packet_path = NORMAL;\n\
    compiler_meta__->instance = 0;\n\
    compiler_meta__->pass_to_kernel = false;/" "$c"

# 3. C -> BPF (kernel.mk's flags; BTF for NIKSS)
CFLAGS=(-O2 -g -c -emit-llvm -DBTF -D__KERNEL__ -D__ASM_SYSREG_H
        -Di8=s8 -Di16=s16 -Di32=s32 -Di64=s64
        -Wno-unused-value -Wno-pointer-sign -Wno-compare-distinct-pointer-types
        -Wno-gnu-variable-sized-type-not-at-end -Wno-address-of-packed-member
        -Wno-tautological-compare -Wno-unknown-warning-option -Wno-parentheses-equality
        -Wno-incompatible-pointer-types -Wno-implicit-function-declaration)
clang -I"$RT" "${CFLAGS[@]}" -o "$out/$name.bc" "$c" >>"$log" 2>&1 \
    || { tail -n 30 "$log" >&2; die "clang failed on $c"; }
llc -march=bpf -mcpu=generic -filetype=obj -o "$out/$name.o" "$out/$name.bc" >>"$log" 2>&1 \
    || { tail -n 30 "$log" >&2; die "llc failed on $out/$name.bc"; }
rm -f "$out/$name.bc"
echo "ebpf-build: $out/$name.o ($(stat -c %s "$out/$name.o") bytes) from $src"
