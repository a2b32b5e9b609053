#!/usr/bin/env bash
# =============================================================================
#  deps.sh: everything bwn needs on a Debian or Ubuntu machine (`make deps`)
# =============================================================================
#
#  Steps, each reported in the summary at the end:
#    apt        the Debian/Ubuntu packages (APT_PACKAGES, from the Makefile)
#    toolchain  p4c, BMv2 and PI (scripts/p4-toolchain.sh install: a prebuilt
#               tarball P4_TOOLCHAIN=FILE.tar.zst, p4lang's packages, or a build
#               from source; P4_BMV2_FAST=FILE.tar.zst adds the fast BMv2)
#    venv       .venv from /usr/bin/python3 with system site-packages, bwn in it
#  then `bwn doctor`'s table of every component.
#
#  Exit status: 0 when every step worked; 1 when one failed. A machine without
#  the P4 toolchain fails here, loudly, unless BWN_WITHOUT_P4=1 says to go on
#  without it (tests that need p4c, BMv2, PTF or Mininet then skip, naming what
#  is missing).
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
declare -a names=() states=() notes=()
record() { names+=("$1"); states+=("$2"); notes+=("$3"); }
is_root() { [ "$(id -u)" = 0 ]; }

# -- apt
if ! command -v apt-get >/dev/null; then
    record apt skipped "no apt-get: install these yourself: ${APT_PACKAGES:-}"
elif ! is_root; then
    record apt skipped "not root: sudo make deps, or install: ${APT_PACKAGES:-}"
else
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086  # a list of package names
    if apt-get update -q && apt-get install -y -q --no-install-recommends ${APT_PACKAGES:-}; then
        record apt ok "$(echo ${APT_PACKAGES:-} | wc -w) packages"
    elif dpkg -s ${APT_PACKAGES:-} >/dev/null 2>&1; then
        record apt ok "apt-get failed, but every package is installed already"
    else
        record apt FAILED "apt-get failed (see above) and some packages are missing"
    fi
fi

# -- the P4 toolchain
if ! is_root; then
    record toolchain FAILED "not root: sudo make deps (or sudo make toolchain)"
elif scripts/p4-toolchain.sh install; then
    # every line of the status (the main toolchain's, then the eBPF one's), joined
    record toolchain ok "$(scripts/p4-toolchain.sh status 2>&1 | sed -n 's/^p4-toolchain: //p' \
                           | sed ':a;N;$!ba;s/\n/; /g')"
else
    record toolchain FAILED "scripts/p4-toolchain.sh install failed (see above; 'scripts/p4-toolchain.sh help')"
fi

# -- the Python venv
if { [ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$VENV"; } \
   && "$VENV/bin/python" -m pip install -q --upgrade pip \
   && "$VENV/bin/python" -m pip install -q -e '.[test,p4rt,plots]'; then
    record venv ok "$VENV ($("$VENV/bin/python" --version 2>&1))"
else
    record venv FAILED "could not make $VENV with /usr/bin/python3 (python3-venv installed? Python >= 3.10?)"
fi

echo
echo "== make deps: summary"
failed=0
for i in "${!names[@]}"; do
    printf '%-8s %-10s %s\n' "${states[$i]}" "${names[$i]}" "${notes[$i]}"
    if [ "${states[$i]}" = FAILED ]; then
        if [ "${names[$i]}" = toolchain ] && [ "${BWN_WITHOUT_P4:-0}" = 1 ]; then
            echo "         (BWN_WITHOUT_P4=1: going on without the P4 toolchain)"
        else
            failed=1
        fi
    fi
done
if [ -x "$VENV/bin/bwn" ]; then
    echo
    echo "== bwn doctor"
    "$VENV/bin/bwn" doctor || true
fi
if [ "$failed" = 1 ]; then
    echo
    echo "make deps: FAILED (the lines above say what to do; BWN_WITHOUT_P4=1 goes on without the P4 toolchain)" >&2
fi
exit "$failed"
