# wire tier: see tests/tests.mk.

test-wire:
