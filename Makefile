# The two commands of a fresh machine (see README.md):
#   make demo   install what is missing, build, run the demo
#   make test   install what is missing, build, run every test
SHELL := /bin/bash
.DEFAULT_GOAL := test

GOLDENS ?= $(abspath ../shared/goldens)

# Debian bookworm packages the build, the tests and the demo need.
APT_PACKAGES := \
  bazel-bootstrap bazel-rules-java g++ clang libclang-rt-14-dev \
  libabsl-dev libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc \
  python3-grpcio python3-protobuf \
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev \
  libcpp-httplib-dev libssl-dev libsystemd-dev liburing-dev prometheus systemd openssl curl haproxy python3-yaml tmux \
  fortunes

# Without nvcc the CUDA targets are switched off; everything else still builds.
# Per-machine settings (a job cap on a shared box) go in user.bazelrc, or in
# BAZEL_FLAGS: make test BAZEL_FLAGS="--jobs=2 --local_cpu_resources=2".
BAZEL_FLAGS ?=
BAZEL_CONFIG := $(if $(wildcard /usr/local/cuda/bin/nvcc),,--config=nocuda) $(BAZEL_FLAGS)
BAZEL := bazel
DISK_CACHE := $(HOME)/.cache/sluice-bazel-disk

.PHONY: deps build test demo fuzz fuzz-bundle bench clean

deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi
	@# Node and npm run the official openai client in the HTTP API test. Checked
	@# as commands: a NodeSource nodejs package bundles npm and conflicts with Debian's.
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
	  echo "installing: nodejs npm"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm; \
	fi

build: deps
	$(BAZEL) build $(BAZEL_CONFIG) //...

test: deps
	SLUICE_GOLDENS=$(GOLDENS) tests/run_all.sh $(BAZEL) $(BAZEL_CONFIG)

demo: deps
	SLUICE_GOLDENS=$(GOLDENS) daemon/demo.sh $(BAZEL) $(BAZEL_CONFIG)

# The three fuzz targets to 10 million executions each (or 540 s), on all
# cores (most for the slow tokenizer; fuzz/run_all.sh): the bundle (binaries, the libraries a bare Ubuntu 24.04 lacks,
# seeds, run_all.sh) is built into FUZZ_BUNDLE and run from there, the same
# command a machine without clang runs on a copy of FUZZ_BUNDLE:
# $(FUZZ_BUNDLE)/run_all.sh [cores per target, or G,F,T] [executions] [seconds].
FUZZ_BUNDLE ?= .device/fuzz
FUZZ_ARGS ?=
fuzz: deps
	fuzz/bundle.sh $(FUZZ_BUNDLE) && $(FUZZ_BUNDLE)/run_all.sh $(FUZZ_ARGS)

fuzz-bundle: deps
	fuzz/bundle.sh $(FUZZ_BUNDLE)

bench: deps
	$(BAZEL) run -c opt $(BAZEL_CONFIG) //bench:matvec_bench

# Bazel's outputs go; the disk cache shared by every clone and output base
# (.bazelrc --disk_cache) stays, so the next build is quick.
clean:
	$(BAZEL) clean
	@echo "kept the Bazel disk cache $(DISK_CACHE) ($$(du -sh $(DISK_CACHE) 2>/dev/null | cut -f1));" \
	  "drop it with: rm -rf $(DISK_CACHE)"
