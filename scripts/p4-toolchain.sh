#!/usr/bin/env bash
# =============================================================================
#  p4-toolchain.sh: install the P4 toolchain bwn needs (p4c, BMv2, PI; and
#  p4c's eBPF back end with NIKSS for the PSA-eBPF switch)
# =============================================================================
#
#  Pinned versions (the ones every figure and test of bwn was made with):
#    PI                p4lang/PI                f96af95  (--with-proto, no CLI)
#    behavioral-model  p4lang/behavioral-model  9674187  (--with-pi --with-thrift)
#    p4c               p4lang/p4c               v1.2.5.16 (bmv2 back end, p4test;
#                      Abseil 20240722.1, Protobuf 25.3, p4runtime ec4eb5ef as
#                      local sources; with P4_WITH_TOFINO=1 also the Tofino back
#                      end, which needs Z3 z3-4.13.3 and spdlog v1.8.3)
#    eBPF (P4_WITH_EBPF=1 or P4_EBPF_TOOLCHAIN=...): p4c v1.2.5.16's eBPF back
#                      end (p4c-ebpf, PSA) with its runtime (kernel.mk, libbpf
#                      headers from bpftool v7.5.0 / libbpf v1.5.0), and NIKSS
#                      b8b1e82 (nikss-ctl, libnikss) with its pinned libbpf
#                      v0.5.0 (5579664) linked in statically
#
#  Usage: scripts/p4-toolchain.sh [install|build|build-ebpf|pack OUT.tar.zst|verify|status|help]
#
#    install (default)  Try, in this order, and say which way was taken:
#        1. prebuilt:  P4_TOOLCHAIN=FILE.tar.zst, a usr/local/ tree plus the
#                      list of Debian runtime packages it needs (FILE.apt.txt
#                      beside it, or usr/local/share/bwn-p4-toolchain/apt.txt
#                      inside it). apt-installs those, unpacks at /, ldconfig,
#                      verifies. P4_BMV2_FAST=FILE.tar.zst adds the BMv2 built
#                      for speed (an opt/bmv2-perf/ tree) used by experiments.
#        2. packages:  the p4lang repository on openSUSE's build service, for
#                      Ubuntu (and Debian where it has a build), if reachable
#                      and P4_SRC is not set (P4_NO_PACKAGES=1 skips it).
#                      Its versions are the repository's, not the pins above.
#        3. source:    `build` below, then installs under /usr/local.
#       Already installed and verified: does nothing (P4_FORCE=1 reinstalls).
#       Then the eBPF toolchain, on top, when asked for:
#        - prebuilt:   P4_EBPF_TOOLCHAIN=FILE.tar.zst, a usr/local/ tree that only
#                      adds files (p4c-ebpf, the eBPF runtime, NIKSS), with its
#                      package list FILE.apt.txt beside it (or usr/local/share/
#                      bwn-p4-toolchain/ebpf-apt.txt inside it); or
#        - source:     P4_WITH_EBPF=1, `build-ebpf` below (needs p4c installed).
#    build   Build from source outside the repository, in P4_BUILD_DIR
#            (default /var/tmp/bwn-p4-toolchain), every step logged to
#            P4_BUILD_DIR/logs/ with its wall time in logs/TIMES. Sources come
#            from P4_SRC=DIR (offline: DIR/{PI,behavioral-model,p4c,abseil-cpp,
#            protobuf,p4runtime}, PI's submodules checked out; plus DIR/{z3,spdlog}
#            for the Tofino back end), or are cloned at the pins when online.
#            Installs into the stage P4_BUILD_DIR/stage, then copies it to /.
#            P4_FAST_BMV2=0 skips the second BMv2 built for speed (/opt/bmv2-perf).
#            P4_WITH_TOFINO=1 also builds p4c's Tofino back end (bf-p4c, p4c-tofino).
#            P4_WITH_EBPF=1 also runs `build-ebpf`.
#    build-ebpf  Build the eBPF toolchain from source, in P4_BUILD_DIR: a p4c
#            tree with only the eBPF back end, its runtime, and NIKSS; staged in
#            P4_BUILD_DIR/stage-ebpf (only files the main toolchain does not
#            have), then copied to /. Sources from P4_SRC=DIR (offline:
#            DIR/{p4c,abseil-cpp,protobuf,p4runtime} as for `build`, plus
#            DIR/bpftool (libbpf/bpftool v7.5.0 with its libbpf submodule) and
#            DIR/nikss (NIKSS b8b1e82 with its libbpf submodule)), or cloned.
#            P4_STAGE_ONLY=1 stops at the stage (nothing installed at /: build
#            and `pack` on a machine whose own toolchain is left alone).
#    pack OUT.tar.zst  Pack the stage of the last build in the prebuilt format
#            (OUT.tar.zst + OUT.apt.txt; OUT-bmv2-fast.tar.zst when built;
#            OUT-ebpf.tar.zst + OUT-ebpf.apt.txt when the eBPF toolchain was
#            built), so one build serves many machines: P4_TOOLCHAIN=OUT.tar.zst
#            (and P4_EBPF_TOOLCHAIN=OUT-ebpf.tar.zst) on each.
#    verify  Check an installed toolchain: p4c --version, simple_switch_grpc --help,
#            BMv2's Thrift modules import with /usr/bin/python3; and the eBPF
#            toolchain when it is installed (or asked for): p4c-ebpf --version,
#            nikss-ctl, kernel.mk and the libbpf headers, clang and llc with BPF.
#    status  What is installed and where (one line each for P4 and eBPF).
#
#  Needs root (apt-get, /usr/local). Tested on Debian 12 amd64; see README.md,
#  "The P4 toolchain", for times and other systems.
# =============================================================================
set -euo pipefail

PI_COMMIT=f96af95
BMV2_COMMIT=9674187
P4C_TAG=v1.2.5.16
ABSEIL_TAG=20240722.1
PROTOBUF_TAG=v25.3
P4RUNTIME_COMMIT=ec4eb5ef70dbcbcbf2f8357a4b2b8c2f218845a5
Z3_TAG=z3-4.13.3
SPDLOG_TAG=v1.8.3
BPFTOOL_TAG=v7.5.0                                          # p4c's eBPF runtime (kernel.mk's libbpf headers)
BPFTOOL_LIBBPF_COMMIT=09b9e83102eb8ab9e540d36b4559c55f3bcdb95d   # its libbpf submodule: v1.5.0
NIKSS_COMMIT=b8b1e829ce364d9caaf3ead9c37e376578edf287
NIKSS_LIBBPF_COMMIT=5579664205e42194e1921d69d0839f660c801a4d     # NIKSS's submodule: libbpf v0.5.0

PREFIX=/usr/local
FAST_PREFIX=/opt/bmv2-perf
BUILD_DIR=${P4_BUILD_DIR:-/var/tmp/bwn-p4-toolchain}
LOG_DIR=$BUILD_DIR/logs
STAGE=$BUILD_DIR/stage
FAST_STAGE=$BUILD_DIR/stage-fast
EBPF_STAGE=$BUILD_DIR/stage-ebpf
EBPF_RUNTIME=share/p4c/backends/ebpf/runtime   # under PREFIX
STAMP_DIR=share/bwn-p4-toolchain     # under PREFIX: what was installed, and how
JOBS=${P4_JOBS:-$(nproc)}
SYS_PYTHON=/usr/bin/python3
PY_DIST=$PREFIX/lib/python3.$($SYS_PYTHON -c 'import sys; print(sys.version_info[1])' 2>/dev/null || echo 11)/dist-packages

say() { echo "p4-toolchain: $*"; }
die() { echo "p4-toolchain: ERROR: $*" >&2; exit 1; }

need_root() {
    [ "$(id -u)" = 0 ] || die "needs root (apt-get and $PREFIX); run it with sudo"
}

# Run one logged, timed build step: step NAME CMD...
step() {
    local name=$1; shift
    local slug
    slug=$(echo "$name" | tr -c 'A-Za-z0-9._\n-' '-')
    local log="$LOG_DIR/$(date +%H%M%S)-$slug.log" start=$SECONDS rc=0
    say "$name (log: $log)"
    "$@" >"$log" 2>&1 || rc=$?
    echo "$name: $((SECONDS - start)) s rc=$rc" >>"$LOG_DIR/TIMES"
    if [ $rc -ne 0 ]; then
        tail -n 30 "$log" >&2
        die "$name failed (exit $rc); the whole log is $log"
    fi
}

apt_install() {  # apt-get install, refreshing the package lists once if that fails
    command -v apt-get >/dev/null || die "no apt-get: install these packages yourself: $*"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "$@" \
        || { apt-get update -q && apt-get install -y -q --no-install-recommends "$@"; } \
        || die "apt-get could not install: $*"
}

# ---------------------------------------------------------------- verify / status
verify() {
    local ok=0
    if ! command -v p4c >/dev/null; then say "verify: p4c is not on PATH"; ok=1
    elif ! p4c --version >/dev/null 2>&1; then say "verify: p4c --version fails"; ok=1; fi
    if ! command -v simple_switch_grpc >/dev/null; then say "verify: simple_switch_grpc is not on PATH"; ok=1
    elif ! simple_switch_grpc --help >/dev/null 2>&1; then say "verify: simple_switch_grpc --help fails"; ok=1; fi
    if ! $SYS_PYTHON -c 'import sswitch_runtime, bm_runtime' >/dev/null 2>&1; then
        say "verify: $SYS_PYTHON cannot import BMv2's Thrift modules (sswitch_runtime, bm_runtime)"; ok=1
    fi
    if [ -x "$FAST_PREFIX/bin/simple_switch_grpc" ] && ! "$FAST_PREFIX/bin/simple_switch_grpc" --help >/dev/null 2>&1; then
        say "verify: $FAST_PREFIX/bin/simple_switch_grpc is there but does not run"; ok=1
    fi
    return $ok
}

ebpf_wanted() {  # the eBPF toolchain is asked for (or already here)
    [ -n "${P4_EBPF_TOOLCHAIN:-}" ] || [ "${P4_WITH_EBPF:-0}" = 1 ] || command -v p4c-ebpf >/dev/null 2>&1 \
        || command -v nikss-ctl >/dev/null 2>&1
}

# The eBPF toolchain: p4c-ebpf, the runtime kernel.mk and the generated C
# include, NIKSS (nikss-ctl and libnikss), and the compile flow's clang and llc.
verify_ebpf() {
    local ok=0 rt="$PREFIX/$EBPF_RUNTIME"
    if ! command -v p4c-ebpf >/dev/null; then say "verify: p4c-ebpf is not on PATH"; ok=1
    elif ! p4c-ebpf --version >/dev/null 2>&1; then say "verify: p4c-ebpf --version fails"; ok=1; fi
    local f
    for f in kernel.mk psa.h ebpf_kernel.h install/libbpf/include/bpf/bpf_helpers.h; do
        [ -f "$rt/$f" ] || { say "verify: $rt/$f is missing (the eBPF runtime)"; ok=1; }
    done
    if ! command -v nikss-ctl >/dev/null; then say "verify: nikss-ctl is not on PATH"; ok=1
    elif ! nikss-ctl help >/dev/null 2>&1; then say "verify: nikss-ctl help fails: $(nikss-ctl help 2>&1 | head -n 1)"; ok=1; fi
    [ -f "$PREFIX/lib/libnikss.so" ] || { say "verify: $PREFIX/lib/libnikss.so is missing"; ok=1; }
    if ! command -v clang >/dev/null || ! command -v llc >/dev/null; then
        say "verify: clang and llc (the eBPF compile flow) are not both on PATH"; ok=1
    elif ! llc -march=bpf -mattr=help >/dev/null 2>&1; then say "verify: llc has no BPF target"; ok=1; fi
    return $ok
}

status() {
    local rc=0
    if verify >/dev/null 2>&1; then
        local how="by hand or unknown"
        [ -f "$PREFIX/$STAMP_DIR/installed" ] && how=$(cat "$PREFIX/$STAMP_DIR/installed")
        local fast="no fast BMv2"
        [ -x "$FAST_PREFIX/bin/simple_switch_grpc" ] && fast="fast BMv2 in $FAST_PREFIX"
        local tofino="no Tofino back end"
        command -v p4c-tofino >/dev/null 2>&1 || command -v bf-p4c >/dev/null 2>&1 && tofino="Tofino back end"
        say "installed: $(p4c --version 2>/dev/null | tail -n 1), $(command -v simple_switch_grpc); $fast; $tofino; installed $how"
    else
        say "not installed (p4c, simple_switch_grpc or BMv2's Python modules missing)"
        rc=1
    fi
    if verify_ebpf >/dev/null 2>&1; then
        local ehow="by hand or unknown"
        [ -f "$PREFIX/$STAMP_DIR/ebpf-installed" ] && ehow=$(cat "$PREFIX/$STAMP_DIR/ebpf-installed")
        say "eBPF: p4c-ebpf $(p4c-ebpf --version 2>&1 | tail -n 1 | sed 's/^Version //'), $(command -v nikss-ctl) and libnikss; installed $ehow"
    elif ebpf_wanted; then
        say "eBPF: incomplete ($(verify_ebpf 2>&1 | sed 's/^p4-toolchain: verify: //' | paste -sd';' -))"
        rc=1
    else
        say "eBPF: not installed (P4_EBPF_TOOLCHAIN=FILE.tar.zst or P4_WITH_EBPF=1)"
    fi
    return $rc
}

# ---------------------------------------------------------------- 1. prebuilt
apt_list_for() {   # the runtime package list of a prebuilt tarball, or nothing
    local tarball=$1 beside="${1%.tar.zst}.apt.txt"
    if [ -f "$beside" ]; then cat "$beside"; return; fi
    zstd -dc "$tarball" | tar -xO "usr/local/$STAMP_DIR/apt.txt" 2>/dev/null || true
}

