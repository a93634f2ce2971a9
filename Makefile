# ccemu: the user's entry points. `make experiment NAME=incast` and `make test` install
# what they need first (Debian packages, the Python virtualenv), idempotently.

SHELL := /bin/bash
VENV := .venv
PYTHON := $(VENV)/bin/python
CCEMU := $(VENV)/bin/ccemu
NAME ?= incast
HOSTS ?=
DATAPATH ?=
SWEEP ?=
INVENTORY ?=
# Ansible (in the virtualenv) with the playbooks' settings.
ANSIBLE_ENV := PATH="$(CURDIR)/$(VENV)/bin:$$PATH" ANSIBLE_CONFIG="$(CURDIR)/playbooks/ansible.cfg"

BPF_SRC := emulation/ccemu/ports/bpf
BPF_OUT := build/bpf
CCHOST := build/cchost
CARGO ?= $(shell command -v cargo || echo $(HOME)/.cargo/bin/cargo)
# Lints the hosted-CI workflow in `make test`; a pinned version from the Go module proxy, so every
# machine lints alike (to bump it: change the version and remove build/actionlint).
ACTIONLINT := build/actionlint
ACTIONLINT_VERSION := v1.7.12

# Debian 12's names, one list shared with Ansible (playbooks/roles/ccemu_packages/files/; comments
# after #); apt-packages adapts two of them where the machine needs it (see there).
PACKAGE_LISTS := $(wildcard playbooks/roles/ccemu_packages/files/debian-packages*.txt)
package-names = $(strip $(shell sed 's/\#.*//' $(1)))
APT_PACKAGES := $(call package-names,$(PACKAGE_LISTS))
# What ccemu runs besides Python: built here, copied to the machines of an inventory by Ansible
# (roles/ccemu_build), which need no Rust toolchain.
BUILD_OUTPUTS := $(BPF_OUT)/port.bpf.o $(BPF_OUT)/port_loader $(CCHOST)

.PHONY: setup build apt-packages test-packages image experiment provision sweep reproduce test smoke bench dashboards replay schemes validate clean distclean

setup: $(VENV)/.installed $(BUILD_OUTPUTS) $(ACTIONLINT)

build: $(BUILD_OUTPUTS)

