# wire tier: see tests/tests.mk. The server core runs in-process on ipc:// (no executor, no root)
# and is attacked by a raw nng peer and exercised through libboxkite. Each program logs the
# server's JSON lines to <program>.log; on failure the rest of its stderr (cmocka, sanitizers) is
# shown. Programs: attacks (forged envelopes against dispatch), client (libboxkite, and its
# checks of tampered answers), time_edges (int64 timestamps).

WIRE_PROGS   := attacks client time_edges front watch
WIRE_BIN     := $(addprefix $(B)/tests/wire/,$(WIRE_PROGS))
WIRE_FIXTURE := $(B)/tests/wire/fixture.o $(B)/tests/wire/stub.o
# libboxkite's own object, not the archive: the archive repeats common/ and gen/, which
# libbkcore.a already provides.
WIRE_LIBS    := $(call pic,$(CLIENT_SRC)) $(B)/libbkfront.a $(B)/libbkcore.a

$(B)/tests/wire/%.o: tests/wire/%.c
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -Iserver -c $< -o $@

$(WIRE_BIN): $(B)/tests/wire/%: $(B)/tests/wire/test_%.o $(WIRE_FIXTURE) $(B)/tests/cmocka_filter.o $(WIRE_LIBS)
	$(CC) -pie -o $@ $^ $(LDLIBS_FRONT) -lcmocka $(LDFLAGS)

# Every program runs even when one before it failed, so one bug does not hide another.
test-wire: $(WIRE_BIN)
	@tier_start=$$(date +%s.%N); failed=; for t in $(WIRE_BIN); do \
	  echo "  WIRE  $$t"; \
	  if ! $$t 2>$$t.log; then \
	    grep -v '^{"ts":' $$t.log >&2; \
	    echo "test-wire: $$t failed (server log: $$t.log)" >&2; failed="$$failed $$t"; \
	  fi; \
	done; \
	$(call tier_seconds,wire$(TIER_SUFFIX)); \
	if [ -n "$$failed" ]; then echo "test-wire: failed:$$failed" >&2; exit 1; fi
