# python tier: see tests/tests.mk. A second-language client (tests/python/boxkite_client.py)
# framing nng's SP protocol over TCP by hand, run against the real boxkited of $(B).

test-python: all
	cd tests/python && BOXKITE_BUILD=$(CURDIR)/$(B) $(PYTHON) -m unittest discover -v -s . -p 'test_*.py'
