# fuzz tier: see tests/tests.mk. One libFuzzer target per untrusted input:
#   fuzz_envelope   a peer's message through the server pipeline (tests/fuzz/fuzz_envelope.c)
#   fuzz_order      a front's packet through the order decoder of the executor and the file
#                   worker — the privilege boundary (tests/fuzz/fuzz_order.c)
#   fuzz_httpreq    a preview request's head and what follows it through the relay's framing
#                   (tests/fuzz/fuzz_httpreq.c; its corpus is hand-written seeds)
#   fuzz_httpparse  a sandboxed command's bytes through the egress proxy's readers: request
#                   heads, chunked bodies, ClientHellos, hosts and patterns (tests/fuzz/fuzz_httpparse.c);
#                   its corpus is hand-written seeds (seed-*) and the crashes found
#
#   make test-fuzz              replay every corpus with the normal compiler and flags (ASan+UBSan
#                               under SAN=1, through tests/fuzz/replay.c), after checking their
#                               generated seeds are current
#   make fuzz [FUZZ_TARGET=order] [FUZZ_SECONDS=N]
#                               build with clang + libFuzzer into $(B)/fuzz/ and fuzz a copy of
#                               the corpus (envelope by default); crashes land in
#                               $(B)/fuzz/artifacts/
#   make fuzz-corpus            rewrite the generated seeds (gen-*) from tests/fuzz/gen_corpus.c
#
# A crash found by `make fuzz` is minimised (fuzz_X -minimize_crash=1 -runs=10000 FILE) and
# committed to its corpus as crash-<what>, so that `make test-fuzz` replays it from then on.

FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang-14
FUZZ_TARGET  ?= envelope
FUZZ_CORPORA := tests/fuzz/corpus/envelope tests/fuzz/corpus/order
FUZZ_DICT_envelope := -dict=tests/fuzz/envelope.dict
FUZZ_DICT_order    :=
FUZZ_DICT_httpreq  :=
FUZZ_DICT_httpparse := -dict=tests/fuzz/httpparse.dict

.PHONY: fuzz fuzz-corpus

# --- replay build (make test-fuzz) ---------------------------------------------------------------

$(B)/tests/fuzz/%.o: tests/fuzz/%.c
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -Iserver -Isidecar -Iegress -c $< -o $@

$(B)/tests/fuzz/fuzz_envelope: $(B)/tests/fuzz/fuzz_envelope.o $(B)/tests/fuzz/replay.o $(B)/libbkfront.a \
		$(B)/libbkcore.a
	$(CC) -pie -o $@ $^ $(LDLIBS_FRONT) $(LDFLAGS)

$(B)/tests/fuzz/fuzz_order: $(B)/tests/fuzz/fuzz_order.o $(B)/tests/fuzz/replay.o $(B)/libbkexec.a $(B)/libbkcore.a
	$(CC) -pie -o $@ $^ $(LDLIBS_EXEC) $(LDFLAGS)

$(B)/tests/fuzz/fuzz_httpreq: $(B)/tests/fuzz/fuzz_httpreq.o $(B)/tests/fuzz/replay.o $(B)/libbkfront.a \
		$(B)/libbkcore.a
	$(CC) -pie -o $@ $^ $(LDLIBS_FRONT) $(LDFLAGS)

$(B)/tests/fuzz/fuzz_httpparse: $(B)/tests/fuzz/fuzz_httpparse.o $(B)/tests/fuzz/replay.o $(B)/libbkegress.a \
		$(B)/libbkcore.a
	$(CC) -pie -o $@ $^ $(LDLIBS_EGRESS) $(LDFLAGS)

$(B)/tests/fuzz/gen_corpus: $(B)/tests/fuzz/gen_corpus.o $(B)/libbkfront.a $(B)/libbkcore.a
	$(CC) -pie -o $@ $^ $(LDLIBS_FRONT) $(LDFLAGS)

# Each harness logs (the server one JSON line per call): kept in a file, shown on failure.
test-fuzz: $(B)/tests/fuzz/fuzz_envelope $(B)/tests/fuzz/fuzz_order $(B)/tests/fuzz/fuzz_httpreq \
		$(B)/tests/fuzz/fuzz_httpparse $(B)/tests/fuzz/gen_corpus
	@tier_start=$$(date +%s.%N); tmp=$$(mktemp -d) && mkdir $$tmp/envelope $$tmp/order && \
	  { $(B)/tests/fuzz/gen_corpus $$tmp/envelope $$tmp/order || { rm -rf $$tmp; echo "test-fuzz: gen_corpus failed" >&2; exit 1; }; } && \
	  stale=$$(for c in envelope order; do diff -r $$tmp/$$c tests/fuzz/corpus/$$c | grep -v "^Only in tests/fuzz/corpus/$$c: crash-"; done); \
	  rm -rf $$tmp; \
	  if [ -n "$$stale" ]; then \
	    echo "test-fuzz: the gen-* seeds are not what gen_corpus writes; run make fuzz-corpus" >&2; \
	    echo "$$stale" | head -5 >&2; exit 1; \
	  fi; \
	for t in envelope order httpreq httpparse; do \
	  $(call test_selected,fuzz_$$t) || continue; \
	  echo "  FUZZ  $(B)/tests/fuzz/fuzz_$$t tests/fuzz/corpus/$$t"; \
	  if ! $(B)/tests/fuzz/fuzz_$$t tests/fuzz/corpus/$$t 2>$(B)/tests/fuzz/fuzz_$$t.log; then \
	    grep -v '^{"ts":' $(B)/tests/fuzz/fuzz_$$t.log >&2; \
	    echo "test-fuzz: fuzz_$$t's replay failed (log: $(B)/tests/fuzz/fuzz_$$t.log)" >&2; exit 1; \
	  fi; \
	done; \
	$(call tier_seconds,fuzz$(TIER_SUFFIX))

fuzz-corpus: $(B)/tests/fuzz/gen_corpus
	rm -f $(addsuffix /gen-*,$(FUZZ_CORPORA))
	mkdir -p $(FUZZ_CORPORA)
	$< $(FUZZ_CORPORA)

# --- libFuzzer build (make fuzz) -----------------------------------------------------------------
# Everything the harness runs is compiled again by clang with coverage (fuzzer-no-link), so that
# libFuzzer sees the code's branches, not just the harness's.

FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := $(CPPFLAGS) -std=gnu11 -O1 -g $(FUZZ_SAN) -MMD -MP -fPIE
FUZZ_OBJ_envelope := $(patsubst %.c,$(B)/fuzz/obj/%.o,$(COMMON_SRC) $(DAEMON_SRC) $(FRONT_SRC) $(GEN_V1) $(GEN_EXEC))
FUZZ_OBJ_order    := $(patsubst %.c,$(B)/fuzz/obj/%.o,$(COMMON_SRC) $(DAEMON_SRC) $(EXEC_SRC) $(GEN_V1) $(GEN_EXEC) \
                     $(GEN_EGRESS))
FUZZ_OBJ_httpreq  := $(FUZZ_OBJ_envelope)
FUZZ_OBJ_httpparse := $(patsubst %.c,$(B)/fuzz/obj/%.o,egress/httpparse.c common/egresspolicy.c)
FUZZ_LIBS_envelope := $(LDLIBS_FRONT)
FUZZ_LIBS_httpreq  := $(LDLIBS_FRONT)
FUZZ_LIBS_order    := $(LDLIBS_EXEC)
FUZZ_LIBS_httpparse :=

$(B)/fuzz/obj/gen/%.o: gen/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(GEN_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

# The project's sources are held to -Werror by the compiler that builds them (make all); clang
# warns about more, so here its warnings are shown but do not stop fuzzing. The harness keeps
# -Werror.
$(B)/fuzz/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(WARN) -Wno-error -fsanitize=fuzzer-no-link -c $< -o $@

$(B)/fuzz/obj/tests/fuzz/%.o: tests/fuzz/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(WARN) -fsanitize=fuzzer-no-link -c $< -o $@

$(B)/fuzz/obj/server/%.o $(B)/fuzz/obj/tests/fuzz/%.o: FUZZ_CFLAGS += -Iserver
$(B)/fuzz/obj/sidecar/%.o $(B)/fuzz/obj/tests/fuzz/%.o: FUZZ_CFLAGS += -Isidecar
$(B)/fuzz/obj/egress/%.o $(B)/fuzz/obj/tests/fuzz/%.o: FUZZ_CFLAGS += -Iegress

.SECONDEXPANSION:
$(B)/fuzz/fuzz_%: $(B)/fuzz/obj/tests/fuzz/fuzz_%.o $$(FUZZ_OBJ_$$*)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LIBS_$*)

fuzz: $(B)/fuzz/fuzz_$(FUZZ_TARGET)
	mkdir -p $(B)/fuzz/corpus-$(FUZZ_TARGET) $(B)/fuzz/artifacts
	cp tests/fuzz/corpus/$(FUZZ_TARGET)/* $(B)/fuzz/corpus-$(FUZZ_TARGET)/
	$< -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -close_fd_mask=2 -print_final_stats=1 \
	  $(FUZZ_DICT_$(FUZZ_TARGET)) -artifact_prefix=$(B)/fuzz/artifacts/ $(B)/fuzz/corpus-$(FUZZ_TARGET)
