# Test tiers (STYLE.md §11): unit (cmocka, pure modules), wire (in-process client+server),
# integration (the real daemon as root), python (a second-language client), fuzz (corpus
# replay). `make test` runs them all, then the C tiers again under ASan+UBSan (SAN=1).

TEST_CFLAGS := $(CPPFLAGS) $(CFLAGS) $(WARN) -fPIE -Itests

.PHONY: test test-unit test-wire test-integration test-python test-fuzz test-san

test: deps
	$(MAKE) gen-check
	$(MAKE) all test-unit test-wire test-fuzz test-integration test-python
	$(MAKE) SAN=1 test-san
	@echo "make test: all tiers passed"

test-san: all test-unit test-wire test-fuzz
