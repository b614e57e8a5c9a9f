# fuzz tier: see tests/tests.mk.

test-fuzz:
