# python tier: see tests/tests.mk.

test-python:
