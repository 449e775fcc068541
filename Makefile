# retrygate — the two commands: `make demo` and `make test`.
GO       ?= go
FUZZTIME ?= 8s
# Real-Redis tests skip where redis-server is missing; CI sets
# RETRYGATE_REQUIRE_REDIS=1 (and RETRYGATE_REQUIRE_BROWSER=1) to fail instead.

.PHONY: all test vet race fuzz demo bench tidy

all: test

## test: vet, every test under the race detector, then each fuzz target briefly.
test: vet race fuzz

vet:
	$(GO) vet ./...

race:
	$(GO) test -race -count=1 -timeout 20m ./...

## fuzz: run every checked-in Fuzz target for FUZZTIME each (corpus in testdata/fuzz).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 200x $$pkg; \
	  done; \
	done

## demo: the example server with embedded Redis and a fake LLM upstream.
demo:
	$(GO) run ./examples/server

## bench: the gate's benchmarks on a real redis-server (ratios within one run).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 3 ./gate/...

tidy:
	$(GO) mod tidy
