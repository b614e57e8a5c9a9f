# unit tier: see tests/tests.mk. One cmocka binary per pure module, linked against the server
# library, built into $(B)/tests/unit/ (so `make SAN=1 test-unit` runs them under ASan+UBSan);
# then mac_vectors.py recomputes the MAC test vectors with Python's hmac module and checks that
# docs/PROTOCOL.md and test_mac_vectors.c carry the same ones, link_cycles.py shows that
# scripts/link-cycles can fail, and test_runner.py that the Python tiers' runner (its timeout, its
# filter, its results) does what tests/tests.mk says. T=NAME: the cmocka tests whose names hold
# NAME (tests/cmocka_filter.c), and the scripts whose file names do.

UNIT_TESTS := envelope mac_vectors contenthash fileindex store replay replaylog keys channel fsops cgroup sbpath preview httpreq \
              ring marks meminfo egresspolicy httpparse broker
UNIT_BINS  := $(patsubst %,$(B)/tests/unit/test_%,$(UNIT_TESTS))
# Client-side tests link bkctl's objects and libboxkite instead of the server and executor libraries.
UNIT_CLIENT_BINS := $(B)/tests/unit/test_bkctl_files $(B)/tests/unit/test_bkctl_text
UNIT_OBJS  := $(addsuffix .o,$(UNIT_BINS) $(UNIT_CLIENT_BINS))

# Unit tests reach modules of every directory.
$(UNIT_OBJS): $(B)/tests/unit/%.o: tests/unit/%.c
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -Iserver -Isidecar -Iclient/cli -Iegress -c $< -o $@

$(B)/tests/cmocka_filter.o: tests/cmocka_filter.c
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -c $< -o $@

$(UNIT_BINS): %: %.o $(B)/tests/cmocka_filter.o $(B)/libbkfront.a $(B)/libbkexec.a $(B)/libbkegress.a $(B)/libbkcore.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_SERVER) -lssl -lcmocka

# bkctl's file commands and text without a server: bkctl's objects but main.c (the command
# table and main()), which nothing else links to (make layout-check).
$(UNIT_CLIENT_BINS): %: %.o $(B)/tests/cmocka_filter.o $(call obj,$(filter-out client/cli/main.c,$(BKCTL_SRC))) \
		$(B)/obj/gen-kube/sandbox_pod.o $(B)/libbkcore.a $(B)/libboxkite.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_CLIENT) -lcmocka

# Under SAN=1, full stacks for LeakSanitizer's reports (libcrypto has no frame pointers).
UNIT_ENV := ASAN_OPTIONS=fast_unwind_on_malloc=0

# Run every binary even after a failure, so one run reports them all; fail if any failed.
UNIT_SCRIPTS := mac_vectors.py link_cycles.py test_runner.py

test-unit: $(UNIT_BINS) $(UNIT_CLIENT_BINS)
	@tier_start=$$(date +%s.%N); failed=""; \
	for t in $(UNIT_BINS) $(UNIT_CLIENT_BINS); do $(UNIT_ENV) $$t || failed="$$failed $$(basename $$t)"; done; \
	for s in $(UNIT_SCRIPTS); do \
	  if $(call test_selected,$$s); then $(PYTHON) tests/unit/$$s || failed="$$failed $$s"; fi; \
	done; \
	$(call tier_seconds,unit$(TIER_SUFFIX)); \
	if [ -n "$$failed" ]; then echo "test-unit: FAILED:$$failed" >&2; exit 1; fi; \
	echo "test-unit: all passed"