# Checks what is missing first so that a set-up machine pays ~0.1 s, not an apt run.
# Ubuntu (/etc/os-release; the hosted CI runner) ships bpftool in linux-tools-common before 25.04,
# not as a package of its own. A Docker engine already there (Docker's docker-ce, as on the hosted
# runner) stands in for docker.io: its containerd.io conflicts with docker.io's containerd; its
# compose plugin stands in for Debian's docker-compose.
# (roles/ccemu_packages makes the same two adaptations.)
define install-missing
	@pkgs="$(1)"; \
	[ "$$(. /etc/os-release && echo "$$ID")" = ubuntu ] && pkgs="$${pkgs/bpftool/linux-tools-common}"; \
	command -v dockerd >/dev/null && pkgs="$${pkgs/docker.io/}"; \
	docker compose version >/dev/null 2>&1 && pkgs="$${pkgs/docker-compose/}"; \
	missing=$$(for p in $$pkgs; do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		[ "$$(id -u)" = 0 ] || { echo "make $@: installing Debian packages needs root: $$missing" >&2; exit 1; }; \
		echo "Installing Debian packages:" $$missing; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi
endef

apt-packages:
	$(call install-missing,$(APT_PACKAGES))

test-packages:
	$(call install-missing,$(call package-names,emulation/tests/debian-packages.txt))

# Debian's python3 so that Debian's mininet imports; only mininet is linked in, every other
# dependency is pinned in emulation/requirements.lock.
$(VENV)/.installed: emulation/pyproject.toml emulation/requirements.lock | apt-packages
	/usr/bin/python3 -m venv $(VENV)
	ln -sfn /usr/lib/python3/dist-packages/mininet \
		"$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/mininet"
	$(VENV)/bin/pip install -q --disable-pip-version-check -c emulation/requirements.lock -e 'emulation[test]'
	touch $@

# The port program (kernel side) and its loader; ccemu finds them in build/bpf/.
$(BPF_OUT)/port.bpf.o: $(BPF_SRC)/port.bpf.c $(BPF_SRC)/port.h $(BPF_SRC)/port_config.h $(BPF_SRC)/port_structs.h $(BPF_SRC)/switch.h | apt-packages
	@mkdir -p $(BPF_OUT)
	clang -O2 -g -Wall -Werror -target bpf -mcpu=v3 -I$(BPF_SRC) -I/usr/include/$$(gcc -dumpmachine) -c $< -o $@

$(BPF_OUT)/port_loader: $(BPF_SRC)/port_loader.c $(BPF_SRC)/port.h $(BPF_SRC)/port_config.h $(BPF_SRC)/port_structs.h | apt-packages
	@mkdir -p $(BPF_OUT)
	gcc -O2 -Wall -Werror -I$(BPF_SRC) -o $@ $< -lbpf

# The transport every emulated host runs (ccemu finds it in build/). Linked statically (glibc's
# crt-static: no toolchain beyond rustup's) so that the same binary runs in a namespace host and
# in the Docker host image, which is built FROM scratch. An explicit --target keeps the static
# flags off build scripts and out of cargo test's artifacts.
RUST_HOST := $(shell $(CARGO) -vV 2>/dev/null | sed -n 's/^host: //p')
$(CCHOST): transport/Cargo.toml transport/Cargo.lock $(shell find transport/src -name '*.rs') Makefile
	@[ -x "$(CARGO)" ] || { echo "make setup: cargo not found: install Rust (https://rustup.rs)" >&2; exit 1; }
	RUSTFLAGS="-C target-feature=+crt-static" $(CARGO) build --quiet --release --locked \
		--manifest-path transport/Cargo.toml --target $(RUST_HOST)
	install -D transport/target/$(RUST_HOST)/release/cchost $@
	$(write-schemes)

# model/schemes.json is cchost's scheme table checked in, so that configs are judged without a build
# (on a controller, in `ccemu report`). The rule that builds cchost rewrites it where it differs, so
# a scheme added in transport/ is accepted as soon as cchost is built, and the table to commit shows
# in `git status`. (Reading build/cchost's table at run time instead would make what a config may say
# depend on whether, and which, cchost is built on the machine judging it.) A unit test fails while
# the two differ (a cchost built by cargo alone: `make schemes` rewrites it from build/cchost).
SCHEMES_TABLE := emulation/ccemu/model/schemes.json
define write-schemes
	@set -o pipefail; $(CCHOST) --schemes --json \
		| python3 -c 'import json, sys; json.dump(json.load(sys.stdin), sys.stdout, indent=1); print()' \
		> $(SCHEMES_TABLE).new || { rm -f $(SCHEMES_TABLE).new; exit 1; }; \
	if cmp -s $(SCHEMES_TABLE).new $(SCHEMES_TABLE); then rm $(SCHEMES_TABLE).new; \
	else mv $(SCHEMES_TABLE).new $(SCHEMES_TABLE); echo "$(SCHEMES_TABLE): rewritten from $(CCHOST)'s table"; fi
endef

# Rebuilt only when missing. Without Go it says so once and make test skips the lint.
$(ACTIONLINT):
	@if command -v go >/dev/null; then \
		echo "Building actionlint $(ACTIONLINT_VERSION) into $(@D)/"; \
		GOBIN="$(CURDIR)/$(@D)" go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION); \
	else \
		echo "make setup: go not found: $@ not built, so make test will not lint .github/workflows/ci.yml" >&2; \
	fi

# The Docker host image (docker/host/): static cchost and busybox, FROM scratch, tagged with
# cchost's hash. `make experiment` builds it too when the experiment has Docker hosts.
image: setup
	$(CCEMU) image

# HOSTS=docker runs the experiment's hosts in Docker containers (HOSTS=namespace: in namespaces),
# whatever its file says. ARGS: more `ccemu experiment` options (`ccemu experiment --help`), e.g. a
# variant of the file: ARGS='--schemes expresspass,dctcp --set workload.rounds=2'.
experiment: setup
	$(CCEMU) experiment workloads/experiments/$(NAME).yaml $(if $(HOSTS),--hosts $(HOSTS)) $(ARGS)

# Judges workloads/experiments/NAME.yaml as `make experiment` with the same HOSTS and ARGS would run
# it, without root and starting nothing (it asks the built cchost about every scheme's arguments).
validate: $(VENV)/.installed $(CCHOST)
	$(CCEMU) validate workloads/experiments/$(NAME).yaml $(if $(HOSTS),--hosts $(HOSTS)) $(ARGS)

# Provisions the machines of INVENTORY (default: this machine, in place) with playbooks/site.yml:
# Debian packages, ccemu's tree with cchost and the port program built here, the virtualenv;
# Docker hosts' engine and image with ARGS='-e ccemu_site_docker=true'. Idempotent.
provision: $(VENV)/.installed
	$(ANSIBLE_ENV) $(VENV)/bin/ansible-playbook $(if $(INVENTORY),-i $(INVENTORY)) playbooks/site.yml $(ARGS)

