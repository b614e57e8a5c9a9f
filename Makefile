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
SONAME_MAJOR := 5
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
# The Python package's messages (sdk/python): proto/'s public protos, generated into its source.
PY_GEN     := sdk/python/src

# common/ is shared by all three programs; channel and log by the two halves of boxkited only.
COMMON_SRC := common/error.c common/status.c common/keys.c common/envelope.c common/contenthash.c common/envpolicy.c \
              common/sbpath.c common/secretfile.c common/nngclose.c common/utf8.c common/fullio.c common/mkdir.c common/tls.c common/preview.c \
              common/egresspolicy.c
DAEMON_SRC := common/channel.c common/log.c
# The front (boxkited): server/ only.
# Its rooms (docs/ARCHITECTURE.md, "Module map and layer rule"); main.c is the composition root.
FRONT_SRC  := server/config.c \
              $(addprefix server/boundary/,privsep.c privdrop.c link.c command.c) \
              $(addprefix server/transport/,nng.c door.c http.c proxy.c httpreq.c metrics.c) \
              $(addprefix server/rpc/,call.c pipeline.c methods.c server.c workers.c) \
              $(addprefix server/auth/,keystore.c replay.c replaylog.c) \
              $(addprefix server/runs/,ring.c marks.c runs.c exec.c process.c) \
              $(addprefix server/files/,files.c fileindex.c watch.c) \
              $(addprefix server/sync/,sync.c push.c pull.c walk.c hashset.c store.c store_file.c store_s3.c) $(GEN_STORE) \
              $(addprefix server/session/,health.c reset.c)
# The executor (boxkite-executor), its own program image: sidecar/ only.
EXEC_SRC   := sidecar/executor.c sidecar/orders.c \
              $(addprefix sidecar/exec/,child.c spawn.c sandbox.c filter.c cgroup.c netns.c userns.c proxyctl.c \
                meminfo.c) \
              $(addprefix sidecar/files/,fsops.c fileworker.c watcher.c)
# The egress proxy (boxkite-egress), its own program image: egress/ only (main.c is its entry).
EGRESS_SRC := egress/egress.c egress/state.c egress/conn.c egress/relay.c egress/httpparse.c egress/mitm.c egress/broker.c \
              egress/confine.c
CLIENT_SRC := $(addprefix client/lib/,client.c exec.c files.c process.c sync.c)
BKCTL_SRC  := $(addprefix client/cli/,main.c options.c completion.c report.c exec.c process.c logs.c doctor.c files.c kube.c verify.c sync.c \
              preview.c json.c quote.c watch.c)

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))
pic = $(patsubst %.c,$(B)/pic/%.o,$(1))

CORE_OBJ   := $(call obj,$(COMMON_SRC) $(DAEMON_SRC) $(GEN_V1) $(GEN_EXEC) $(GEN_EGRESS))
FRONT_OBJ  := $(call obj,$(FRONT_SRC))
EXEC_OBJ   := $(call obj,$(EXEC_SRC))
EGRESS_OBJ := $(call obj,$(EGRESS_SRC))
CLIENT_PIC := $(call pic,$(COMMON_SRC) $(CLIENT_SRC) $(GEN_V1))

BINS := $(B)/boxkited $(B)/boxkite-executor $(B)/boxkite-egress $(B)/bkctl $(B)/boxkite-init
LIBS := $(B)/libboxkite.so.$(VERSION) $(B)/libboxkite.a

.PHONY: all help gen gen-check layout-check docs docs-check deps test-deps test test-unit test-integration test-python test-fuzz \
        test-san bench run run-stop install uninstall clean

all: $(BINS) $(LIBS)

help:
	@echo "make            build boxkited, bkctl, libboxkite into build/"
	@echo "make deps       install the Debian packages the build and make run need (as root)"
	@echo "make test-deps  those and what the tests need besides, npm packages included (make test runs it)"
	@echo "make test       deps + build + every test tier, then again under ASan+UBSan; ends with each tier's time"
	@echo "make test-TIER  one tier (unit wire fuzz integration workloads files python k8s install ...);"
	@echo "                T=NAME runs only the tests whose names hold NAME, TEST_TIMEOUT=S a Python test's limit"
	@echo "make gen        regenerate gen/ from proto/ (committed; CI checks it is current)"
	@echo "make docs       regenerate SECURITY.md's seccomp list and PROTOCOL.md's limits (CI checks they are current)"
	@echo "make bench      benchmarks: figures and ratios against baselines measured in the same run"
	@echo "make run        start a local boxkited with its own sandbox and drive it with bkctl"
	@echo "                (KEEP=1 leaves it running; make run-stop stops it)"
	@echo "make install    install binaries, library, headers, pkg-config files, man pages, shell completions"
	@echo "                (PREFIX=$(PREFIX), DESTDIR=); make uninstall removes them"

# --- generated code ------------------------------------------------------------------------------

# protoc-c's output for proto/ into directory $(1); protoc's Python (messages and type stubs)
# into $(2), the Python package's source: the public protos only, and the executor's order
# (an integration test's, not the package's) into $(1)/python as a module of its own.
define gen_into
	rm -rf $(1)/boxkite $(1)/python $(2)/boxkite/v1 $(2)/boxkite/store
	mkdir -p $(1)/python $(2)
	protoc-c --c_out=$(1) -Iproto $(PROTO_V1) $(PROTO_EXEC) $(PROTO_STORE) $(PROTO_EGRESS)
	protoc --python_out=$(2) --pyi_out=$(2) -Iproto $(PROTO_V1) $(PROTO_STORE)
	protoc --python_out=$(1)/python -Iproto/boxkite/executor $(PROTO_EXEC)
endef

gen:
	$(call gen_into,gen,$(PY_GEN))

# CI's check that the committed gen/ and the Python package's messages are what `make gen`
# makes now.
gen-check:
	@rm -rf $(B)/gen-check && mkdir -p $(B)/gen-check/c $(B)/gen-check/py/boxkite
	@$(call gen_into,$(B)/gen-check/c,$(B)/gen-check/py) >/dev/null
	@for d in gen:c $(PY_GEN)/boxkite/v1:py/boxkite/v1 $(PY_GEN)/boxkite/store:py/boxkite/store; do \
	  if ! diff -r $${d%%:*} $(B)/gen-check/$${d#*:} >/dev/null; then \
	    echo "gen-check: $${d%%:*} differs from what 'make gen' produces; run make gen and commit" >&2; \
	    diff -r $${d%%:*} $(B)/gen-check/$${d#*:} | head -20 >&2; exit 1; fi; \
	done; echo "gen-check: gen/ and $(PY_GEN)'s messages are current"

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
$(B)/obj/sidecar/exec/spawn.o $(B)/obj/sidecar/exec/child.o: OPT := $(subst -fsanitize=address$(comma),-fsanitize=,$(OPT))

$(B)/obj/server/%.o $(B)/obj/tools/limits_doc.o: CPPFLAGS += -Iserver
# The bounds table names the front's and the executor's constants both.
$(B)/obj/tools/bounds_doc.o: CPPFLAGS += -Iserver -Isidecar -Iegress
$(B)/obj/sidecar/%.o $(B)/obj/tools/filter_doc.o: CPPFLAGS += -Isidecar
$(B)/obj/egress/%.o $(B)/obj/tools/egress_filter_doc.o: CPPFLAGS += -Iegress
# The client's two programs see their own folder only: the CLI cannot include the library's
# private call.h (it uses the public header, like any program linked with libboxkite).
$(B)/pic/client/lib/%.o: CPPFLAGS += -Iclient/lib
$(B)/obj/client/cli/%.o: CPPFLAGS += -Iclient/cli

# The layout (docs/ARCHITECTURE.md, "Module map and layer rule"), checked:
# - every header name once in the tree, and sidecar/ includes nothing of server/ (the include
#   paths above make that a compile error too);
# - no link cycle: within each of the front, the executor, the egress proxy, the library, the CLI
#   and common/, no two object files need each other, directly or through others
#   (scripts/link-cycles);
# - bkctl takes from the library only what libboxkite.so exports.
LINK_GROUPS := front $(FRONT_OBJ) $(call obj,server/main.c) -- executor $(EXEC_OBJ) $(call obj,sidecar/main.c) \
	-- egress $(EGRESS_OBJ) $(call obj,egress/main.c) \
	-- libboxkite $(call pic,$(CLIENT_SRC)) -- bkctl $(BKCTL_OBJ) -- common $(call obj,$(COMMON_SRC) $(DAEMON_SRC))
layout-check: $(FRONT_OBJ) $(EXEC_OBJ) $(EGRESS_OBJ) $(call obj,server/main.c sidecar/main.c egress/main.c $(COMMON_SRC) $(DAEMON_SRC)) \
		$(BKCTL_OBJ) $(B)/libboxkite.so.$(VERSION)
	@dups=$$(find common server sidecar egress client include tests bench tools -name '*.h' -printf '%f\n' | sort | uniq -d); \
	if [ -n "$$dups" ]; then echo "layout-check: header names used twice: $$dups" >&2; exit 1; fi; \
	for h in $$(find server -name '*.h' -printf '%f\n'); do \
	  if grep -rn -E "#include \"([a-z]+/)*$$h\"" sidecar >&2; then \
	    echo "layout-check: sidecar/ includes server/'s $$h" >&2; exit 1; fi; \
	done; echo "layout-check: every header name once; sidecar/ includes nothing of server/"
	@scripts/link-cycles $(LINK_GROUPS)
	@nm -u $(BKCTL_OBJ) | awk '{print $$NF}' | sort -u > $(B)/cli-uses.txt; \
	nm --defined-only -g $(call pic,$(CLIENT_SRC)) | awk 'NF == 3 {print $$3}' | sort -u > $(B)/lib-defines.txt; \
	nm -D --defined-only $(B)/libboxkite.so.$(VERSION) | awk '{print $$3}' | sort -u > $(B)/lib-exports.txt; \
	private=$$(comm -12 $(B)/cli-uses.txt $(B)/lib-defines.txt | comm -23 - $(B)/lib-exports.txt); \
	if [ -n "$$private" ]; then echo "layout-check: bkctl uses libboxkite symbols it does not export:" $$private >&2; exit 1; fi; \
	echo "layout-check: bkctl uses only what libboxkite.so exports"

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

# The executor: re-executed by boxkited (server/boundary/privsep.c), built from sidecar/ and common/.
$(B)/boxkite-executor: $(call obj,sidecar/main.c) $(B)/libbkexec.a $(B)/libbkcore.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_EXEC)

# The egress proxy: executed by boxkite-executor as a user of its own, built from egress/ and
# common/.
$(B)/boxkite-egress: $(call obj,egress/main.c) $(B)/libbkegress.a $(B)/libbkcore.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_EGRESS)

# The sandbox's init runs inside the sandbox's root: static, no sanitizer runtime, and none of
# the project's include paths (its <spawn.h> is libc's). Against musl (musl-tools): glibc's static
# start-up probes the CPU with dozens of cpuid instructions, each a hypervisor trap on a VM — 0.6 ms
# of every exec on the development VM, against 0.07 ms for the whole of musl's (docs/BENCHMARKS.md).
MUSL_CC ?= musl-gcc
$(B)/boxkite-init: sidecar/exec/init/boxkite-init.c sidecar/exec/init/init_status.h
	@mkdir -p $(@D)
	@command -v $(MUSL_CC) >/dev/null || { echo "boxkite-init needs $(MUSL_CC) (Debian: musl-tools; make deps)" >&2; exit 1; }
	$(MUSL_CC) -D_GNU_SOURCE -std=gnu11 -O2 $(HARDEN) $(WARN) -static -o $@ $<

# Documents with parts printed from the code (scripts/doc-splice): SECURITY.md's lists of the
# seccomp filters, the sandbox's and the egress proxy's, from their own tables, and its table of
# what any party can make boxkited hold, from the bounds' constants and the configuration's
# defaults; docs/PROTOCOL.md's limits, from the server's constants and method table.
$(B)/bk-filter-doc: $(call obj,tools/filter_doc.c sidecar/exec/filter.c common/error.c common/status.c)
	$(CC) -pie $(LDFLAGS) -o $@ $^ -lseccomp

$(B)/bk-egress-filter-doc: $(call obj,tools/egress_filter_doc.c egress/confine.c common/error.c common/status.c)
	$(CC) -pie $(LDFLAGS) -o $@ $^ -lseccomp -lcap

$(B)/bk-limits-doc: $(call obj,tools/limits_doc.c) $(B)/libbkfront.a $(B)/libbkcore.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_FRONT)

$(B)/bk-bounds-doc: $(call obj,tools/bounds_doc.c) $(B)/libbkfront.a $(B)/libbkcore.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_FRONT)

DOC_PARTS := seccomp:$(B)/bk-filter-doc:SECURITY.md egress-seccomp:$(B)/bk-egress-filter-doc:SECURITY.md \
	     limits:$(B)/bk-limits-doc:docs/PROTOCOL.md bounds:$(B)/bk-bounds-doc:SECURITY.md
DOC_TOOLS := $(B)/bk-filter-doc $(B)/bk-egress-filter-doc $(B)/bk-limits-doc $(B)/bk-bounds-doc

docs: $(DOC_TOOLS)
	@for p in $(DOC_PARTS); do \
	  name=$${p%%:*}; rest=$${p#*:}; gen=$${rest%%:*}; md=$${rest#*:}; \
	  scripts/doc-splice $$name $$gen $$md > $(B)/doc-part.md && mv $(B)/doc-part.md $$md && echo "docs: $$md ($$name)"; \
	done

docs-check: $(DOC_TOOLS)
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

# bkctl is a program like any other linked with libboxkite: the public header, the exported
# functions (make layout-check), and common/'s code as its own (libbkcore.a, before the library).
BKCTL_OBJ := $(call obj,$(BKCTL_SRC))
$(B)/bkctl: $(BKCTL_OBJ) $(B)/obj/gen-kube/sandbox_pod.o $(B)/libbkcore.a $(B)/libboxkite.a
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_CLIENT)

# --- install -------------------------------------------------------------------------------------

