# pagesync: build, lint and test. `make test` is what CI runs (through .ci/run).
SWIFT ?= swift
# Seconds each libFuzzer target runs in `make fuzz` (CI keeps it short; run longer by hand).
FUZZ_SECONDS ?= 30
FUZZ_BUILD := .build-fuzz
ASAN_BUILD := .build-asan
FUZZ_TARGETS := FuzzHTTPRequest FuzzWebSocketFrames

.PHONY: all deps build lint format test fuzz sanitize clean run demo

all: build

deps:
	@scripts/check-deps.sh

build: deps
	$(SWIFT) build

lint:
	$(SWIFT) format lint --strict --recursive Package.swift Sources Tests Fuzz/Package.swift Fuzz/Sources

format:
	$(SWIFT) format format --in-place --recursive Package.swift Sources Tests Fuzz/Package.swift Fuzz/Sources

# The main job on embedded defaults: the broker on 127.0.0.1:7700 and a device daemon on var/pagesyncd.sock,
# their stores under ./var (no tokens: loopback only). Prints how to use pagesync; Ctrl-C stops both.
run: build
	@scripts/run.sh

# The seed's story with two devices (a laptop and a phone) and a broker, scripted, under var/demo.
demo: build
	@scripts/demo.sh

# Every test: unit, loopback and interoperability (curl, Python websockets).
test: deps lint
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

# libFuzzer on the HTTP request decoder and the WebSocket frame decoder, with AddressSanitizer, each for
# FUZZ_SECONDS, starting from the checked-in corpus. A crash leaves its input in fuzz-artifacts/.
fuzz: deps
	cd Fuzz && $(SWIFT) build --scratch-path ../$(FUZZ_BUILD) -Xswiftc -sanitize=fuzzer,address
	@mkdir -p fuzz-artifacts
	@for target in $(FUZZ_TARGETS); do \
	  corpus=Fuzz/Corpus/$$target; work=$$(mktemp -d); cp $$corpus/* $$work/; \
	  echo "fuzzing $$target for $(FUZZ_SECONDS)s"; \
	  $(FUZZ_BUILD)/debug/$$target -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -print_final_stats=1 \
	    -artifact_prefix=fuzz-artifacts/$$target- $$work $$corpus > $$work.log 2>&1; status=$$?; \
	  tail -n 12 $$work.log; rm -rf $$work $$work.log; \
	  if [ $$status -ne 0 ]; then echo "$$target found a crash: see fuzz-artifacts/"; exit $$status; fi; \
	done

# Every test under AddressSanitizer and LeakSanitizer (a leaked loop or handle fails the run).
sanitize: deps
	$(SWIFT) build --build-tests --sanitize=address --scratch-path $(ASAN_BUILD)
	LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp $(SWIFT) test --skip-build --sanitize=address \
	  --scratch-path $(ASAN_BUILD)

clean:
	rm -rf .build $(FUZZ_BUILD) $(ASAN_BUILD) fuzz-artifacts var
