# files tier (issue: Files): see tests/tests.mk.

test-files:
