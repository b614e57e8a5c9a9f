# Test tiers (STYLE.md §11), each in its own directory with its own rules fragment:
#   unit         cmocka tests of pure modules (envelope, replay, keys, ...)
#   wire         in-process client+server over ipc:// (attacks on the envelope, dispatch)
#   fuzz         libFuzzer harnesses; `make test` replays their corpus without libFuzzer
#   integration  the real boxkited as root: privileges, sandbox, escape probes
#   workloads    the real boxkited as root: the ordinary tools agents run (pip, make, git, node...)
#   files        the real boxkited as root: uploads, downloads and file operations, attacked
#   python       the Python package (sdk/python), installed, against the real boxkited: a
#                second-language client speaking the wire contract from docs/PROTOCOL.md
#   install      make install and pkg-config as a library user meets them; README.md's
#                walkthrough run as written in a scratch root
#   k8s          deploy/ rendered and validated offline: schemas, invariants, the admission policy,
#                agent-sandbox's objects and pods, the NetworkPolicy truth table
# `make test` runs them all, then the C tiers, the integration tier and bkctl's copies again under
# ASan+UBSan (SAN=1), and ends by saying how many tests were skipped, if any (never "all passed"
# over a skip).

TEST_CFLAGS := $(CPPFLAGS) $(CFLAGS) $(WARN) -fPIE -Itests
PYTHON      := /usr/bin/python3

# The Python tiers (integration, workloads, files, python, k8s, install) all run through
# tests/integration/run.py: one line per test, a "SKIP <test>: <reason>" line for each test that
# could not run, and a last line "test-<tier>: N passed, N failed, N skipped". Each also writes its
# number of skipped tests to $(BOXKITE_TEST_RESULTS)/<tier>.skipped (one directory for the plain
# and the SAN=1 runs alike: the sub-makes inherit it), and make test's last line adds them up: a
# run that skipped tests never reads as one that ran them all.
#
# Every tier writes the seconds it took to <tier>.seconds beside it (the C tiers under SAN=1 as
# <tier>-san), and make test ends with their table.
#
# One test, or every test whose name holds NAME, in any tier: make test-<tier> T=NAME. The Python
# tiers take it as run.py's -k, the cmocka programs as their filter (tests/cmocka_filter.c), the
# unit tier's scripts and the fuzz targets by their names.
#
# A Python test has TEST_TIMEOUT seconds (600 unless set): then every thread's traceback is
# printed and the test fails where it hangs (run.py's watchdog), and the run goes on.
export BOXKITE_TEST_RESULTS ?= $(CURDIR)/$(B)/test-results
T               ?=
export BOXKITE_TEST_FILTER := $(T)
TEST_TIMEOUT    ?= 600
export BOXKITE_TEST_TIMEOUT := $(TEST_TIMEOUT)
TEST_RUN        := $(PYTHON) $(CURDIR)/tests/integration/run.py $(if $(T),-k '$(T)')
TEST_SKIP_TIERS := escape-selftest integration workloads files python k8s integration-san files-bkctl install
TEST_TIME_TIERS := unit wire fuzz escape-selftest integration workloads files python k8s install \
                   unit-san wire-san fuzz-san integration-san files-bkctl
# INTEGRATION_ARGS, FILES_ARGS and WORKLOADS_ARGS were three tiers' own filters; T is every tier's.
$(foreach v,INTEGRATION_ARGS FILES_ARGS WORKLOADS_ARGS,$(if $($(v)),$(error $(v) is gone: make test-<tier> T=NAME runs the tests whose names hold NAME)))
# The name a C tier's time is written under: its own, or <tier>-san in the SAN=1 build.
TIER_SUFFIX     := $(if $(filter 1,$(SAN)),-san)
# In a tier's recipe: `tier_start=$$(date +%s.%N)` first, then $(call tier_seconds,NAME) at its end.
tier_seconds     = mkdir -p $(BOXKITE_TEST_RESULTS) && \
                   echo "$$(date +%s.%N) $$tier_start" | awk '{ printf "%.1f\n", $$1 - $$2 }' \
                   >$(BOXKITE_TEST_RESULTS)/$(1).seconds
# Whether a test named $(1) is selected by T (every one without T).
test_selected    = { [ -z "$(T)" ] || case "$(1)" in *"$(T)"*) true;; *) false;; esac; }

.PHONY: test test-unit test-wire test-fuzz test-integration test-integration-san test-workloads test-files \
        test-files-bkctl test-python test-k8s test-install test-san

test: test-deps
	rm -f $(BOXKITE_TEST_RESULTS)/*.skipped $(BOXKITE_TEST_RESULTS)/*.seconds
	$(MAKE) gen-check layout-check docs-check
	$(MAKE) all test-unit test-wire test-fuzz test-integration test-workloads test-files test-python test-k8s \
		test-install
	$(MAKE) SAN=1 test-san
	@echo "make test: seconds per tier"; all=0; \
	for t in $(TEST_TIME_TIERS); do \
	  f=$(BOXKITE_TEST_RESULTS)/$$t.seconds; \
	  if ! n=$$(cat $$f 2>/dev/null) || [ -z "$$n" ]; then echo "make test: tier $$t wrote no time to $$f" >&2; exit 1; fi; \
	  printf '  %-16s %8s s\n' $$t $$n; all=$$(echo "$$all $$n" | awk '{ print $$1 + $$2 }'); \
	done; printf '  %-16s %8s s\n' total $$all
	@total=0; tiers=; \
	for t in $(TEST_SKIP_TIERS); do \
	  f=$(BOXKITE_TEST_RESULTS)/$$t.skipped; \
	  if ! n=$$(cat $$f 2>/dev/null) || [ -z "$$n" ]; then echo "make test: tier $$t wrote no result to $$f" >&2; exit 1; fi; \
	  total=$$((total + n)); [ "$$n" -eq 0 ] || tiers="$$tiers, $$t $$n"; \
	done; \
	if [ "$$total" -eq 0 ]; then echo "make test: all tiers passed, no test skipped"; \
	else echo "make test: no test failed, but $$total tests skipped ($${tiers#, }): see the SKIP lines above"; fi

test-san: all test-unit test-wire test-fuzz test-integration-san test-files-bkctl

include tests/unit/unit.mk
include tests/wire/wire.mk
include tests/fuzz/fuzz.mk
include tests/integration/integration.mk
include tests/workloads/workloads.mk
include tests/files/files.mk
include tests/python/python.mk
include tests/k8s/k8s.mk
include tests/install/install.mk
