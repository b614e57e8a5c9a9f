# files tier: see tests/tests.mk. The real boxkited of $(B), as root, one per test class (local
# mode, a temp workspace, a free 127.0.0.1 port), driven through the Python package (sdk/python,
# installed as tests/python/python.mk says): traversal and escape attempts, permissions,
# integrity (a 1 GiB round trip, bad hashes, zstd, a client killed mid-upload, expiry), a full
# disk (a 16 MiB tmpfs it mounts), and the file operations; each result checked on the host side
# of the workspace as well.
#
# It needs root, util-linux's mount, /usr/bin/python3 with python3-protobuf and libzstd.so.1; a
# test that cannot run here says SKIP and why (tests/integration/run.py runs it: see
# tests/tests.mk). It removes everything it starts or mounts, also when a test fails.
#   FILES_BIG_MIB=64      makes the 1 GiB round trip a 64 MiB one (a quicker run while working)

test-files: all
	cd tests/files && BOXKITE_BUILD=$(CURDIR)/$(B) $(SDK_RUN) --tier files --dir .

# Under SAN=1 (make test-san): this build's bkctl, and so libboxkite's threaded transfers, against
# the plain build's daemon (the sandbox's privilege split is not run under ASan).
test-files-bkctl: all
	$(MAKE) SAN= all
	cd tests/files && BOXKITE_BUILD=$(CURDIR)/build BOXKITE_BKCTL=$(CURDIR)/$(B)/bkctl \
		$(SDK_RUN) --tier files-bkctl --dir . test_8_bkctl
