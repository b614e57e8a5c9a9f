# integration tier: see tests/tests.mk.

test-integration:
