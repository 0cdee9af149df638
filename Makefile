# ddprun developer entry points. On a fresh Debian 12 machine: `make demo`, then `make check`.
# CMake does the real build; this file only strings the steps together.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build
MAKEFLAGS += --no-print-directory

NPROC := $(shell nproc 2>/dev/null || echo 2)
BUILD_DIR ?= build
SANITIZE_DIR ?= build-sanitize
TSAN_DIR ?= build-tsan
FUZZ_DIR ?= build-fuzz
# Seconds of fuzzing per libFuzzer target (make fuzz), FUZZ_JOBS targets at a time.
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 2
# make chaos: network-fault schedules (tests/chaos/, docs/reliability.md "Network faults"), the
# seed's schedules FIRST..FIRST+SCHEDULES-1 and every regression schedule; CHAOS_OUT keeps the
# histories; WITHOUT=kind,... draws the schedules without those kinds (a schedule found before a
# kind existed replays so).
SEED ?= 1
SCHEDULES ?= 10
FIRST ?= 0
WITHOUT ?=
CHAOS_FLAGS ?= --regressions tests/chaos/regressions.txt
BUILD_TYPE ?= RelWithDebInfo
# -O0 compiles about twice as fast as -O2 under ASan, which matters on 2 cores; ASan/UBSan
# find the same bugs.
SANITIZE_BUILD_TYPE ?= Debug
TSAN_BUILD_TYPE ?= Debug
# The sanitizer trees (check-sanitize, check-tsan) are built only to be tested: unity builds
# (several .cc per compiler run: a third less compiler CPU), without the load generators only
# bench/*.py runs (docs/reliability.md, "ThreadSanitizer"), and with line tables only (-g1:
# reports still name file and line; a fifth less compiler CPU than -g on a test file).
SANITIZER_CMAKE_FLAGS ?= -DCMAKE_UNITY_BUILD=ON -DDDPRUN_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_DEBUG=-g1
# gcc 12's ThreadSanitizer runtime fits the address layout of vm.mmap_rnd_bits <= 28 (Debian
# 12's default, fine) and dies with "unexpected memory mapping" where the kernel randomizes more
# (32 on some distributions): `auto` then runs the TSan tests under `setarch -R` (no address
# randomization for ctest and its children; no root, no sysctl). 1: always, 0: never.
TSAN_SETARCH ?= auto
# Debian's interpreter: the one with python3-torch (the first python3 on PATH may be another).
PYTHON ?= /usr/bin/python3
# $(BUILD_DIR)/ is the tree `make package` packages, and the one `make check` tests: built with
# Debian's hardened flags (dpkg-buildflags) and the RPM -debuginfo's debug paths
# (cmake/PackageBuild.cmake) wherever dpkg-buildflags exists, so the tested programs are the
# packaged ones and CI builds them once.
PACKAGE_BUILD ?= $(if $(shell command -v dpkg-buildflags),ON,OFF)
CTEST_JOBS ?= $(NPROC)
# Per-test limit for tests that set none themselves (most set their own TIMEOUT).
CTEST_TIMEOUT ?= 600
CTEST_FLAGS ?= --output-on-failure -j$(CTEST_JOBS) --timeout $(CTEST_TIMEOUT)
# make wheel: the architectures, where the wheels go, and the cache of the built dependencies and
# of each arch's CMake tree (one per checkout: a tree remembers its source folder).
WHEEL_ARCHS ?= x86_64 aarch64
WHEEL_DIR ?= dist
WHEEL_DEPS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ddprun/wheel
WHEEL_TREE_KEY := $(shell echo "$(CURDIR)" | sha256sum | cut -c1-12)

.PHONY: all deps configure build demo torch2-venv check check-sanitize check-tsan check-package \
  package wheel check-wheel check-wheel-interop fuzz fuzz-build chaos sim \
  bench man format clean help

all: build

