# bwn: bandwidth notification on programmable switches.
#   make deps   Debian/Ubuntu packages, the P4 toolchain (scripts/p4-toolchain.sh), the Python venv,
#               and a summary per component (scripts/deps.sh)
#   make toolchain  only the P4 toolchain (prebuilt, packages or source; see its help)
#   make build  compile the P4 program with p4c into build/
#   make build-tofino  compile p4src/tna/bwn.p4 with p4c's Tofino back end into build/tofino{,2}/
#   make build-ebpf    compile p4src/psa/bwn.p4 with p4c-ebpf into a BPF object, build/ebpf/bwn.o
#   make pktgen  compile the C traffic generator of benchmarks/switch_pps.py, build/bwn_pktgen
#   make run    (as root) the smoke scenario's network and the Mininet CLI: bwn net smoke
#               (SCENARIO=name for another one; see README "Try it by hand")
#   make test   all tests (unit, namespace end-to-end, PTF on BMv2, Mininet smoke)
#   make ptf    only the PTF suite, with its live output (make ptf-ebpf: on the eBPF switch)
#   make mutants  mutation testing of the Python core (hours; resumable; MODULES="wire report" for some)
#   make schema regenerate docs/scenario.schema.json from bwn/scenario/model.py (bwn/scenario/schema.py)
#   make clean
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
BUILD := build
P4_MAIN := p4src/v1model/bwn.p4
# Every file the BMv2 program includes: p4src/v1model/bwn.p4 and its include/ tree, and p4src/shared.
P4_SRCS := $(wildcard p4src/shared/*.p4 p4src/v1model/*.p4 p4src/v1model/include/*.p4 p4src/v1model/include/control/*.p4)
# Slurm and munge: `bwn reproduce --executor slurm` on a cluster, and the tests' single-node
# Slurm, which starts its own daemons (docs/cluster.md); git: the code fingerprint nodes are checked by.
SLURM_PACKAGES := slurm-wlm munge git
APT_PACKAGES := python3 python3-venv python3-pip python3-scapy python3-thrift iproute2 iputils-ping \
	ethtool tcpdump tshark iperf3 mininet make $(SLURM_PACKAGES)

.PHONY: test-py310 deps toolchain toolchain-tofino toolchain-pack build build-tofino build-ebpf build-bench bench-switch pktgen run test ptf ptf-ebpf mutants schema clean

# scripts/deps.sh: each step's result and `bwn doctor`'s table at the end; exit 1 when
# the P4 toolchain could not be installed, unless BWN_WITHOUT_P4=1.
deps:
	@APT_PACKAGES="$(APT_PACKAGES)" VENV=$(VENV) scripts/deps.sh

# The P4 toolchain alone (p4c, BMv2 with PI and Thrift, PI; and a BMv2 built for
# speed in /opt/bmv2-perf; the eBPF back end and NIKSS with P4_EBPF_TOOLCHAIN=FILE
# or P4_WITH_EBPF=1). P4_TOOLCHAIN=FILE.tar.zst, P4_SRC=DIR, P4_FORCE=1: see
# `scripts/p4-toolchain.sh help`.
toolchain:
	scripts/p4-toolchain.sh install

# The same from source with p4c's Tofino back end (bf-p4c) as well.
toolchain-tofino:
	P4_WITH_TOFINO=1 scripts/p4-toolchain.sh build

# Pack the last source build for other machines: make toolchain-pack OUT=/path/x.tar.zst
toolchain-pack:
	scripts/p4-toolchain.sh pack $(OUT)

$(BUILD)/bwn.json $(BUILD)/bwn.p4info.txtpb: $(P4_SRCS)
	@mkdir -p $(BUILD)
	p4c --target bmv2 --arch v1model --std p4-16 \
	  --p4runtime-files $(BUILD)/bwn.p4info.txtpb -o $(BUILD) $(P4_MAIN)

build: $(BUILD)/bwn.json

# Tofino 1 (build/tofino/) and Tofino 2 (build/tofino2/) with p4c's open-source
# Tofino back end (make toolchain-tofino); resources: docs/tofino.md. The driver's
# bf_switchd .conf (what controller/tofino.py packs) is written by p4c-gen-conf,
# which p4c's driver does not run here.
TNA_SRCS := $(wildcard p4src/shared/*.p4 p4src/tna/*.p4 p4src/tna/include/*.p4 p4src/tna/include/control/*.p4)
TOFINO_FLAGS := --arch tna --std p4-16 -I p4src -g --p4runtime-force-std-externs   # -g: resource logs; std externs: P4Info a P4Runtime client reads
$(BUILD)/tofino/bwn.conf: $(TNA_SRCS)
	@command -v p4c-barefoot >/dev/null || { echo "build-tofino: p4c's Tofino back end (p4c-barefoot) is not installed: make toolchain-tofino"; exit 1; }
	@mkdir -p $(BUILD)/tofino
	p4c --target tofino $(TOFINO_FLAGS) -o $(BUILD)/tofino \
	  --p4runtime-files $(BUILD)/tofino/bwn.p4info.txtpb --bf-rt-schema $(BUILD)/tofino/bfrt.json p4src/tna/bwn.p4
	p4c-gen-conf --conf-type BF-RT --bfrt-name $(BUILD)/tofino/bfrt.json --name bwn --device tofino \
	  --outputdir $(BUILD)/tofino --p4-version p4-16 --pipe pipe
$(BUILD)/tofino2/bwn.conf: $(TNA_SRCS)
	@command -v p4c-barefoot >/dev/null || { echo "build-tofino: p4c's Tofino back end (p4c-barefoot) is not installed: make toolchain-tofino"; exit 1; }
	@mkdir -p $(BUILD)/tofino2
	p4c --target tofino2 $(subst tna,t2na,$(TOFINO_FLAGS)) -o $(BUILD)/tofino2 \
	  --p4runtime-files $(BUILD)/tofino2/bwn.p4info.txtpb --bf-rt-schema $(BUILD)/tofino2/bfrt.json p4src/tna/bwn.p4
	p4c-gen-conf --conf-type BF-RT --bfrt-name $(BUILD)/tofino2/bfrt.json --name bwn --device tofino2 \
	  --outputdir $(BUILD)/tofino2 --p4-version p4-16 --pipe pipe

build-tofino: $(BUILD)/tofino/bwn.conf $(BUILD)/tofino2/bwn.conf

# PSA for the Linux kernel: p4c-ebpf's C, then clang and llc (scripts/ebpf-build.sh
# says why it differs from p4c's kernel.mk); NIKSS loads build/ebpf/bwn.o.
PSA_SRCS := $(wildcard p4src/shared/*.p4 p4src/psa/*.p4 p4src/psa/include/*.p4)
$(BUILD)/ebpf/bwn.o: $(PSA_SRCS) scripts/ebpf-build.sh
	scripts/ebpf-build.sh p4src/psa/bwn.p4 $(BUILD)/ebpf

build-ebpf: $(BUILD)/ebpf/bwn.o

SCENARIO ?= smoke
run: build
	$(VENV)/bin/bwn net $(SCENARIO)

# The yardstick of benchmarks/switch_pps.py: a plain IPv4 router.
$(BUILD)/plain/plain_ipv4.json: benchmarks/p4/plain_ipv4.p4
	@mkdir -p $(BUILD)/plain
	p4c --target bmv2 --arch v1model --std p4-16 \
	  --p4runtime-files $(BUILD)/plain/plain_ipv4.p4info.txtpb -o $(BUILD)/plain $<

build-bench: build $(BUILD)/plain/plain_ipv4.json

# The C traffic generator of switch_pps.py (--generator c): a Python sender cannot
# keep up with the eBPF switch (benchmarks/pktgen/bwn_pktgen.c says what it does).
PKTGEN_CC ?= gcc
$(BUILD)/bwn_pktgen: benchmarks/pktgen/bwn_pktgen.c
	@mkdir -p $(BUILD)
	$(PKTGEN_CC) -O2 -std=gnu11 -Wall -Wextra -o $@ $<

pktgen: $(BUILD)/bwn_pktgen

# Forwarding rate of bwn.p4 against plain_ipv4.p4 on both BMv2 builds (root).
bench-switch: build-bench
	$(PY) benchmarks/switch_pps.py

# Compile when p4c (and p4c-ebpf) is here (so the PTF tests run); otherwise the
# tests that need it skip with one line saying so.
test:
	@if command -v p4c >/dev/null; then $(MAKE) --no-print-directory build; \
	else echo "SKIPPED make build: p4c is not installed (PTF and Mininet tests will be skipped)"; fi
	@if command -v p4c-ebpf >/dev/null; then $(MAKE) --no-print-directory build-ebpf; \
	else echo "SKIPPED make build-ebpf: p4c-ebpf is not installed (the eBPF tests will be skipped)"; fi
	@$(PY) -m pytest; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; rc=0; fi; exit $$rc

ptf: build
	$(PY) ptf-tests/run_ptf.py

# The same suite on the eBPF switch (p4src/psa under NIKSS).
ptf-ebpf: build-ebpf
	$(PY) ptf-tests/run_ptf.py --target ebpf

# Mutation testing of the Python core with mutmut (docs/testing.md): per module,
# resumable (stop it and run it again), niced; not in CI. MODULES="wire hosts" for
# some modules, MUTANTS_ARGS="--retest" after adding tests.
MODULES ?=
MUTANTS_ARGS ?=
mutants:
	@$(PY) -c 'import mutmut' 2>/dev/null || $(PY) -m pip install -q -e '.[mutation]'
	nice -n 10 $(PY) scripts/mutants.py $(MODULES) $(MUTANTS_ARGS)

# The scenario format's JSON Schema, for editors (docs/config.md, "Editors");
# tests/test_scenario_schema.py fails when the committed file is out of date.
schema:
	$(PY) -m bwn.scenario.schema --out docs/scenario.schema.json

clean:
	rm -rf $(BUILD) .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# The unit tier under Python 3.10 (Ubuntu 22.04's): a venv from PY310 (default: the
# first python3.10 found), bwn and its test extras from PyPI, then the tests that
# need neither root nor the P4 toolchain's Python modules.
PY310 ?= $(shell command -v python3.10 2>/dev/null || ls $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.10*/bin/python3.10 2>/dev/null | head -n 1)
test-py310:
	@[ -n "$(PY310)" ] || { echo "test-py310: no python3.10 (PY310=/path/to/python3.10)"; exit 1; }
	$(PY310) -m venv $(BUILD)/venv310 && $(BUILD)/venv310/bin/pip install -q -e '.[test,plots]'
	$(BUILD)/venv310/bin/python -m pytest -q -p no:cacheprovider -m "not scenario" \
	  --ignore=tests/test_ptf_suite.py --ignore=tests/test_slurm.py --ignore=tests/test_reproduce_slurm.py
