# python tier: see tests/tests.mk. A second-language client (tests/python/boxkite_client.py)
# framing nng's SP protocol over TCP by hand, run against the real boxkited of $(B) (as root: it
# makes a sandbox; a test that cannot run here says SKIP and why). tests/integration/run.py runs
# it: see tests/tests.mk.

test-python: all
	cd tests/python && BOXKITE_BUILD=$(CURDIR)/$(B) $(TEST_RUN) --tier python --dir .