# What make install puts under $(DESTDIR)$(PREFIX), and make uninstall removes: these files, then
# the directories that are boxkite's own. The shell completions are bkctl's (bkctl completion),
# generated from the table its --help is printed from.
INST_LIB     := $(PREFIX)/lib
INST_FILES   := $(PREFIX)/bin/bkctl $(PREFIX)/sbin/boxkited \
                $(PREFIX)/libexec/boxkite/boxkite-init $(PREFIX)/libexec/boxkite/boxkite-executor \
                $(PREFIX)/libexec/boxkite/boxkite-egress \
                $(addprefix $(INST_LIB)/,libboxkite.so.$(VERSION) libboxkite.so.$(SONAME_MAJOR) libboxkite.so \
                  libboxkite.a pkgconfig/boxkite.pc pkgconfig/boxkite-static.pc) \
                $(addprefix $(PREFIX)/include/boxkite/,$(notdir $(wildcard include/boxkite/*.h))) \
                $(PREFIX)/share/man/man1/bkctl.1 $(PREFIX)/share/man/man8/boxkited.8 \
                $(PREFIX)/share/bash-completion/completions/bkctl $(PREFIX)/share/zsh/site-functions/_bkctl
INST_OWN_DIRS := $(PREFIX)/libexec/boxkite $(PREFIX)/include/boxkite

# Installed into the real root (no DESTDIR, as a package's staging would have): where the dynamic
# linker searches $(INST_LIB), its cache learns the new library (or forgets it) now, so that a
# program linked with pkg-config's flags starts; where it does not, install says what to do.
define ldconfig
	@if [ -z "$(DESTDIR)" ] && command -v ldconfig >/dev/null; then \
	  if ldconfig -v -N 2>/dev/null | grep -q "^$(INST_LIB):"; then \
	    echo ldconfig; ldconfig; \
	  elif [ "$(1)" = install ]; then \
	    echo "install: the dynamic linker does not search $(INST_LIB): add it to a file in /etc/ld.so.conf.d/" \
	      "and run ldconfig, or link with -Wl,-rpath,$(INST_LIB)"; \
	  fi; \
	fi
endef

install: all
	install -d $(addprefix $(DESTDIR),$(sort $(dir $(INST_FILES))))
	install -m 0755 $(B)/bkctl $(DESTDIR)$(PREFIX)/bin/bkctl
	install -m 0755 $(B)/boxkited $(DESTDIR)$(PREFIX)/sbin/boxkited
	install -m 0755 $(B)/boxkite-init $(DESTDIR)$(PREFIX)/libexec/boxkite/boxkite-init
	install -m 0755 $(B)/boxkite-executor $(DESTDIR)$(PREFIX)/libexec/boxkite/boxkite-executor
	install -m 0755 $(B)/boxkite-egress $(DESTDIR)$(PREFIX)/libexec/boxkite/boxkite-egress
	install -m 0644 $(B)/libboxkite.so.$(VERSION) $(B)/libboxkite.a $(DESTDIR)$(INST_LIB)/
	ln -sf libboxkite.so.$(VERSION) $(DESTDIR)$(INST_LIB)/libboxkite.so.$(SONAME_MAJOR)
	ln -sf libboxkite.so.$(SONAME_MAJOR) $(DESTDIR)$(INST_LIB)/libboxkite.so
	@# Written here, not at build time: they must name the PREFIX they are installed under.
	for pc in boxkite boxkite-static; do \
	  sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' client/lib/$$pc.pc.in \
	    > $(DESTDIR)$(INST_LIB)/pkgconfig/$$pc.pc && chmod 0644 $(DESTDIR)$(INST_LIB)/pkgconfig/$$pc.pc; \
	done
	install -m 0644 include/boxkite/*.h $(DESTDIR)$(PREFIX)/include/boxkite/
	install -m 0644 man/bkctl.1 $(DESTDIR)$(PREFIX)/share/man/man1/bkctl.1
	install -m 0644 man/boxkited.8 $(DESTDIR)$(PREFIX)/share/man/man8/boxkited.8
	$(B)/bkctl completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/bkctl
	$(B)/bkctl completion zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_bkctl
	chmod 0644 $(DESTDIR)$(PREFIX)/share/bash-completion/completions/bkctl $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_bkctl
	$(call ldconfig,install)

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INST_FILES))
	for d in $(addprefix $(DESTDIR),$(INST_OWN_DIRS)); do [ ! -d $$d ] || rmdir --ignore-fail-on-non-empty $$d; done
	$(call ldconfig,uninstall)

# make deps: what the build, make run and README's walkthrough need; make test-deps (make test
# runs it) all the test tiers' besides, npm packages included.
deps:
	@scripts/install-deps build

test-deps:
	@scripts/install-deps test

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
