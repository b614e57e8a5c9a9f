# unit tier: see tests/tests.mk. One cmocka binary per pure module, linked against the server
# library, built into $(B)/tests/unit/ (so `make SAN=1 test-unit` runs them under ASan+UBSan);
# then mac_vectors.py recomputes the MAC test vectors with Python's hmac module and checks that
# docs/PROTOCOL.md and test_mac_vectors.c carry the same ones.

UNIT_TESTS := envelope mac_vectors contenthash fileindex store replay replaylog keys channel fsops cgroup sbpath preview \
              egresspolicy httpparse broker
UNIT_BINS  := $(patsubst %,$(B)/tests/unit/test_%,$(UNIT_TESTS))
# Client-side tests link bkctl's objects and libboxkite instead of the server and executor libraries.
UNIT_CLIENT_BINS := $(B)/tests/unit/test_bkctl_files $(B)/tests/unit/test_bkctl_text
UNIT_OBJS  := $(addsuffix .o,$(UNIT_BINS) $(UNIT_CLIENT_BINS))

# Unit tests reach modules of every directory.
$(UNIT_OBJS): $(B)/tests/unit/%.o: tests/unit/%.c
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -Iserver -Isidecar -Iclient/cli -Iegress -c $< -o $@

$(UNIT_BINS): %: %.o $(B)/libbkfront.a $(B)/libbkexec.a $(B)/libbkegress.a $(B)/libbkcore.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_SERVER) -lssl -lcmocka

# bkctl's file commands and text without a server: bkctl's objects but main.c (the command
# table and main()), which nothing else links to (make layout-check).
$(UNIT_CLIENT_BINS): %: %.o $(call obj,$(filter-out client/cli/main.c,$(BKCTL_SRC))) \
		$(B)/obj/gen-kube/sandbox_pod.o $(B)/libbkcore.a $(B)/libboxkite.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_CLIENT) -lcmocka

# Under SAN=1, full stacks for LeakSanitizer's reports (libcrypto has no frame pointers).
UNIT_ENV := ASAN_OPTIONS=fast_unwind_on_malloc=0

# Run every binary even after a failure, so one run reports them all; fail if any failed.
test-unit: $(UNIT_BINS) $(UNIT_CLIENT_BINS)
	@failed=""; \
	for t in $(UNIT_BINS) $(UNIT_CLIENT_BINS); do $(UNIT_ENV) $$t || failed="$$failed $$(basename $$t)"; done; \
	$(PYTHON) tests/unit/mac_vectors.py || failed="$$failed mac_vectors.py"; \
	$(PYTHON) tests/unit/link_cycles.py || failed="$$failed link_cycles.py"; \
	if [ -n "$$failed" ]; then echo "test-unit: FAILED:$$failed" >&2; exit 1; fi; \
	echo "test-unit: all passed"
