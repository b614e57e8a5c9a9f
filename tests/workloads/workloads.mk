# workloads tier: see tests/tests.mk. What coding agents run, through the real exec path of a
# local-mode boxkited of $(B) (as root), under the sandbox's whole isolation and seccomp filter:
# a Python venv with pip installing a wheel built here, multiprocessing, gcc and make -j, git,
# node with worker threads, sqlite3, tar and gzip, ps, a process handling its own signals. A
# sandbox that breaks ordinary tools is not usable: each must work. A tool this machine lacks is
# a SKIP naming it (make test-deps installs them all). T=NAME for one.

test-workloads: all
	cd tests/workloads && BOXKITE_BUILD=$(CURDIR)/$(B) $(TEST_RUN) --tier workloads --dir .
