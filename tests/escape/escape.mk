# escape probes (STYLE.md §13): bk-probe runs inside a sandbox as the sandboxed command and
# reports what one attack could do; tests/escape/bk-probe.c documents its output grammar.
#
# Static, because a sandbox shows only the host's /usr, /bin, /lib*, /etc and a probe must not
# depend on them; hence no -fPIE/-pie either. Sanitizers cannot link statically, so a SAN=1 build
# compiles these two without them.
#
# bk-seccomp-shim is a fixture of the self-test only: it runs a program under a small seccomp
# filter so that the probes whose only defence in a sandbox is seccomp show their DENIED path too.
# The self-test needs root; without it, it says SKIP (counted in make test's last line) and fails
# nothing.

ESCAPE_CFLAGS := $(filter-out -fsanitize=% -fno-sanitize-recover=%,$(CPPFLAGS) $(CFLAGS)) $(WARN)

.PHONY: test-escape-selftest

$(B)/bk-probe: tests/escape/bk-probe.c
	@mkdir -p $(@D)
	$(CC) $(ESCAPE_CFLAGS) -static -o $@ $<

$(B)/bk-seccomp-shim: tests/escape/seccomp-shim.c
	@mkdir -p $(@D)
	$(CC) $(ESCAPE_CFLAGS) -static -o $@ $< -lseccomp

# One test: with T, run only when its name holds T.
test-escape-selftest: $(B)/bk-probe $(B)/bk-seccomp-shim
	@tier_start=$$(date +%s.%N); \
	if $(call test_selected,escape-selftest); then tests/escape/selftest.sh $(B)/bk-probe $(B)/bk-seccomp-shim || exit 1; fi; \
	$(call tier_seconds,escape-selftest)