help:
	@echo "make deps            install the Debian packages (scripts/install-deps.sh)"
	@echo "make build           configure and build in $(BUILD_DIR)/"
	@echo "make demo            the demo's packages, build ddprun, then 4 real workers under it"
	@echo "make check           deps + PyTorch 2 venv + build + every test"
	@echo "make check-sanitize  ASan/UBSan build in $(SANITIZE_DIR)/ + tests except interop"
	@echo "make check-tsan      ThreadSanitizer build in $(TSAN_DIR)/ + tests except interop"
	@echo "make fuzz            libFuzzer targets (clang, $(FUZZ_DIR)/), $(FUZZ_SECONDS) s each"
	@echo "make chaos           SEED=… SCHEDULES=… network-fault schedules on netns hosts, checked"
	@echo "make sim             SEED=… NODES=… SCHEDULES=… the protocol at N simulated nodes, checked"
	@echo "make bench           every bench/*.py script"
	@echo "make format          clang-format every C++ file (make check fails on one that is not)"
	@echo "make man             every program's man page ($(BUILD_DIR)/man/*.1.gz)"
	@echo "make package         .deb (+ -dbgsym), .rpm (+ -debuginfo), .tar.gz in $(BUILD_DIR)/"
	@echo "make check-package   package, then install the .deb for real, check it, remove it"
	@echo "make wheel           the portable wheels ($(WHEEL_ARCHS)) in $(WHEEL_DIR)/ (pip install anywhere)"
	@echo "make check-wheel     wheel, then its checks: ELF/auditwheel, a venv, Debian 11 and arm64 roots"
	@echo "make check-wheel-interop  the interop tests with the x86_64 wheel's ddprun (torch 2 venv)"
	@echo "make clean           remove the build directories"

deps:
	scripts/install-deps.sh

configure:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DDDPRUN_PACKAGE_BUILD=$(PACKAGE_BUILD)

build: configure
	cmake --build $(BUILD_DIR) -j$(NPROC) --target all ddprun-sim-mutants

# Only what the demo needs: its packages (no clang, lintian, ...) and the ddprun target (no
# tests, tools or worker programs), so that it is quick on a fresh machine.
demo:
	scripts/install-deps.sh --demo
	$(MAKE) --no-print-directory configure
	cmake --build $(BUILD_DIR) -j$(NPROC) --target ddprun
	$(BUILD_DIR)/launcher/ddprun --standalone --nproc_per_node=4 --python $(PYTHON) --tee 3 \
	  examples/demo_worker.py

# Current PyTorch 2.x in a venv outside the tree (scripts/setup-torch2-venv.sh prints its python
# on stdout). Its path is kept in $(BUILD_DIR)/torch2-python for `make check`. A failure is fatal
# in CI and a warning elsewhere (the interop tests that need it then skip).
torch2-venv:
	@mkdir -p $(BUILD_DIR); rm -f $(BUILD_DIR)/torch2-python
	@if [ -x scripts/setup-torch2-venv.sh ]; then \
	  if out="$$(scripts/setup-torch2-venv.sh)"; then \
	    py="$$(printf '%s\n' "$$out" | tail -n 1)"; \
	    if [ -n "$$py" ] && [ -x "$$py" ]; then \
	      echo "torch2 venv: $$py"; printf '%s\n' "$$py" > $(BUILD_DIR)/torch2-python; \
	    else echo "make: setup-torch2-venv.sh printed no python path" >&2; [ -z "$${CI:-}" ]; fi; \
	  else echo "make: setup-torch2-venv.sh failed; the PyTorch 2 interop tests will skip" >&2; \
	    [ -z "$${CI:-}" ]; fi; \
	else echo "torch2 venv: scripts/setup-torch2-venv.sh not present, skipped"; fi

check: deps
	$(MAKE) --no-print-directory torch2-venv build
	torch2="$$(cat $(BUILD_DIR)/torch2-python 2>/dev/null || true)"; \
	  if [ -n "$$torch2" ]; then export DDPRUN_TORCH2_PYTHON="$$torch2"; fi; \
	  ctest --test-dir $(BUILD_DIR) $(CTEST_FLAGS)

# .clang-format on every C++ file (integration.test_format checks it in make check).
format:
	$(PYTHON) scripts/check_format.py --fix

# ASan + UBSan in a separate tree; the interop tests (real PyTorch, slow) and the simulation
# (tests/sim: 2,000 threads; the engine's own unit cases run here) are left out.
check-sanitize: deps
	cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=$(SANITIZE_BUILD_TYPE) -DDDPRUN_SANITIZE=ON \
	  $(SANITIZER_CMAKE_FLAGS)
	cmake --build $(SANITIZE_DIR) -j$(NPROC)
	ASAN_OPTIONS="$${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}" \
	UBSAN_OPTIONS="$${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
	  ctest --test-dir $(SANITIZE_DIR) $(CTEST_FLAGS) -LE "interop|sim"