# SWEEP=FILE: an experiment at every point of the sweep file's grid, one after another here, or
# across the machines of INVENTORY=FILE (provisioned by `make provision`); one merged summary.
sweep: setup
	@[ -n "$(SWEEP)" ] || { echo "make sweep: set SWEEP, e.g. SWEEP=workloads/sweeps/incast.yaml" >&2; exit 2; }
	$(CCEMU) sweep $(SWEEP) $(if $(INVENTORY),--inventory $(INVENTORY))

# Every experiment of the seeds, then results/reproduce/TIME/REPORT.md beside the papers' numbers
# (REPEATS=N: each experiment N times, each claim judged on the median of its runs).
reproduce: setup
	$(CCEMU) reproduce $(if $(HOSTS),--hosts $(HOSTS)) $(if $(PROFILE),--profile $(PROFILE)) \
		$(if $(REPEATS),--repeats $(REPEATS))

test: setup test-packages
	$(CARGO) fmt --manifest-path transport/Cargo.toml --check
	$(CARGO) clippy --quiet --manifest-path transport/Cargo.toml --all-targets -- -D warnings
	$(CARGO) test --manifest-path transport/Cargo.toml
	@if [ -x $(ACTIONLINT) ]; then echo "$(ACTIONLINT) .github/workflows/ci.yml"; $(ACTIONLINT) .github/workflows/ci.yml; \
	else echo "make test: $(ACTIONLINT) missing (no go to build it): .github/workflows/ci.yml not linted"; fi
	cd playbooks && $(ANSIBLE_ENV) ansible-lint --nocolor -q && $(ANSIBLE_ENV) ansible-playbook --syntax-check site.yml sweep.yml
	cd emulation && ../$(VENV)/bin/ruff check --quiet . ../ci && ../$(PYTHON) -m pytest

# CI's smoke emulation (under 3 minutes): a k=4 fabric check and one incast round per scheme,
# invariants checked on the results bundle (ci/smoke.py says which). DATAPATH=ovs|bpf runs it on that
# fabric.datapath, whatever ci/smoke.yaml says (`auto`); .ci/run runs it on both.
smoke: setup
	$(PYTHON) ci/smoke.py $(if $(DATAPATH),--datapath $(DATAPATH))

bench: setup
	$(PYTHON) emulation/benchmarks/routing.py
	$(PYTHON) emulation/benchmarks/bringup.py
	$(PYTHON) emulation/benchmarks/capacity.py
	$(PYTHON) emulation/benchmarks/ports.py
	$(PYTHON) emulation/benchmarks/bursts.py
	$(CCEMU) bench transport
	$(PYTHON) emulation/benchmarks/datapaths.py

# Rewrites model/schemes.json from build/cchost's table (building cchost does too; see there).
schemes: $(CCHOST)
	$(write-schemes)

# Loads dashboards/*.json into a running Grafana (token in $$GRAFANA_TOKEN, or user:pass@ in the URL).
dashboards: setup
	@[ -n "$(GRAFANA_URL)" ] || { echo "make dashboards: set GRAFANA_URL, e.g. GRAFANA_URL=http://127.0.0.1:3000" >&2; exit 2; }
	$(PYTHON) -m ccemu.metrics.dashboards upload $(GRAFANA_URL)

# Replays a finished run in Grafana on http://127.0.0.1:3000 (docker/compose.yml's bundle profile:
# Prometheus on a copy of its TSDB, the bundle mounted read-only) until Ctrl-C; first the links
# that open each dashboard on the run's time range. Compose wants BUNDLE absolute.
# Docker's compose plugin where it is installed, else Debian's docker-compose.
COMPOSE = $(shell docker compose version >/dev/null 2>&1 && echo 'docker compose' || echo docker-compose)
PROMETHEUS_PORT ?= 9090
replay: $(VENV)/.installed
	@[ -d "$(BUNDLE)/prometheus/data" ] || { echo "make replay: set BUNDLE to a results bundle with Prometheus data, e.g. BUNDLE=results/incast/TIME" >&2; exit 2; }
	@$(PYTHON) -m ccemu.metrics.grafana links "$(BUNDLE)"
	BUNDLE="$(abspath $(BUNDLE))" CCEMU_PROMETHEUS_PORT=$(PROMETHEUS_PORT) $(COMPOSE) -f docker/compose.yml --profile bundle up

# Removes what killed runs left behind (by their recorded inventory).
clean: setup
	$(CCEMU) clean

distclean: clean
	rm -rf $(VENV)
