# Test tiers (STYLE.md §11), each in its own directory with its own rules fragment:
#   unit         cmocka tests of pure modules (envelope, replay, keys, ...)
#   wire         in-process client+server over ipc:// (attacks on the envelope, dispatch)
#   fuzz         libFuzzer harnesses; `make test` replays their corpus without libFuzzer
#   integration  the real boxkited as root: privileges, sandbox, escape probes
#   files        the real boxkited as root: uploads, downloads and file operations, attacked
#   python       a second-language client speaking the wire contract from docs/PROTOCOL.md
# `make test` runs them all, then the C tiers and bkctl's copies again under ASan+UBSan (SAN=1).

TEST_CFLAGS := $(CPPFLAGS) $(CFLAGS) $(WARN) -fPIE -Itests
PYTHON      := /usr/bin/python3

.PHONY: test test-unit test-wire test-fuzz test-integration test-files test-files-bkctl test-python test-san

test: deps
	$(MAKE) gen-check
	$(MAKE) all test-unit test-wire test-fuzz test-integration test-files test-python
	$(MAKE) SAN=1 test-san
	@echo "make test: all tiers passed"

test-san: all test-unit test-wire test-fuzz test-files-bkctl

include tests/unit/unit.mk
include tests/wire/wire.mk
include tests/fuzz/fuzz.mk
include tests/integration/integration.mk
include tests/files/files.mk
include tests/python/python.mk