# ThreadSanitizer in a tree of its own (docs/reliability.md, "ThreadSanitizer"); interop left out.
# Every process the tests start writes its reports to $(TSAN_DIR)/tsan-reports/ (log_path), so
# that a race in a program whose exit status or stderr a test does not look at (an agent the
# chaos test kills, a store server) still fails the target; they are printed at the end.
check-tsan: deps
	cmake -S . -B $(TSAN_DIR) -DCMAKE_BUILD_TYPE=$(TSAN_BUILD_TYPE) -DDDPRUN_TSAN=ON \
	  $(SANITIZER_CMAKE_FLAGS)
	cmake --build $(TSAN_DIR) -j$(NPROC)
	@reports="$(abspath $(TSAN_DIR))/tsan-reports"; rm -rf "$$reports"; mkdir -p "$$reports"; \
	  norandom=""; bits="$$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 0)"; \
	  if [ "$(TSAN_SETARCH)" = 1 ] || { [ "$(TSAN_SETARCH)" = auto ] && [ "$$bits" -gt 28 ]; }; then \
	    norandom="setarch $$(uname -m) -R"; \
	    echo "check-tsan: vm.mmap_rnd_bits=$$bits: the tests run under $$norandom"; fi; \
	  status=0; \
	  TSAN_OPTIONS="$${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:log_path=$$reports/report}" \
	    $$norandom ctest --test-dir $(TSAN_DIR) $(CTEST_FLAGS) -LE "interop|sim" || status=$$?; \
	  if [ -n "$$(ls -A "$$reports")" ]; then \
	    for report in "$$reports"/*; do echo "== $$report"; cat "$$report"; done; \
	    echo "check-tsan: ThreadSanitizer reports above (kept in $$reports)" >&2; exit 1; fi; \
	  exit $$status

# libFuzzer targets (fuzz/, docs/reliability.md) in a clang tree of their own: regressions
# replayed, then each target fuzzed for FUZZ_SECONDS; fails on any crash.
fuzz: deps
	$(MAKE) --no-print-directory fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) scripts/run-fuzz.sh run $(FUZZ_DIR)

fuzz-build:
	scripts/run-fuzz.sh build $(FUZZ_DIR)

# Seeded network-fault schedules against real agents and PyTorch workers on netns hosts, each
# history checked for split brain, restart counts, stale workers, quorum, steps, leftovers and
# recovery (tests/chaos/chaos.py). Needs root; skipped (exit 77 -> 0) without netns or torch.
chaos: build
	$(PYTHON) -m unittest discover -s tests/chaos -p 'test_*.py'
	DDPRUN_BUILD_DIR=$(abspath $(BUILD_DIR)) $(PYTHON) tests/chaos/chaos.py --seed '$(SEED)' \
	  --schedules $(SCHEDULES) --first $(FIRST) $(if $(CHAOS_OUT),--out $(CHAOS_OUT)) \
	  $(if $(WITHOUT),--without $(WITHOUT)) \
	  $(CHAOS_FLAGS) || { status=$$?; [ $$status -eq 77 ] || exit $$status; }

# The elastic protocol at NODES simulated nodes under the seed's churn schedules FIRST..
# FIRST+SCHEDULES-1 (tests/sim/: the real rendezvous code over a simulated network and store,
# each history checked by tests/chaos/checker.py); SIM_OUT keeps the histories. No root needed.
NODES ?= 64
SIM_SCHEDULES = $(if $(filter command line,$(origin SCHEDULES)),$(SCHEDULES),20)
sim:
	cmake --build $(BUILD_DIR) -j$(NPROC) --target ddprun-sim
	$(PYTHON) tests/sim/sim.py --binary $(BUILD_DIR)/tests/sim/ddprun-sim --nodes $(NODES) \
	  --seed '$(SEED)' --first $(FIRST) --schedules $(SIM_SCHEDULES) $(if $(SIM_OUT),--out $(SIM_OUT))

bench: build
	torch2="$$(cat $(BUILD_DIR)/torch2-python 2>/dev/null || true)"; \
	  if [ -n "$$torch2" ]; then export DDPRUN_TORCH2_PYTHON="$$torch2"; fi; \
	  export DDPRUN_BUILD_DIR="$(abspath $(BUILD_DIR))"; \
	  for script in bench/*.py; do echo "== $$script"; $(PYTHON) "$$script"; done

man: configure
	@command -v scdoc >/dev/null || { echo "make: scdoc is missing: run make deps" >&2; exit 1; }
	cmake --build $(BUILD_DIR) --target ddprun_man
	@echo "man pages: $$(ls $(BUILD_DIR)/man/*.1.gz) (read one with: man -l $(BUILD_DIR)/man/ddprun.1.gz)"

# CPack (packaging/Packaging.cmake) from the $(BUILD_DIR)/ tree (hardened: PACKAGE_BUILD above):
# ddprun_<v>_<arch>.deb with its -dbgsym .ddeb, ddprun-<v>-1.<arch>.rpm with
# ddprun-debuginfo-<v>-1.<arch>.rpm, ddprun-<v>-Linux.tar.gz.
package: deps
	$(MAKE) --no-print-directory build
	rm -f $(BUILD_DIR)/ddprun[-_]*.deb $(BUILD_DIR)/ddprun[-_]*.ddeb $(BUILD_DIR)/ddprun-*.rpm \
	  $(BUILD_DIR)/ddprun-*.tar.gz
	cd $(BUILD_DIR) && cpack
	@ls -l $(BUILD_DIR)/ddprun[-_]*.deb $(BUILD_DIR)/ddprun[-_]*.ddeb $(BUILD_DIR)/ddprun-*.rpm \
	  $(BUILD_DIR)/ddprun-*.tar.gz

# The portable wheels (docs/packaging.md): ddprun-<v>-py3-none-manylinux_2_28_<arch>.whl per
# WHEEL_ARCHS in $(WHEEL_DIR)/, made by scikit-build-core (pyproject.toml) with zig for glibc
# 2.28. The build tools' venv, the dependencies built from Debian's source packages and each
# arch's CMake tree are kept between runs (WHEEL_DEPS): a rebuild after a change is incremental,
# also in CI's fresh clones.
wheel: deps
	tools="$$(scripts/setup-wheel-tools.sh)"; \
	for arch in $(WHEEL_ARCHS); do \
	  packaging/wheel/build-deps.sh $$arch "$(WHEEL_DEPS)/deps-$$arch" "$$tools"; \
	  rm -f $(WHEEL_DIR)/ddprun-*-manylinux_2_28_$$arch.whl; \
	  DDPRUN_WHEEL_ARCH=$$arch "$$tools" -m build --wheel --no-isolation --outdir $(WHEEL_DIR) \
	    -C build-dir="$(WHEEL_DEPS)/build-$$arch-$(WHEEL_TREE_KEY)" .; \
	done
	@ls -l $(WHEEL_DIR)/ddprun-*.whl

# The wheels' checks (tests/wheel/): ELF files and auditwheel, the contents, the x86_64 wheel
# used from a new venv; then each wheel installed in another distribution's root (Debian 11
# x86_64, Debian 12 arm64 under qemu) and used there.
check-wheel: wheel
	tools="$$(scripts/setup-wheel-tools.sh)"; \
	  "$$tools" -m unittest -v tests/wheel/test_wheel.py tests/wheel/test_wheel_roots.py

# The interop tests (real PyTorch 1.13 and 2.x) with the x86_64 wheel's ddprun, installed with pip
# in the torch 2 venv as a user would (the tests' workers and helpers come from $(BUILD_DIR)/).
check-wheel-interop: build
	py="$$(scripts/setup-torch2-venv.sh)"; \
	  "$$py" -m pip install --quiet --no-index --force-reinstall \
	    "$$(ls -t $(WHEEL_DIR)/ddprun-*-manylinux_2_28_x86_64.whl | head -1)"; \
	  DDPRUN_TORCH2_PYTHON="$$py" DDPRUN_LAUNCHER="$$(dirname "$$py")/ddprun" \
	    ctest --test-dir $(BUILD_DIR) $(CTEST_FLAGS) -L interop

# Root: installs the .deb with dpkg -i, checks the installed tool, removes it (dpkg -r, then
# --purge, also after a failure), and runs lintian, hardening-check on every ELF file, the
# licence checks, the .rpm/.tar.gz file list comparison and the debug packages' checks
# (tests/package/test_package.py).
check-package: package
	DDPRUN_BUILD_DIR="$(abspath $(BUILD_DIR))" $(PYTHON) tests/package/test_package.py

clean:
	rm -rf $(BUILD_DIR) $(SANITIZE_DIR) $(TSAN_DIR) $(FUZZ_DIR) build-wheel $(WHEEL_DIR)
