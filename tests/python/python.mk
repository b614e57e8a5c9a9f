# python tier: see tests/tests.mk. The Python package (sdk/python) against the real boxkited of
# $(B) (as root: it makes a sandbox; a test that cannot run here says SKIP and why): the client,
# its examples, the wire contract from a second language, and the package itself (it builds and
# installs offline, its type hints check). tests/integration/run.py runs it: see tests/tests.mk.
#
# The package is built into a wheel and installed into a venv of this build ($(PY_SDK_DIR)), as a
# user installs it: the tiers that drive boxkited from Python (python, files, integration) run
# with that venv's interpreter, so they import the installed package, never sdk/python's sources.
# The venv sees Debian's python3-protobuf (--system-site-packages); nothing is fetched
# (--no-index). The wheel is built from a copy, since setuptools writes build/ and *.egg-info
# beside the sources it builds.

PY_SDK_DIR := $(B)/python-sdk
PY_SDK     := $(CURDIR)/$(PY_SDK_DIR)/venv/bin/python3
SDK_RUN    := $(PY_SDK) $(CURDIR)/tests/integration/run.py $(if $(T),-k '$(T)')
PY_SDK_SRC := $(shell find sdk/python -type f -not -path '*/__pycache__/*' -not -path 'sdk/python/build/*' \
                -not -path 'sdk/python/dist/*' -not -path '*.egg-info/*')
PIP        := -m pip -q --no-cache-dir --disable-pip-version-check

$(PY_SDK_DIR)/installed: $(PY_SDK_SRC)
	rm -rf $(PY_SDK_DIR) && mkdir -p $(PY_SDK_DIR)
	cp -r sdk/python $(PY_SDK_DIR)/src
	rm -rf $(PY_SDK_DIR)/src/build $(PY_SDK_DIR)/src/dist $(PY_SDK_DIR)/src/src/*.egg-info
	cd $(PY_SDK_DIR)/src && $(PYTHON) $(PIP) wheel --no-build-isolation --no-deps --no-index -w ../dist .
	$(PYTHON) -m venv --system-site-packages --without-pip $(PY_SDK_DIR)/venv
	PIP_ROOT_USER_ACTION=ignore $(PY_SDK) $(PIP) install --no-index $(PY_SDK_DIR)/dist/boxkite-*.whl
	touch $@

test-integration test-integration-san test-files test-files-bkctl: $(PY_SDK_DIR)/installed

test-python: all $(PY_SDK_DIR)/installed
	cd tests/python && BOXKITE_BUILD=$(CURDIR)/$(B) $(SDK_RUN) --tier python --dir .
