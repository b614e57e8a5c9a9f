# Test tiers (STYLE.md §11), each in its own directory with its own rules fragment:
#   unit         cmocka tests of pure modules (envelope, replay, keys, ...)
#   wire         in-process client+server over ipc:// (attacks on the envelope, dispatch)
#   fuzz         libFuzzer harnesses; `make test` replays their corpus without libFuzzer
#   integration  the real boxkited as root: privileges, sandbox, escape probes
#   workloads    the real boxkited as root: the ordinary tools agents run (pip, make, git, node...)
#   files        the real boxkited as root: uploads, downloads and file operations, attacked
#   python       a second-language client speaking the wire contract from docs/PROTOCOL.md
#   install      make install and pkg-config as a library user meets them; README.md's
#                walkthrough run as written in a scratch root
#   k8s          deploy/ rendered and validated offline: schemas, invariants, the admission policy,
#                agent-sandbox's objects and pods, the NetworkPolicy truth table
# `make test` runs them all, then the C tiers, the integration tier and bkctl's copies again under
# ASan+UBSan (SAN=1), and ends by saying how many tests were skipped, if any (never "all passed"
# over a skip).

TEST_CFLAGS := $(CPPFLAGS) $(CFLAGS) $(WARN) -fPIE -Itests
PYTHON      := /usr/bin/python3

# The Python tiers (integration, files, python) all run through tests/integration/run.py: one line
# per test, a "SKIP <test>: <reason>" line for each test that could not run, and a last line
# "test-<tier>: N passed, N failed, N skipped". Each also writes its number of skipped tests to
# $(BOXKITE_TEST_RESULTS)/<tier>.skipped (one directory for the plain and the SAN=1 runs alike:
# the sub-makes inherit it), and make test's last line adds them up: a run that skipped tests
# never reads as one that ran them all.
export BOXKITE_TEST_RESULTS ?= $(CURDIR)/$(B)/test-results
TEST_RUN        := $(PYTHON) $(CURDIR)/tests/integration/run.py
TEST_SKIP_TIERS := escape-selftest integration workloads files python k8s integration-san files-bkctl install

.PHONY: test test-unit test-wire test-fuzz test-integration test-integration-san test-workloads test-files \
        test-files-bkctl test-python test-k8s test-install test-san

test: deps
	rm -f $(BOXKITE_TEST_RESULTS)/*.skipped
	$(MAKE) gen-check layout-check docs-check
	$(MAKE) all test-unit test-wire test-fuzz test-integration test-workloads test-files test-python test-k8s \
		test-install
	$(MAKE) SAN=1 test-san
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