install_prebuilt() {
    local tarball=$1
    [ -f "$tarball" ] || die "P4_TOOLCHAIN=$tarball: no such file"
    case "$tarball" in *.tar.zst) ;; *) die "P4_TOOLCHAIN=$tarball: expected a .tar.zst (made by '$0 pack')";; esac
    local sum
    sum=$(sha256sum "$tarball" | cut -d' ' -f1)
    if [ "${P4_FORCE:-0}" != 1 ] && [ "$(cat "$PREFIX/$STAMP_DIR/sha256" 2>/dev/null)" = "$sum" ] && verify >/dev/null 2>&1; then
        say "prebuilt $tarball is already installed and verified"
    else
        command -v zstd >/dev/null || apt_install zstd
        local pkgs
        pkgs=$(apt_list_for "$tarball" | tr '\n' ' ')
        [ -n "$pkgs" ] || die "$tarball has no package list (${tarball%.tar.zst}.apt.txt beside it, or usr/local/$STAMP_DIR/apt.txt in it)"
        say "installing the runtime packages of $tarball: $pkgs"
        # shellcheck disable=SC2086
        apt_install $pkgs
        # Only usr/local (and its packaging stamp) may come from this tarball.
        local bad
        bad=$(zstd -dc "$tarball" | tar -t | grep -v -E '^(\./)?(usr/?|usr/local(/.*)?)$' | head -n 3 || true)
        [ -z "$bad" ] || die "$tarball holds files outside usr/local/ (e.g. $bad); refusing to unpack it at /"
        say "unpacking $tarball at /"
        zstd -dc "$tarball" | tar -C / -x --no-same-owner
        ldconfig
        mkdir -p "$PREFIX/$STAMP_DIR"
        echo "$sum" >"$PREFIX/$STAMP_DIR/sha256"
        echo "from prebuilt $(basename "$tarball") on $(date -u +%F)" >"$PREFIX/$STAMP_DIR/installed"
    fi
    verify || die "the toolchain from $tarball does not work on this machine (see the lines above)"
}

install_fast_prebuilt() {
    local tarball=$1
    [ -f "$tarball" ] || die "P4_BMV2_FAST=$tarball: no such file"
    local sum bad
    sum=$(sha256sum "$tarball" | cut -d' ' -f1)
    if [ "${P4_FORCE:-0}" != 1 ] && [ "$(cat "$FAST_PREFIX/.sha256" 2>/dev/null)" = "$sum" ]; then
        say "fast BMv2 $tarball is already installed"
    else
        bad=$(zstd -dc "$tarball" | tar -t | grep -v -E '^(\./)?(opt/?|opt/bmv2-perf(/.*)?)$' | head -n 3 || true)
        [ -z "$bad" ] || die "$tarball holds files outside opt/bmv2-perf/ (e.g. $bad); refusing to unpack it"
        say "unpacking the fast BMv2 $tarball at /"
        zstd -dc "$tarball" | tar -C / -x --no-same-owner
        echo "$sum" >"$FAST_PREFIX/.sha256"
    fi
    "$FAST_PREFIX/bin/simple_switch_grpc" --help >/dev/null 2>&1 \
        || die "the fast BMv2 in $FAST_PREFIX does not run: $("$FAST_PREFIX/bin/simple_switch_grpc" --help 2>&1 | head -n 2)"
}

# The eBPF toolchain goes on top of the main one and only adds files: a file
# that the main toolchain already has stops the install (it would be replaced).
ebpf_apt_list_for() {
    local tarball=$1 beside="${1%.tar.zst}.apt.txt"
    if [ -f "$beside" ]; then cat "$beside"; return; fi
    zstd -dc "$tarball" | tar -xO "usr/local/$STAMP_DIR/ebpf-apt.txt" 2>/dev/null || true
}

install_ebpf_prebuilt() {
    local tarball=$1
    [ -f "$tarball" ] || die "P4_EBPF_TOOLCHAIN=$tarball: no such file"
    case "$tarball" in *.tar.zst) ;; *) die "P4_EBPF_TOOLCHAIN=$tarball: expected a .tar.zst (made by '$0 pack')";; esac
    local sum
    sum=$(sha256sum "$tarball" | cut -d' ' -f1)
    if [ "${P4_FORCE:-0}" != 1 ] && [ "$(cat "$PREFIX/$STAMP_DIR/ebpf-sha256" 2>/dev/null)" = "$sum" ] \
            && verify_ebpf >/dev/null 2>&1; then
        say "prebuilt eBPF $tarball is already installed and verified"
        return
    fi
    command -v zstd >/dev/null || apt_install zstd
    local pkgs bad
    pkgs=$(ebpf_apt_list_for "$tarball" | tr '\n' ' ')
    [ -n "$pkgs" ] || die "$tarball has no package list (${tarball%.tar.zst}.apt.txt beside it, or usr/local/$STAMP_DIR/ebpf-apt.txt in it)"
    say "installing the runtime packages of $tarball: $pkgs"
    # shellcheck disable=SC2086
    apt_install $pkgs
    bad=$(zstd -dc "$tarball" | tar -t | grep -v -E '^(\./)?(usr/?|usr/local(/.*)?)$' | head -n 3 || true)
    [ -z "$bad" ] || die "$tarball holds files outside usr/local/ (e.g. $bad); refusing to unpack it at /"
    say "unpacking $tarball at /"
    zstd -dc "$tarball" | tar -C / -x --no-same-owner
    ldconfig
    mkdir -p "$PREFIX/$STAMP_DIR"
    echo "$sum" >"$PREFIX/$STAMP_DIR/ebpf-sha256"
    echo "from prebuilt $(basename "$tarball") on $(date -u +%F)" >"$PREFIX/$STAMP_DIR/ebpf-installed"
    verify_ebpf || die "the eBPF toolchain from $tarball does not work on this machine (see the lines above)"
}

# ---------------------------------------------------------------- 2. packages
install_packages() {
    . /etc/os-release
    local repo
    case "$ID" in
        ubuntu) repo="xUbuntu_$VERSION_ID" ;;
        debian) repo="Debian_$VERSION_ID" ;;
        *) say "packages: none for $ID"; return 1 ;;
    esac
    local base="https://download.opensuse.org/repositories/home:/p4lang/$repo"
    command -v curl >/dev/null || apt_install curl ca-certificates gnupg >/dev/null 2>&1 || true
    if ! curl -fsSL --max-time 15 "$base/Release.key" -o /tmp/bwn-p4lang-release.key 2>/dev/null; then
        say "packages: $base is not reachable, or has no build for $ID $VERSION_ID"
        return 1
    fi
    say "packages: installing p4lang-p4c, p4lang-bmv2, p4lang-pi from $base (the repository's versions, not bwn's pins)"
    command -v gpg >/dev/null || apt_install gnupg
    gpg --dearmor </tmp/bwn-p4lang-release.key >/etc/apt/trusted.gpg.d/home_p4lang.gpg
    echo "deb $base/ /" >/etc/apt/sources.list.d/home:p4lang.list
    apt-get update -q && apt_install p4lang-p4c p4lang-bmv2 p4lang-pi || return 1
    mkdir -p "$PREFIX/$STAMP_DIR"
    echo "from the p4lang packages ($repo) on $(date -u +%F)" >"$PREFIX/$STAMP_DIR/installed"
    verify
}

