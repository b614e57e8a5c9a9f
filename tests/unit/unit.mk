# unit tier: see tests/tests.mk.

test-unit:
