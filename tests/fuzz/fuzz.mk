# fuzz tier: see tests/tests.mk. One libFuzzer target per untrusted input:
#   fuzz_envelope   a peer's message through the server pipeline (tests/fuzz/fuzz_envelope.c)
#
#   make test-fuzz              replay the corpus with the normal compiler and flags (ASan+UBSan
#                               under SAN=1), after checking its generated seeds are current
#   make fuzz [FUZZ_SECONDS=N]  build with clang + libFuzzer into $(B)/fuzz/ and fuzz a copy of
#                               the corpus; crashes land in $(B)/fuzz/artifacts/
#   make fuzz-corpus            rewrite the generated seeds (gen-*) from tests/fuzz/gen_corpus.c
#
# A crash found by `make fuzz` is minimised (fuzz_envelope -minimize_crash=1 -runs=10000 FILE)
# and committed to the corpus as crash-<what>, so that `make test-fuzz` replays it from then on.

FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang-14
FUZZ_CORPUS  := tests/fuzz/corpus/envelope
FUZZ_DICT    := tests/fuzz/envelope.dict

.PHONY: fuzz fuzz-corpus

# --- replay build (make test-fuzz) ---------------------------------------------------------------

$(B)/tests/fuzz/%.o: tests/fuzz/%.c
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -Iserver -Isidecar -c $< -o $@

$(B)/tests/fuzz/fuzz_envelope $(B)/tests/fuzz/gen_corpus: $(B)/tests/fuzz/%: $(B)/tests/fuzz/%.o $(B)/libbkfront.a \
		$(B)/libbkcore.a
	$(CC) -pie -o $@ $^ $(LDLIBS_FRONT) $(LDFLAGS)

# The server logs one JSON line per call: kept in a file, shown (with the rest) on failure.
test-fuzz: $(B)/tests/fuzz/fuzz_envelope $(B)/tests/fuzz/gen_corpus
	@tmp=$$(mktemp -d) && { $(B)/tests/fuzz/gen_corpus $$tmp || { rm -rf $$tmp; echo "test-fuzz: gen_corpus failed" >&2; exit 1; }; } && \
	  stale=$$(diff -r $$tmp $(FUZZ_CORPUS) | grep -v '^Only in $(FUZZ_CORPUS): crash-'); rm -rf $$tmp; \
	  if [ -n "$$stale" ]; then \
	    echo "test-fuzz: the gen-* seeds are not what gen_corpus writes; run make fuzz-corpus" >&2; \
	    echo "$$stale" | head -5 >&2; exit 1; \
	  fi
	@echo "  FUZZ  $(B)/tests/fuzz/fuzz_envelope $(FUZZ_CORPUS)"
	@if ! $(B)/tests/fuzz/fuzz_envelope $(FUZZ_CORPUS) 2>$(B)/tests/fuzz/fuzz_envelope.log; then \
	  grep -v '^{"ts":' $(B)/tests/fuzz/fuzz_envelope.log >&2; \
	  echo "test-fuzz: replay failed (log: $(B)/tests/fuzz/fuzz_envelope.log)" >&2; exit 1; \
	fi

fuzz-corpus: $(B)/tests/fuzz/gen_corpus
	rm -f $(FUZZ_CORPUS)/gen-*
	mkdir -p $(FUZZ_CORPUS)
	$< $(FUZZ_CORPUS)

# --- libFuzzer build (make fuzz) -----------------------------------------------------------------
# Everything the pipeline runs is compiled again by clang with coverage (fuzzer-no-link), so that
# libFuzzer sees the server's branches, not just the harness's.

FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := $(CPPFLAGS) -std=gnu11 -O1 -g $(FUZZ_SAN) -MMD -MP -fPIE
FUZZ_SRC    := $(COMMON_SRC) $(DAEMON_SRC) $(FRONT_SRC) $(GEN_V1) $(GEN_EXEC)
FUZZ_OBJ    := $(patsubst %.c,$(B)/fuzz/obj/%.o,$(FUZZ_SRC))

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

$(B)/fuzz/obj/tests/fuzz/fuzz_envelope.o: FUZZ_CFLAGS += -DBK_LIBFUZZER

$(B)/fuzz/fuzz_envelope: $(B)/fuzz/obj/tests/fuzz/fuzz_envelope.o $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(LDLIBS_FRONT)

fuzz: $(B)/fuzz/fuzz_envelope
	mkdir -p $(B)/fuzz/corpus $(B)/fuzz/artifacts
	cp $(FUZZ_CORPUS)/* $(B)/fuzz/corpus/
	$< -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -close_fd_mask=2 -print_final_stats=1 \
	  -dict=$(FUZZ_DICT) -artifact_prefix=$(B)/fuzz/artifacts/ $(B)/fuzz/corpus