# ---------------------------------------------------------------- 3. source
BUILD_DEPS=(
    # common
    build-essential autoconf automake libtool pkg-config git python3 python3-venv curl ca-certificates zstd file
    # PI
    libjudy-dev libreadline-dev libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
    uthash-dev googletest libboost-dev libboost-system-dev libboost-thread-dev
    # BMv2
    libgmp-dev libpcap-dev libboost-program-options-dev libboost-filesystem-dev libevent-dev
    libssl-dev libthrift-dev thrift-compiler python3-thrift python3-six libnanomsg-dev
    libxxhash-dev libjsoncpp-dev flex bison
    # p4c
    cmake ninja-build libfl-dev libgc-dev libboost-iostreams-dev libboost-graph-dev
    python3-protobuf python3-grpcio
)
# bf-p4c: RapidJSON for its logging, Python's jsl + jsonschema to generate that
# logging code, PyInstaller to package its p4c-build-logs tool and PyYAML for
# bf-asm's register generator (walle), installed from PyPI into a venv of the
# build, put first on PATH.
TOFINO_BUILD_DEPS=(rapidjson-dev libboost-graph-dev python3-venv)

src_dir() {  # where the checkout of $1 is: P4_SRC/$1, or cloned into the build dir
    echo "${P4_SRC:-$BUILD_DIR/src}/$1"
}

checkout() {  # checkout NAME URL REF: make sure src_dir NAME holds REF
    local name=$1 url=$2 ref=$3 dir
    dir=$(src_dir "$name")
    if [ -n "${P4_SRC:-}" ]; then
        [ -d "$dir" ] || die "P4_SRC=$P4_SRC has no $name/ (a checkout of $url at $ref)"
        if [ -d "$dir/.git" ] || [ -f "$dir/.git" ]; then
            local have
            have=$(git -C "$dir" rev-parse HEAD)
            local want
            want=$(git -C "$dir" rev-parse "$ref^{commit}" 2>/dev/null || echo "?")
            [ "$have" = "$want" ] || say "WARNING: $dir is at ${have:0:10}, not at the pin $ref (${want:0:10})"
        fi
        return
    fi
    if [ ! -d "$dir/.git" ]; then
        say "cloning $url at $ref"
        git clone -q "$url" "$dir" || die "cannot clone $url: offline? Give the checkouts with P4_SRC=DIR (see '$0 help')"
    fi
    git -C "$dir" checkout -q "$ref"
    git -C "$dir" submodule update -q --init --recursive
}

fetch_sources() {
    mkdir -p "${P4_SRC:-$BUILD_DIR/src}"
    checkout PI https://github.com/p4lang/PI.git "$PI_COMMIT"
    checkout behavioral-model https://github.com/p4lang/behavioral-model.git "$BMV2_COMMIT"
    checkout p4c https://github.com/p4lang/p4c.git "$P4C_TAG"
    checkout abseil-cpp https://github.com/abseil/abseil-cpp.git "$ABSEIL_TAG"
    checkout protobuf https://github.com/protocolbuffers/protobuf.git "$PROTOBUF_TAG"
    checkout p4runtime https://github.com/p4lang/p4runtime.git "$P4RUNTIME_COMMIT"
    if [ "${P4_WITH_TOFINO:-0}" = 1 ]; then
        checkout z3 https://github.com/Z3Prover/z3.git "$Z3_TAG"
        checkout spdlog https://github.com/gabime/spdlog.git "$SPDLOG_TAG"
    fi
    local pi
    pi=$(src_dir PI)
    for sub in proto/p4runtime proto/openconfig/gnmi; do
        [ -n "$(ls -A "$pi/$sub" 2>/dev/null)" ] || die "$pi/$sub is empty: PI needs its submodules (git submodule update --init)"
    done
}

# Build trees are copies of the checkouts, so P4_SRC stays read-only and clean.
fresh_copy() {  # fresh_copy NAME -> prints the build copy's path
    local from to
    from=$(src_dir "$1"); to="$BUILD_DIR/build/$1"
    rm -rf "$to"; mkdir -p "$BUILD_DIR/build"
    cp -a "$from" "$to"
    echo "$to"
}

# PI's googletest and uthash submodules may be left out of P4_SRC: Debian's
# googletest (sources in /usr/src/googletest) and uthash-dev serve instead.
fill_pi_third_party() {
    local pi=$1
    if [ ! -f "$pi/third_party/googletest/googletest/src/gtest.cc" ]; then
        [ -f /usr/src/googletest/googletest/src/gtest.cc ] || die "PI needs googletest: check out its submodule or apt-get install googletest"
        rm -rf "$pi/third_party/googletest"; cp -a /usr/src/googletest "$pi/third_party/googletest"
    fi
    if [ ! -f "$pi/third_party/uthash/src/uthash.h" ]; then
        [ -f /usr/include/uthash.h ] || die "PI needs uthash: check out its submodule or apt-get install uthash-dev"
        mkdir -p "$pi/third_party/uthash/src"
        cp /usr/include/{utarray,uthash,utlist,utringbuffer,utstack,utstring}.h "$pi/third_party/uthash/src/" 2>/dev/null || true
    fi
}

# Fixes upstream needs on Debian 12 (GCC 12). Each is small and explained.
patch_p4c() {
    # GCC 12's std::erase_if passes a const element to the predicate.
    sed -i 's/\[this\](flow_join_points_t::value_type &el)/[this](const flow_join_points_t::value_type \&el)/' "$1/ir/visitor.cpp"
    # The Tofino driver (p4c_src/barefoot.py) takes the paths of bfas and two
    # tools from util.find_file, which returns a pathlib.Path, and later treats
    # them as str (str.find, str.join): the compile stops before the assembler.
    sed -i 's/= find_file(\(.*\))$/= str(find_file(\1))/' \
        "$1/backends/tofino/bf-p4c/driver/barefoot.py" 2>/dev/null || true
}

relocate_python() {  # Debian's /usr/bin/python3 reads dist-packages, not site-packages
    local root=$1 d
    for d in "$root$PREFIX"/lib/python3*/site-packages; do
        [ -d "$d" ] || continue
        mkdir -p "${d%site-packages}dist-packages"
        cp -a "$d"/. "${d%site-packages}dist-packages/"
        rm -rf "$d"
    done
    # An empty google/__init__.py from PI would hide Debian's google.protobuf.
    rm -rf "$root$PY_DIST/google/__init__.py" "$root$PY_DIST/google/__pycache__"
}

