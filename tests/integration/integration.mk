# integration tier: see tests/tests.mk. The real boxkited of $(B), as root: the privilege split,
# the escape probes (build/bk-probe run as the sandboxed command), exec behaviour, pod mode on an
# emulated pod, health. tests/integration/run.py runs every tests/integration/test_*.py; a test
# that cannot run here says SKIP and why. T=NAME runs only the tests whose names hold NAME.
#
# It needs root (namespaces, cgroups beneath its own, network namespaces of its own), util-linux
# (unshare, nsenter, setpriv), iproute2 and /usr/bin/python3 (run with the Python package
# installed: tests/python/python.mk). It never touches the machine's own
# interfaces or routes, dials nothing but loopback and addresses inside the namespaces it makes,
# and removes everything it starts, also when a test fails.

include tests/escape/escape.mk

# A fixture: nng_close() that hangs for ever, preloaded into boxkited and bkctl (test_hostile).
$(B)/nng-close-hang.so: tests/integration/nng_close_hang.c
	@mkdir -p $(@D)
	$(CC) $(filter-out -fsanitize=% -fno-sanitize-recover=%,$(CPPFLAGS) $(CFLAGS)) $(WARN) -Wno-missing-prototypes \
		-fPIC -shared -o $@ $<

test-integration: all $(B)/bk-probe $(B)/nng-close-hang.so test-escape-selftest
	BOXKITE_BUILD=$(CURDIR)/$(B) $(SDK_RUN)

# Once more against the SAN=1 build (make test-san): boxkited, boxkite-executor and its file
# worker under ASan+UBSan, a sanitizer's report in any daemon's log failing the tier
# (bkit.sanitizer_check). The probes are the same static programs: their self-test is not rerun.
test-integration-san: all $(B)/bk-probe $(B)/nng-close-hang.so
	BOXKITE_BUILD=$(CURDIR)/$(B) $(SDK_RUN) --tier integration-san
