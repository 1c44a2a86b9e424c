# The two set-up commands are `make demo` and `make test`; each installs the
# Debian packages it needs (idempotently) and builds with CMake.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build build-asan build-fuzz test test-fast demo fuzz fuzz-replay clean format bench layers

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) -- -s --no-print-directory

build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTD_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS) -- -s --no-print-directory

# Every fuzz target replays its seed corpus (regression inputs included)
# and then fuzzes for FUZZ_CI_SECONDS (default 5) from it, so every change
# is fuzzed a little; then every suite runs twice: a normal build and an
# ASan+UBSan build.
FUZZ_CI_SECONDS ?= 5
test: build build-asan build-fuzz
	@bash scripts/fuzz.sh build-fuzz 0
	@bash scripts/fuzz.sh build-fuzz $(FUZZ_CI_SECONDS)
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS)

test-fast: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)

build-fuzz: deps
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DTD_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target $$(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$$//') \
		-- -s --no-print-directory

# FUZZ_SECONDS per target (default 60).
fuzz: build-fuzz
	@bash scripts/fuzz.sh build-fuzz $(or $(FUZZ_SECONDS),60)

# Every performance claim side by side with its peer (docs/benchmarks.md);
# QUICK=1 for a short run. Uses its own Release build dir.
BENCH_BUILD ?= build-bench
bench: deps
	@QUICK=$(QUICK) bash scripts/bench.sh $(BENCH_BUILD)

# Every #include under src/ against the layer table (cmake/layers.cmake);
# the compile-time side is ctest -R layers/ in a build dir.
layers:
	@cmake -DTD_SOURCE_DIR=$(CURDIR) -P cmake/check_layers.cmake

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz

format:
	clang-format -i $$(git ls-files '*.c' '*.h')