fix_shebangs() {  # the BMv2 CLIs must run with the Python that sees the Thrift modules
    local bin
    for bin in "$1"/bin/{simple_switch_CLI,psa_switch_CLI,pna_nic_CLI,bm_CLI,bm_p4dbg,bm_nanomsg_events}; do
        [ -f "$bin" ] && sed -i "1s|^#!/usr/bin/env python3\$|#!$SYS_PYTHON|" "$bin"
    done
    return 0
}

build_from_source() {
    need_root
    # The system's tools first: a pyenv or conda python3 on PATH must not build these.
    export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
    mkdir -p "$LOG_DIR"
    echo "== build started $(date -u +%FT%TZ) on $(uname -m), $(nproc) cores, P4_SRC=${P4_SRC:-clone}" >>"$LOG_DIR/TIMES"
    step "apt build dependencies" apt_install "${BUILD_DEPS[@]}"
    if [ "${P4_WITH_TOFINO:-0}" = 1 ]; then
        step "apt Tofino build dependencies" apt_install "${TOFINO_BUILD_DEPS[@]}"
        step "Python for bf-p4c's code generators" bash -c "rm -rf '$BUILD_DIR/venv' && $SYS_PYTHON -m venv '$BUILD_DIR/venv' && '$BUILD_DIR/venv/bin/pip' install -q jsl 'jsonschema<4' pyinstaller pyyaml"
        export PATH="$BUILD_DIR/venv/bin:$PATH"
    fi
    fetch_sources
    rm -rf "$STAGE"; mkdir -p "$STAGE"

    # --- PI (installed to / as well: BMv2 builds against it)
    local pi
    pi=$(fresh_copy PI)
    fill_pi_third_party "$pi"
    step "PI autogen" bash -c "cd '$pi' && ./autogen.sh"
    step "PI configure" bash -c "cd '$pi' && ./configure --prefix=$PREFIX --with-proto --without-internal-rpc --without-cli --without-bmv2 CFLAGS=-O2 CXXFLAGS=-O2"
    step "PI make" make -C "$pi" -j"$JOBS"
    step "PI install (stage)" make -C "$pi" install DESTDIR="$STAGE"
    relocate_python "$STAGE"
    step "PI install (/)" bash -c "cp -a '$STAGE$PREFIX'/. '$PREFIX'/ && ldconfig"

    # --- BMv2 with PI and the Thrift runtime
    local bm
    bm=$(fresh_copy behavioral-model)
    step "BMv2 autogen" bash -c "cd '$bm' && ./autogen.sh"
    step "BMv2 configure" bash -c "cd '$bm' && ./configure --prefix=$PREFIX --with-pi --with-thrift PYTHON=$SYS_PYTHON am_cv_python_pythondir=$PY_DIST am_cv_python_pyexecdir=$PY_DIST CFLAGS=-O2 CXXFLAGS=-O2"
    step "BMv2 make" make -C "$bm" -j"$JOBS"
    step "BMv2 install (stage)" make -C "$bm" install DESTDIR="$STAGE"
    fix_shebangs "$STAGE$PREFIX"
    relocate_python "$STAGE"

    # --- the same BMv2 built for speed (BMv2's docs/performance.md), for experiments
    if [ "${P4_FAST_BMV2:-1}" = 1 ]; then
        local bmf="$BUILD_DIR/build/behavioral-model-fast"
        rm -rf "$bmf" "$FAST_STAGE"; cp -a "$(src_dir behavioral-model)" "$bmf"
        step "fast BMv2 autogen" bash -c "cd '$bmf' && ./autogen.sh"
        step "fast BMv2 configure" bash -c "cd '$bmf' && ./configure --prefix=$FAST_PREFIX --with-pi --with-thrift --disable-logging-macros --disable-elogger 'CXXFLAGS=-g0 -O3' 'CFLAGS=-g0 -O3' PYTHON=$SYS_PYTHON LDFLAGS=-Wl,-rpath,$FAST_PREFIX/lib"
        step "fast BMv2 make" make -C "$bmf" -j"$JOBS"
        step "fast BMv2 install (stage)" make -C "$bmf" install DESTDIR="$FAST_STAGE"
    fi

    # --- p4c: bmv2 back end and p4test (and the Tofino back end when asked)
    local p4c tofino=OFF z3args=()
    p4c=$(fresh_copy p4c)
    patch_p4c "$p4c"
    if [ "${P4_WITH_TOFINO:-0}" = 1 ]; then
        tofino=ON
        # Local Z3 and spdlog sources instead of FetchContent's git clones.
        local z3
        z3=$(fresh_copy z3)
        (cd "$z3" && git apply "$p4c/cmake/z3.patch" 2>/dev/null || patch -p1 -s <"$p4c/cmake/z3.patch" || true)
        mkdir -p "$p4c/backends/tofino/third_party"
        rm -rf "$p4c/backends/tofino/third_party/spdlog"
        cp -a "$(src_dir spdlog)" "$p4c/backends/tofino/third_party/spdlog"
        z3args=(-DFETCHCONTENT_SOURCE_DIR_Z3="$z3")
    fi
    step "p4c cmake" cmake -S "$p4c" -B "$p4c/build" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$PREFIX \
        -DENABLE_BMV2=ON -DENABLE_P4TEST=ON -DENABLE_EBPF=OFF -DENABLE_UBPF=OFF -DENABLE_DPDK=OFF \
        -DENABLE_P4TC=OFF -DENABLE_P4FMT=OFF -DENABLE_TEST_TOOLS=OFF -DENABLE_GTESTS=OFF \
        -DENABLE_TOFINO=$tofino -DENABLE_BAREFOOT_INTERNAL=OFF -DCMAKE_UNITY_BUILD=ON \
        -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
        -DFETCHCONTENT_SOURCE_DIR_ABSEIL="$(src_dir abseil-cpp)" \
        -DFETCHCONTENT_SOURCE_DIR_PROTOBUF="$(src_dir protobuf)" \
        -DFETCHCONTENT_SOURCE_DIR_P4RUNTIME="$(src_dir p4runtime)" \
        -DP4C_USE_PREINSTALLED_BDWGC=ON "${z3args[@]}"
    step "p4c build" ninja -C "$p4c/build" -j"$JOBS"
    step "p4c install (stage)" env DESTDIR="$STAGE" ninja -C "$p4c/build" install
    # The Tofino back end's build makes tofino/default p4c's default target and
    # architecture (a sed on p4c_src/main.py); keep bmv2/v1model the default, as
    # without it (the project always names its target).
    sed -i 's/p4c_default_target = "tofino"/p4c_default_target = "bmv2"/; s/p4c_default_arch = "default"/p4c_default_arch = "v1model"/' \
        "$STAGE$PREFIX/share/p4c/p4c_src/main.py"
    # p4c's Tofino include files, for p4test checks of TNA programs without bf-p4c
    mkdir -p "$STAGE$PREFIX/share/p4c/p4include"
    cp -a "$p4c"/backends/tofino/bf-p4c/p4include/*.p4 "$STAGE$PREFIX/share/p4c/p4include/"

    step "strip binaries" bash -c "find '$STAGE' '$FAST_STAGE' -type f -perm -u+x -exec sh -c 'file -b \"\$1\" | grep -q ^ELF && strip --strip-unneeded \"\$1\"' _ {} \\; 2>/dev/null || true"
    mkdir -p "$STAGE$PREFIX/$STAMP_DIR"
    runtime_packages >"$STAGE$PREFIX/$STAMP_DIR/apt.txt"
    {
        echo "PI $PI_COMMIT, behavioral-model $BMV2_COMMIT, p4c $P4C_TAG (Tofino: $tofino)"
        echo "Abseil $ABSEIL_TAG, Protobuf $PROTOBUF_TAG, p4runtime $P4RUNTIME_COMMIT"
        echo "built $(date -u +%FT%TZ) on $(. /etc/os-release; echo "$PRETTY_NAME") $(uname -m)"
    } >"$STAGE$PREFIX/$STAMP_DIR/versions"

    step "install the stage at /" bash -c "cp -a '$STAGE$PREFIX'/. '$PREFIX'/ && ldconfig"
    if [ -d "$FAST_STAGE$FAST_PREFIX" ]; then
        step "install the fast BMv2 at $FAST_PREFIX" bash -c "rm -rf '$FAST_PREFIX' && mkdir -p /opt && cp -a '$FAST_STAGE$FAST_PREFIX' '$FAST_PREFIX'"
    fi
    echo "from source (${P4_SRC:-cloned}) on $(date -u +%F)" >"$PREFIX/$STAMP_DIR/installed"
    echo "== build done $(date -u +%FT%TZ)" >>"$LOG_DIR/TIMES"
    verify || die "built and installed, but the checks above fail"
    say "built from source and installed; step times in $LOG_DIR/TIMES"
}

# ---------------------------------------------------------------- eBPF from source
# p4c's eBPF back end, its runtime and NIKSS (README.md, "The P4 toolchain").
EBPF_BUILD_DEPS=(
    build-essential cmake ninja-build bison flex libfl-dev libgc-dev libboost-dev libboost-iostreams-dev
    libboost-graph-dev pkg-config python3 git curl ca-certificates zstd file
    # the runtime (bpftool builds libbpf) and the compile flow
    clang llvm libelf-dev zlib1g-dev
    # NIKSS (its libbpf v0.5.0 is built from its submodule: Debian 12's libbpf 1.1
    # lacks APIs NIKSS uses)
    libgmp-dev libjansson-dev
)

build_ebpf_from_source() {
    need_root
    export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
    mkdir -p "$LOG_DIR"
    echo "== eBPF build started $(date -u +%FT%TZ), P4_SRC=${P4_SRC:-clone}" >>"$LOG_DIR/TIMES"
    step "apt eBPF build dependencies" apt_install "${EBPF_BUILD_DEPS[@]}"
    mkdir -p "${P4_SRC:-$BUILD_DIR/src}"
    checkout p4c https://github.com/p4lang/p4c.git "$P4C_TAG"
    checkout abseil-cpp https://github.com/abseil/abseil-cpp.git "$ABSEIL_TAG"
    checkout protobuf https://github.com/protocolbuffers/protobuf.git "$PROTOBUF_TAG"
    checkout p4runtime https://github.com/p4lang/p4runtime.git "$P4RUNTIME_COMMIT"
    checkout bpftool https://github.com/libbpf/bpftool.git "$BPFTOOL_TAG"
    checkout nikss https://github.com/NIKSS-vSwitch/nikss.git "$NIKSS_COMMIT"
    [ -f "$(src_dir bpftool)/libbpf/src/bpf.h" ] \
        || die "$(src_dir bpftool)/libbpf is empty: bpftool needs its libbpf submodule ($BPFTOOL_LIBBPF_COMMIT)"
    [ -f "$(src_dir nikss)/libbpf/src/bpf.h" ] \
        || die "$(src_dir nikss)/libbpf is empty: NIKSS needs its libbpf submodule ($NIKSS_LIBBPF_COMMIT)"
    rm -rf "$EBPF_STAGE"; mkdir -p "$EBPF_STAGE$PREFIX/bin" "$EBPF_STAGE$PREFIX/$STAMP_DIR"

    # --- p4c with only the eBPF back end (its own tree: the main build's has none)
    local p4c="$BUILD_DIR/build/p4c-ebpf"
    rm -rf "$p4c"; mkdir -p "$BUILD_DIR/build"; cp -a "$(src_dir p4c)" "$p4c"
    patch_p4c "$p4c"
    # The runtime's bpftool sources where p4c's FetchContent (bpfrepo) puts them.
    rm -rf "$p4c/backends/ebpf/runtime/contrib/bpftool"
    mkdir -p "$p4c/backends/ebpf/runtime/contrib"
    cp -a "$(src_dir bpftool)" "$p4c/backends/ebpf/runtime/contrib/bpftool"
    step "p4c-ebpf cmake" cmake -S "$p4c" -B "$p4c/build" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$PREFIX \
        -DENABLE_EBPF=ON -DENABLE_BMV2=OFF -DENABLE_P4TEST=OFF -DENABLE_UBPF=OFF -DENABLE_DPDK=OFF \
        -DENABLE_P4TC=OFF -DENABLE_P4FMT=OFF -DENABLE_P4C_GRAPHS=OFF -DENABLE_TEST_TOOLS=OFF \
        -DENABLE_GTESTS=OFF -DENABLE_TOFINO=OFF -DENABLE_DOCS=OFF -DCMAKE_UNITY_BUILD=ON \
        -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
        -DFETCHCONTENT_SOURCE_DIR_ABSEIL="$(src_dir abseil-cpp)" \
        -DFETCHCONTENT_SOURCE_DIR_PROTOBUF="$(src_dir protobuf)" \
        -DFETCHCONTENT_SOURCE_DIR_P4RUNTIME="$(src_dir p4runtime)" \
        -DP4C_USE_PREINSTALLED_BDWGC=ON
    step "p4c-ebpf build" ninja -C "$p4c/build" -j"$JOBS" p4c-ebpf
    install -m 755 "$p4c/build/backends/ebpf/p4c-ebpf" "$EBPF_STAGE$PREFIX/bin/p4c-ebpf"
    # p4c's backends/ebpf/build_libbpf (configure skips it when it finds a system
    # libbpf): libbpf's headers, which the generated C includes.
    step "eBPF runtime (bpftool, libbpf)" bash -c "cd '$p4c/backends/ebpf' && python3 ./build_libbpf"
    local rs="$p4c/backends/ebpf/runtime" rd="$EBPF_STAGE$PREFIX/$EBPF_RUNTIME"
    [ -f "$rs/install/libbpf/include/bpf/bpf_helpers.h" ] || die "the eBPF runtime build wrote no libbpf headers (see $LOG_DIR)"
    mkdir -p "$rd/install/libbpf/include/bpf" "$rd/contrib/bpftool/include/uapi/linux"
    cp -p "$rs"/{kernel.mk,ebpf_common.h,ebpf_kernel.h,psa.h} "$rd/"
    cp -p "$rs"/install/libbpf/include/bpf/*.h "$rd/install/libbpf/include/bpf/"
    cp -p "$rs"/contrib/bpftool/include/uapi/linux/*.h "$rd/contrib/bpftool/include/uapi/linux/"
    cp -p "$rs"/contrib/bpftool/LICENSE* "$rd/contrib/bpftool/" 2>/dev/null || true

    # --- NIKSS, its pinned libbpf linked in statically with its symbols hidden
    # (so that a program may load libnikss and Debian's libbpf together)
    local nk
    nk=$(fresh_copy nikss)
    step "NIKSS libbpf" bash -c "cd '$nk' && MAKEFLAGS=-j$JOBS ./build_libbpf.sh"
    step "NIKSS cmake" cmake -S "$nk" -B "$nk/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$PREFIX \
        -DBUILD_SHARED=ON -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--exclude-libs,ALL
    step "NIKSS build" make -C "$nk/build" -j"$JOBS"
    step "NIKSS install (stage)" env DESTDIR="$EBPF_STAGE" cmake --install "$nk/build" --strip
    mkdir -p "$EBPF_STAGE$PREFIX/include" "$EBPF_STAGE$PREFIX/share/doc/nikss"
    cp -a "$nk/include/nikss" "$EBPF_STAGE$PREFIX/include/"
    cp -p "$nk/LICENSE" "$nk/README.md" "$EBPF_STAGE$PREFIX/share/doc/nikss/"

    step "strip eBPF binaries" strip --strip-unneeded "$EBPF_STAGE$PREFIX/bin/p4c-ebpf"
    ebpf_runtime_packages >"$EBPF_STAGE$PREFIX/$STAMP_DIR/ebpf-apt.txt"
    {
        echo "p4c $P4C_TAG eBPF back end; bpftool $BPFTOOL_TAG (libbpf ${BPFTOOL_LIBBPF_COMMIT:0:10}); NIKSS ${NIKSS_COMMIT:0:7} (libbpf ${NIKSS_LIBBPF_COMMIT:0:7})"
        echo "built $(date -u +%FT%TZ) on $(. /etc/os-release; echo "$PRETTY_NAME") $(uname -m)"
    } >"$EBPF_STAGE$PREFIX/$STAMP_DIR/ebpf-versions"
    # It only adds files: a staged file the system has with other contents would
    # be overwritten (e.g. by a different p4c's runtime).
    local clash
    clash=$(cd "$EBPF_STAGE" && find . -type f | sed 's|^\./|/|' | while read -r f; do
        [ -e "$f" ] && ! cmp -s "$EBPF_STAGE$f" "$f" && case "$f" in "$PREFIX/$STAMP_DIR"/*) ;; *) echo "$f";; esac
    done | grep -v -e "^$PREFIX/bin/p4c-ebpf$" -e "^$PREFIX/bin/nikss-ctl$" -e "^$PREFIX/lib/libnikss" \
        -e "^$PREFIX/$EBPF_RUNTIME/" -e "^$PREFIX/include/nikss/" -e "^$PREFIX/share/doc/nikss/" | head -n 3 || true)
    [ -z "$clash" ] || die "the eBPF stage would replace files it does not own: $clash"
    if [ "${P4_STAGE_ONLY:-0}" = 1 ]; then
        echo "== eBPF build done (staged only) $(date -u +%FT%TZ)" >>"$LOG_DIR/TIMES"
        "$EBPF_STAGE$PREFIX/bin/p4c-ebpf" --version >/dev/null 2>&1 || die "the staged p4c-ebpf does not run"
        say "built the eBPF toolchain from source into $EBPF_STAGE (P4_STAGE_ONLY=1: nothing installed); '$0 pack OUT.tar.zst' packs it"
        return
    fi
    step "install the eBPF stage at /" bash -c "cp -a '$EBPF_STAGE$PREFIX'/. '$PREFIX'/ && ldconfig"
    echo "from source (${P4_SRC:-cloned}) on $(date -u +%F)" >"$PREFIX/$STAMP_DIR/ebpf-installed"
    rm -f "$PREFIX/$STAMP_DIR/ebpf-sha256"
    echo "== eBPF build done $(date -u +%FT%TZ)" >>"$LOG_DIR/TIMES"
    verify_ebpf || die "built and installed the eBPF toolchain, but the checks above fail"
    say "built the eBPF toolchain from source and installed it; step times in $LOG_DIR/TIMES"
}

# The eBPF stage's runtime packages: the libraries its binaries load, and the
# compile flow (kernel.mk runs clang and llc; p4c-ebpf runs cpp).
ebpf_runtime_packages() {
    local libs
    libs=$(find "$EBPF_STAGE" -type f 2>/dev/null | while read -r f; do
        file -b "$f" | grep -q '^ELF' && LD_LIBRARY_PATH="$EBPF_STAGE$PREFIX/lib" ldd "$f" 2>/dev/null
    done | awk '/=> \// {print $3}' | sort -u | grep -v -e "^$EBPF_STAGE" -e "^$PREFIX/" || true)
    {
        for l in $libs; do
            dpkg -S "$(readlink -f "$l")" 2>/dev/null || dpkg -S "$l" 2>/dev/null || true
        done | cut -d: -f1
        printf '%s\n' clang llvm make libc6-dev cpp
    } | sort -u
}

# The Debian packages whose libraries the staged binaries load (ldd on every ELF
# file), plus what the tools run or import without linking it.
runtime_packages() {
    local libs
    libs=$(find "$STAGE" "$FAST_STAGE" -type f 2>/dev/null | while read -r f; do
        file -b "$f" | grep -q '^ELF' && LD_LIBRARY_PATH="$STAGE$PREFIX/lib" ldd "$f" 2>/dev/null
    done | awk '/=> \// {print $3}' | sort -u | grep -v -e "^$STAGE" -e "^$PREFIX/" -e "^$FAST_PREFIX/" || true)
    {
        for l in $libs; do
            dpkg -S "$(readlink -f "$l")" 2>/dev/null || dpkg -S "$l" 2>/dev/null || true
        done | cut -d: -f1
        printf '%s\n' cpp gcc python3 python3-thrift python3-six python3-protobuf python3-grpcio
    } | sort -u
}

pack() {
    local out=${1:-}
    [ -n "$out" ] || die "pack needs the output file: $0 pack OUT.tar.zst"
    case "$out" in *.tar.zst) ;; *) die "pack: OUT must end in .tar.zst";; esac
    [ -d "$STAGE$PREFIX" ] || [ -d "$EBPF_STAGE$PREFIX" ] || die "nothing to pack: no stage in $STAGE or $EBPF_STAGE (run '$0 build' or '$0 build-ebpf' first)"
    if [ ! -d "$STAGE$PREFIX" ]; then   # only the eBPF toolchain was built: OUT is its tarball
        local only="$out"
        [ -f "$EBPF_STAGE$PREFIX/$STAMP_DIR/ebpf-apt.txt" ] || ebpf_runtime_packages >"$EBPF_STAGE$PREFIX/$STAMP_DIR/ebpf-apt.txt"
        tar -C "$EBPF_STAGE" -c usr/local | zstd -q -T0 -19 -f -o "$only"
        cp "$EBPF_STAGE$PREFIX/$STAMP_DIR/ebpf-apt.txt" "${only%.tar.zst}.apt.txt"
        say "packed the eBPF toolchain $only and ${only%.tar.zst}.apt.txt (P4_EBPF_TOOLCHAIN=$only)"
        (cd "$(dirname "$only")" && sha256sum "$(basename "$only")") >"${only%.tar.zst}.sha256"
        return
    fi
    [ -f "$STAGE$PREFIX/$STAMP_DIR/apt.txt" ] || runtime_packages >"$STAGE$PREFIX/$STAMP_DIR/apt.txt"
    tar -C "$STAGE" -c usr/local | zstd -q -T0 -19 -f -o "$out"
    cp "$STAGE$PREFIX/$STAMP_DIR/apt.txt" "${out%.tar.zst}.apt.txt"
    say "packed $out ($(du -h "$out" | cut -f1)) and ${out%.tar.zst}.apt.txt"
    if [ -d "$FAST_STAGE$FAST_PREFIX" ]; then
        local fast="${out%.tar.zst}-bmv2-fast.tar.zst"
        tar -C "$FAST_STAGE" -c opt/bmv2-perf | zstd -q -T0 -19 -f -o "$fast"
        say "packed $fast (P4_BMV2_FAST=$fast)"
    fi
    local ebpf=""
    if [ -d "$EBPF_STAGE$PREFIX" ]; then
        ebpf="${out%.tar.zst}-ebpf.tar.zst"
        [ -f "$EBPF_STAGE$PREFIX/$STAMP_DIR/ebpf-apt.txt" ] || ebpf_runtime_packages >"$EBPF_STAGE$PREFIX/$STAMP_DIR/ebpf-apt.txt"
        tar -C "$EBPF_STAGE" -c usr/local | zstd -q -T0 -19 -f -o "$ebpf"
        cp "$EBPF_STAGE$PREFIX/$STAMP_DIR/ebpf-apt.txt" "${ebpf%.tar.zst}.apt.txt"
        say "packed $ebpf and ${ebpf%.tar.zst}.apt.txt (P4_EBPF_TOOLCHAIN=$ebpf)"
    fi
    (cd "$(dirname "$out")" && sha256sum "$(basename "$out")" ${fast:+"$(basename "$fast")"} ${ebpf:+"$(basename "$ebpf")"}) >"${out%.tar.zst}.sha256"
}

# ---------------------------------------------------------------- install
install_main() {
    need_root
    if [ -n "${P4_TOOLCHAIN:-}" ]; then
        install_prebuilt "$P4_TOOLCHAIN"
        [ -z "${P4_BMV2_FAST:-}" ] || install_fast_prebuilt "$P4_BMV2_FAST"
        say "took: prebuilt $P4_TOOLCHAIN${P4_BMV2_FAST:+ and $P4_BMV2_FAST}"
        return
    fi
    if [ "${P4_FORCE:-0}" != 1 ] && verify >/dev/null 2>&1; then
        [ -z "${P4_BMV2_FAST:-}" ] || install_fast_prebuilt "$P4_BMV2_FAST"
        say "took: none needed, already installed ($(status | head -n 1 | sed 's/^p4-toolchain: //'))"
        return
    fi
    # P4_SRC says: build these checkouts (offline), not the repository's packages.
    if [ -z "${P4_SRC:-}" ] && [ "${P4_NO_PACKAGES:-0}" != 1 ] && install_packages; then
        say "took: the p4lang packages"
        return
    fi
    if [ -n "${P4_SRC:-}" ] || git ls-remote -q https://github.com/p4lang/PI.git HEAD >/dev/null 2>&1; then
        build_from_source
        say "took: from source"
        return
    fi
    cat >&2 <<EOF
p4-toolchain: ERROR: no way to install p4c and BMv2 here. Do one of:
  - P4_TOOLCHAIN=/path/p4-toolchain-debian12-amd64.tar.zst make deps
      a prebuilt tree (on Debian 12 amd64; made by '$0 pack' on another machine)
  - P4_SRC=/path/to/checkouts make toolchain
      build offline from checkouts of PI $PI_COMMIT, behavioral-model $BMV2_COMMIT,
      p4c $P4C_TAG, abseil-cpp $ABSEIL_TAG, protobuf $PROTOBUF_TAG, p4runtime $P4RUNTIME_COMMIT
  - connect to the network and run 'make toolchain' again (packages or a clone)
EOF
    return 1
}

# The eBPF toolchain, on top of the main one: prebuilt, or built when asked for.
install_ebpf() {
    if [ -n "${P4_EBPF_TOOLCHAIN:-}" ]; then
        install_ebpf_prebuilt "$P4_EBPF_TOOLCHAIN"
        say "eBPF: took prebuilt $P4_EBPF_TOOLCHAIN"
    elif [ "${P4_WITH_EBPF:-0}" = 1 ]; then
        if [ "${P4_FORCE:-0}" != 1 ] && verify_ebpf >/dev/null 2>&1; then
            say "eBPF: none needed, already installed"
        else
            build_ebpf_from_source
            say "eBPF: took from source"
        fi
    fi
}

# (not named `install`: a function of that name would hide install(1) from the steps above)
install_all() {
    install_main
    install_ebpf
}

case "${1:-install}" in
    install) install_all ;;
    build) build_from_source; [ "${P4_WITH_EBPF:-0}" != 1 ] || build_ebpf_from_source ;;
    build-ebpf) build_ebpf_from_source ;;
    pack) pack "${2:-}" ;;
    verify)
        rc=0
        if verify; then say "verified: p4c, simple_switch_grpc and BMv2's Thrift modules work"; else rc=1; fi
        if ebpf_wanted; then
            if verify_ebpf; then say "verified: p4c-ebpf, its runtime, nikss-ctl and libnikss, clang and llc work"; else rc=1; fi
        fi
        exit $rc ;;
    status) status ;;
    help|-h|--help) sed -n '/^set -euo/q; 2,$p' "$0" | sed -e 's/^# \{0,1\}//' -e '/^=*$/d' ;;
    *) die "unknown command '$1' (install, build, build-ebpf, pack OUT.tar.zst, verify, status, help)" ;;
esac
