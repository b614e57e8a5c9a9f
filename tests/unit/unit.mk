# unit tier: see tests/tests.mk. One cmocka binary per pure module, linked against the server
# library, built into $(B)/tests/unit/ (so `make SAN=1 test-unit` runs them under ASan+UBSan);
# then mac_vectors.py recomputes the MAC test vectors with Python's hmac module and checks that
# docs/PROTOCOL.md and test_mac_vectors.c carry the same ones.

UNIT_TESTS := envelope mac_vectors replay keys
UNIT_BINS  := $(patsubst %,$(B)/tests/unit/test_%,$(UNIT_TESTS))
UNIT_OBJS  := $(addsuffix .o,$(UNIT_BINS))

$(UNIT_OBJS): $(B)/tests/unit/%.o: tests/unit/%.c
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -c $< -o $@

$(UNIT_BINS): %: %.o $(B)/libbkserver.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_SERVER) -lcmocka

# Under SAN=1, full stacks for LeakSanitizer's reports (libcrypto has no frame pointers).
UNIT_ENV := ASAN_OPTIONS=fast_unwind_on_malloc=0

# Run every binary even after a failure, so one run reports them all; fail if any failed.
test-unit: $(UNIT_BINS)
	@failed=""; \
	for t in $(UNIT_BINS); do $(UNIT_ENV) $$t || failed="$$failed $$(basename $$t)"; done; \
	$(PYTHON) tests/unit/mac_vectors.py || failed="$$failed mac_vectors.py"; \
	if [ -n "$$failed" ]; then echo "test-unit: FAILED:$$failed" >&2; exit 1; fi; \
	echo "test-unit: all passed"
