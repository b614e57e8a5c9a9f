# boxkite — one non-recursive Makefile. `make help` lists the targets.
#
# Build variants: `make` builds into build/; `make SAN=1` builds the same tree with
# AddressSanitizer + UndefinedBehaviorSanitizer into build-san/ (make test runs both).

PREFIX     ?= /usr/local
DESTDIR    ?=
SAN        ?=
CC         ?= cc

ifeq ($(SAN),1)
B          := build-san
OPT        := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
else
B          := build
OPT        := -O2 -g
endif

# The soname's number is the ABI's, not the release's: docs/ABI.md says what changes it.
SONAME_MAJOR := 3
VERSION      := $(shell sed -n 's/.*BK_VERSION "\(.*\)"/\1/p' common/version.h)

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
            -Wno-missing-field-initializers
HARDEN   := -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fcf-protection
# One include path per directory: every file sees include/, common/ and gen/, and the headers of
# its own directory only (below) — so sidecar/ cannot include a header of server/, nor the
# reverse, and no two headers share a name (make layout-check).
CPPFLAGS += -D_GNU_SOURCE -Iinclude -Icommon -Igen
CFLAGS   += -std=gnu11 $(OPT) $(HARDEN) -MMD -MP
LDFLAGS  += -Wl,-z,relro,-z,now $(filter -fsanitize=%,$(OPT))
LDLIBS_CRYPTO := -lcrypto
LDLIBS_PB     := -lprotobuf-c
LDLIBS_FRONT  := -lnng -lprotobuf-c -lcrypto -lcap -lzstd -lcurl -lpthread
LDLIBS_EXEC   := -lprotobuf-c -lcrypto -lcap -lseccomp -lpthread
LDLIBS_SERVER := $(sort $(LDLIBS_FRONT) $(LDLIBS_EXEC))
LDLIBS_CLIENT := -lnng -lprotobuf-c -lcrypto -lzstd -lpthread
LDLIBS_EGRESS := -lprotobuf-c -lssl -lcrypto -lcap -lseccomp -lpthread

PROTO_V1   := proto/boxkite/v1/boxkite.proto
PROTO_EXEC := proto/boxkite/executor/order.proto
PROTO_STORE := proto/boxkite/store/snapshot.proto
PROTO_EGRESS := proto/boxkite/egress/egress.proto
GEN_V1     := gen/boxkite/v1/boxkite.pb-c.c
GEN_EXEC   := gen/boxkite/executor/order.pb-c.c
GEN_STORE  := gen/boxkite/store/snapshot.pb-c.c
GEN_EGRESS := gen/boxkite/egress/egress.pb-c.c
GEN_PY     := gen/python/boxkite/v1/boxkite_pb2.py

# common/ is shared by all three programs; channel and log by the two halves of boxkited only.
COMMON_SRC := common/error.c common/status.c common/keys.c common/envelope.c common/contenthash.c common/envpolicy.c \
              common/sbpath.c common/utf8.c common/fullio.c common/mkdir.c common/tls.c common/preview.c \
              common/egresspolicy.c
DAEMON_SRC := common/channel.c common/log.c
# The front (boxkited): server/ only.
FRONT_SRC  := server/config.c server/fileindex.c server/keystore.c server/replay.c server/replaylog.c \
              server/dispatch.c \
              server/front.c server/methods.c server/health.c server/server.c server/link.c \
              server/privdrop.c server/privsep.c server/command.c server/exec.c server/process.c server/files.c \
              server/workers.c server/metrics.c \
              server/http.c server/proxy.c server/reset.c server/sync.c server/sync_push.c server/sync_pull.c \
              server/hashset.c server/store.c server/store_file.c server/store_s3.c $(GEN_STORE)
# The executor (boxkite-executor), its own program image: sidecar/ only.
EXEC_SRC   := sidecar/executor.c sidecar/orders.c sidecar/child.c sidecar/spawn.c \
              sidecar/sandbox.c sidecar/filter.c sidecar/cgroup.c sidecar/fsops.c sidecar/fileworker.c sidecar/netns.c
# The egress proxy (boxkite-egress), its own program image: egress/ only (main.c is its entry).
EGRESS_SRC := egress/egress.c egress/conn.c egress/relay.c egress/httpparse.c egress/mitm.c egress/broker.c \
              egress/confine.c $(GEN_EGRESS)
CLIENT_SRC := client/client.c client/exec.c client/files.c client/process.c client/sync.c
BKCTL_SRC  := client/bkctl.c client/bkctl_exec.c client/bkctl_process.c client/bkctl_doctor.c client/bkctl_files.c client/bkctl_kube.c \
              client/bkctl_verify.c client/bkctl_sync.c client/bkctl_preview.c client/json.c client/quote.c

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))
pic = $(patsubst %.c,$(B)/pic/%.o,$(1))

CORE_OBJ   := $(call obj,$(COMMON_SRC) $(DAEMON_SRC) $(GEN_V1) $(GEN_EXEC))
FRONT_OBJ  := $(call obj,$(FRONT_SRC))
EXEC_OBJ   := $(call obj,$(EXEC_SRC))
EGRESS_OBJ := $(call obj,$(EGRESS_SRC))
CLIENT_PIC := $(call pic,$(COMMON_SRC) $(CLIENT_SRC) $(GEN_V1))

BINS := $(B)/boxkited $(B)/boxkite-executor $(B)/boxkite-egress $(B)/bkctl $(B)/boxkite-init
LIBS := $(B)/libboxkite.so.$(VERSION) $(B)/libboxkite.a

.PHONY: all help gen gen-check layout-check docs docs-check deps test test-unit test-integration test-python test-fuzz \
        test-san bench run run-stop install clean

all: $(BINS) $(LIBS)

help:
	@echo "make            build boxkited, bkctl, libboxkite into build/"
	@echo "make deps       install the Debian packages the build and tests need (as root)"
	@echo "make test       deps + build + every test tier, then again under ASan+UBSan"
	@echo "make gen        regenerate gen/ from proto/ (committed; CI checks it is current)"
	@echo "make docs       regenerate SECURITY.md's seccomp list and PROTOCOL.md's limits (CI checks they are current)"
	@echo "make bench      benchmarks: figures and ratios against baselines measured in the same run"
	@echo "make run        start a local boxkited with its own sandbox and drive it with bkctl"
	@echo "                (KEEP=1 leaves it running; make run-stop stops it)"
	@echo "make install    install binaries, library, headers, pkg-config file, man pages (PREFIX=$(PREFIX))"

# --- generated code ------------------------------------------------------------------------------

# protoc-c's and protoc's output for proto/ into directory $(1).
define gen_into
	rm -rf $(1)/boxkite $(1)/python
	mkdir -p $(1)/python
	protoc-c --c_out=$(1) -Iproto $(PROTO_V1) $(PROTO_EXEC) $(PROTO_STORE) $(PROTO_EGRESS)
	protoc --python_out=$(1)/python -Iproto $(PROTO_V1) $(PROTO_EXEC) $(PROTO_STORE) $(PROTO_EGRESS)
endef

gen:
	$(call gen_into,gen)

# CI's check that the committed gen/ is what `make gen` makes now.
gen-check:
	@rm -rf $(B)/gen-check && mkdir -p $(B)/gen-check
	@$(call gen_into,$(B)/gen-check) >/dev/null
	@if diff -r gen $(B)/gen-check >/dev/null; then echo "gen-check: gen/ is current"; \
	else echo "gen-check: gen/ differs from what 'make gen' produces; run make gen and commit" >&2; \
	     diff -r gen $(B)/gen-check | head -20 >&2; exit 1; fi

# --- objects -------------------------------------------------------------------------------------

GEN_CFLAGS := $(filter-out -Wmissing-prototypes,$(WARN))

$(B)/obj/gen/%.o: gen/%.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(GEN_CFLAGS) -fPIE -c $< -o $@

$(B)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -fPIE -c $< -o $@

$(B)/pic/gen/%.o: gen/%.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(GEN_CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

$(B)/pic/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -fPIC -fvisibility=hidden -c $< -o $@

# The exec path's children share the executor's memory on stacks of its own (clone with
# CLONE_VM): AddressSanitizer's stack bookkeeping assumes stacks it knows, and reports false
# positives there ("ignoring requested __asan_handle_no_return"). They keep UBSan.
comma := ,
$(B)/obj/sidecar/spawn.o $(B)/obj/sidecar/child.o: OPT := $(subst -fsanitize=address$(comma),-fsanitize=,$(OPT))

$(B)/obj/server/%.o: CPPFLAGS += -Iserver
$(B)/obj/sidecar/%.o: CPPFLAGS += -Isidecar
$(B)/obj/egress/%.o: CPPFLAGS += -Iegress
$(B)/obj/client/%.o $(B)/pic/client/%.o: CPPFLAGS += -Iclient

# Every header name once in the tree, and the halves of boxkited apart: sidecar/ includes
# nothing of server/ (the include paths above make that a compile error too).
layout-check:
	@dups=$$(find common server sidecar client include tests bench -name '*.h' -printf '%f\n' | sort | uniq -d); \
	if [ -n "$$dups" ]; then echo "layout-check: header names used twice: $$dups" >&2; exit 1; fi; \
	for h in $$(ls server/*.h | xargs -n1 basename); do \
	  if grep -n "#include \"$$h\"" sidecar/*.c sidecar/*.h sidecar/init/*.c >&2; then \
	    echo "layout-check: sidecar/ includes server/$$h" >&2; exit 1; fi; \
	done; echo "layout-check: every header name once; sidecar/ includes nothing of server/"

# --- server --------------------------------------------------------------------------------------

# Three archives: what both halves share, the front's, the executor's.
$(B)/libbkcore.a: $(CORE_OBJ)
$(B)/libbkfront.a: $(FRONT_OBJ)
$(B)/libbkexec.a: $(EXEC_OBJ)
$(B)/libbkegress.a: $(EGRESS_OBJ)
$(B)/libbkcore.a $(B)/libbkfront.a $(B)/libbkexec.a $(B)/libbkegress.a:
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(B)/boxkited: $(call obj,server/main.c) $(B)/libbkfront.a $(B)/libbkcore.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_FRONT)

# The executor: re-executed by boxkited (server/privsep.c), built from sidecar/ and common/.
$(B)/boxkite-executor: $(call obj,sidecar/main.c) $(B)/libbkexec.a $(B)/libbkcore.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_EXEC)

# The egress proxy: executed by boxkite-executor as a user of its own, built from egress/ and
# common/.
$(B)/boxkite-egress: $(call obj,egress/main.c) $(B)/libbkegress.a $(B)/libbkcore.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_EGRESS)

# The sandbox's init runs inside the sandbox's root: static, no sanitizer runtime, and none of
# the project's include paths (its <spawn.h> is libc's).
$(B)/boxkite-init: sidecar/init/boxkite-init.c sidecar/init/init_status.h
	@mkdir -p $(@D)
	$(CC) -D_GNU_SOURCE -std=gnu11 -O2 $(HARDEN) $(WARN) -static -o $@ $<

# Documents with parts printed from the code (scripts/doc-splice): SECURITY.md's list of the
# seccomp filter, from the filter's own tables; docs/PROTOCOL.md's limits, from the server's
# constants and method table.
$(B)/bk-filter-doc: $(call obj,sidecar/filter_doc.c sidecar/filter.c common/error.c common/status.c)
	$(CC) -pie $(LDFLAGS) -o $@ $^ -lseccomp

$(B)/bk-limits-doc: $(call obj,server/limits_doc.c) $(B)/libbkfront.a $(B)/libbkcore.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_FRONT)

DOC_PARTS := seccomp:$(B)/bk-filter-doc:SECURITY.md limits:$(B)/bk-limits-doc:docs/PROTOCOL.md

docs: $(B)/bk-filter-doc $(B)/bk-limits-doc
	@for p in $(DOC_PARTS); do \
	  name=$${p%%:*}; rest=$${p#*:}; gen=$${rest%%:*}; md=$${rest#*:}; \
	  scripts/doc-splice $$name $$gen $$md > $(B)/doc-part.md && mv $(B)/doc-part.md $$md && echo "docs: $$md ($$name)"; \
	done

docs-check: $(B)/bk-filter-doc $(B)/bk-limits-doc
	@for p in $(DOC_PARTS); do \
	  name=$${p%%:*}; rest=$${p#*:}; gen=$${rest%%:*}; md=$${rest#*:}; \
	  if scripts/doc-splice $$name $$gen $$md | cmp -s - $$md; then \
	    echo "docs-check: $$md's $$name part is what the code says"; \
	  else echo "docs-check: $$md's $$name part is not what the code says; run make docs and commit" >&2; \
	    scripts/doc-splice $$name $$gen $$md | diff $$md - | head -20 >&2; exit 1; fi; \
	done

# --- client library and bkctl --------------------------------------------------------------------

$(B)/libboxkite.so.$(VERSION): $(CLIENT_PIC)
	$(CC) -shared -Wl,-soname,libboxkite.so.$(SONAME_MAJOR) $(LDFLAGS) -o $@ $^ $(LDLIBS_CLIENT)
	ln -sf libboxkite.so.$(VERSION) $(B)/libboxkite.so.$(SONAME_MAJOR)
	ln -sf libboxkite.so.$(SONAME_MAJOR) $(B)/libboxkite.so

$(B)/libboxkite.a: $(CLIENT_PIC)
	rm -f $@ && ar rcs $@ $^

# bkctl kube renders deploy/sandbox/pod.yaml: compiled in as a C string, so that the pod bkctl
# makes is the one make test validates.
$(B)/gen-kube/sandbox_pod.c: deploy/sandbox/pod.yaml
	@mkdir -p $(@D)
	{ echo 'const char bkctl_sandbox_pod_yaml[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/\t"/' -e 's/$$/\\n"/' $<; echo ';'; } > $@

$(B)/obj/gen-kube/sandbox_pod.o: $(B)/gen-kube/sandbox_pod.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIE -c $< -o $@

$(B)/bkctl: $(call obj,$(BKCTL_SRC)) $(B)/obj/gen-kube/sandbox_pod.o $(B)/libboxkite.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_CLIENT)

# --- install -------------------------------------------------------------------------------------

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/include/boxkite $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0755 $(B)/bkctl $(DESTDIR)$(PREFIX)/bin/bkctl
	install -m 0755 $(B)/boxkited $(DESTDIR)$(PREFIX)/sbin/boxkited
	install -d $(DESTDIR)$(PREFIX)/libexec/boxkite
	install -m 0755 $(B)/boxkite-init $(DESTDIR)$(PREFIX)/libexec/boxkite/boxkite-init
	install -m 0755 $(B)/boxkite-executor $(DESTDIR)$(PREFIX)/libexec/boxkite/boxkite-executor
	install -m 0755 $(B)/boxkite-egress $(DESTDIR)$(PREFIX)/libexec/boxkite/boxkite-egress
	install -m 0644 $(B)/libboxkite.so.$(VERSION) $(B)/libboxkite.a $(DESTDIR)$(PREFIX)/lib/
	ln -sf libboxkite.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libboxkite.so.$(SONAME_MAJOR)
	ln -sf libboxkite.so.$(SONAME_MAJOR) $(DESTDIR)$(PREFIX)/lib/libboxkite.so
	@# Written here, not at build time: it must name the PREFIX it is installed under.
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' client/boxkite.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/boxkite.pc
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/pkgconfig/boxkite.pc
	install -m 0644 include/boxkite/*.h $(DESTDIR)$(PREFIX)/include/boxkite/
	install -m 0644 man/bkctl.1 $(DESTDIR)$(PREFIX)/share/man/man1/bkctl.1
	install -m 0644 man/boxkited.8 $(DESTDIR)$(PREFIX)/share/man/man8/boxkited.8

deps:
	@scripts/install-deps

run: deps
	$(MAKE) -s all
	B=$(B) scripts/run-demo

run-stop:
	B=$(B) scripts/run-demo stop

clean:
	rm -rf build build-san

include tests/tests.mk
include bench/bench.mk

-include $(shell find $(B) -name '*.d' 2>/dev/null)
