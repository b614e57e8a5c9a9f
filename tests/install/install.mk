# install tier: see tests/tests.mk. What a new user does with a checkout, run for real:
#   test_1_pkgconfig   make install into a temporary PREFIX, then a small program
#                      (tests/install/libprobe.c) built against it with nothing but pkg-config,
#                      linked shared, static, and with libboxkite.a alone static, and run; the
#                      library exports only bk_ symbols; the shell completions are bkctl's. Then
#                      make install into a scratch root's /usr/local: the program starts with no
#                      rpath (ldconfig ran), and make uninstall removes exactly what install put.
#   test_2_walkthrough the commands of README.md's walkthrough, extracted from it (so the two
#                      cannot drift), run as written by bash in a scratch root (a mount, PID and
#                      network namespace of its own, pivoted into a tmpfs that shows the host's
#                      /usr and /etc through overlays): their output is checked against what
#                      README.md shows, from make install through processes and a preview to
#                      stopping the daemon, and nothing lands on the machine itself.
#   test_3_make_run    make run's script leaves nothing behind; KEEP=1 through a pipe ends;
#                      make run-stop stops the daemon it kept and removes its directory; README's
#                      set-up (make deps, make run) as written in a scratch root.
#   test_4_completion  bkctl completion bash and zsh, run by the real shells: what each command's
#                      --help lists is what completes, and what completes is what bkctl takes.
#   test_5_deps        make deps installs what the build links and nothing of the tests'; make
#                      test-deps the rest (stand-ins for dpkg-query, apt-get and npm record it).
# It needs root, util-linux (unshare, pivot_root), bash, zsh, pkg-config and /usr/bin/python3; a test
# that cannot run here says SKIP and why. tests/integration/run.py runs it.

test-install: all
	cd tests/install && BOXKITE_BUILD=$(CURDIR)/$(B) $(TEST_RUN) --tier install --dir .
