# bwn: bandwidth notification on programmable switches.
#   make deps   install what this platform offers (Debian/Ubuntu packages, Python venv)
#   make build  compile the P4 program with p4c into build/
#   make test   all tests (unit, namespace end-to-end, PTF on BMv2, Mininet smoke)
#   make ptf    only the PTF suite, with its live output
#   make clean
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
BUILD := build
P4_MAIN := p4src/v1model/bwn.p4
P4_SRCS := $(wildcard p4src/shared/*.p4 p4src/v1model/*.p4)
APT_PACKAGES := python3 python3-venv python3-pip python3-scapy python3-thrift iproute2 iputils-ping \
	ethtool tcpdump tshark iperf3 mininet make

.PHONY: deps build test ptf clean p4-toolchain-status

deps:
	@if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  (apt-get update -q && apt-get install -y -q --no-install-recommends $(APT_PACKAGES)) \
	    || echo "deps: WARNING: apt-get failed; continuing with what is installed (tests skip what is missing)"; \
	else echo "deps: not root or no apt-get: install these yourself: $(APT_PACKAGES)"; fi
	@. /etc/os-release 2>/dev/null; \
	if command -v p4c >/dev/null && command -v simple_switch_grpc >/dev/null; then \
	  echo "deps: p4c and simple_switch_grpc found: $$(command -v p4c) $$(command -v simple_switch_grpc)"; \
	elif [ "$$ID" = ubuntu ] && [ "$$(id -u)" = 0 ]; then \
	  echo "deps: installing the p4lang packages (p4c, BMv2, PI) for Ubuntu $$VERSION_ID"; \
	  echo "deb http://download.opensuse.org/repositories/home:/p4lang/xUbuntu_$$VERSION_ID/ /" > /etc/apt/sources.list.d/home:p4lang.list; \
	  curl -fsSL "https://download.opensuse.org/repositories/home:p4lang/xUbuntu_$$VERSION_ID/Release.key" | gpg --dearmor > /etc/apt/trusted.gpg.d/home_p4lang.gpg; \
	  apt-get update -q && apt-get install -y -q p4lang-p4c p4lang-bmv2 p4lang-pi; \
	else \
	  echo "deps: p4c/simple_switch_grpc are not installed and this platform ($$ID) has no package for them."; \
	  echo "deps: build p4lang/PI, p4lang/behavioral-model (--with-pi, Thrift on) and p4lang/p4c (bmv2 backend)"; \
	  echo "deps: from source following their READMEs (see README.md, 'The P4 toolchain'); tests that need them are skipped."; \
	fi
	@if [ ! -x $(PY) ]; then /usr/bin/python3 -m venv --system-site-packages $(VENV); fi
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,p4rt,plots]'

$(BUILD)/bwn.json $(BUILD)/bwn.p4info.txtpb: $(P4_SRCS)
	@mkdir -p $(BUILD)
	p4c --target bmv2 --arch v1model --std p4-16 \
	  --p4runtime-files $(BUILD)/bwn.p4info.txtpb -o $(BUILD) $(P4_MAIN)

build: $(BUILD)/bwn.json

# Compile when p4c is here (so the PTF tests run); otherwise the tests that need
# it skip with one line saying so.
test:
	@if command -v p4c >/dev/null; then $(MAKE) --no-print-directory build; \
	else echo "SKIPPED make build: p4c is not installed (PTF and Mininet tests will be skipped)"; fi
	@$(PY) -m pytest; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; rc=0; fi; exit $$rc

ptf: build
	$(PY) ptf-tests/run_ptf.py

clean:
	rm -rf $(BUILD) .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
