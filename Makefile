# retrygate — the two commands: `make demo` and `make test`.
GO       ?= go
# A count, not a duration: with a duration, go1.26's fuzz coordinator can fail
# a clean run with "context deadline exceeded" at the deadline (a race in
# internal/fuzz, go.dev/issue/75804). A count has no deadline to race.
FUZZTIME ?= 100000x
# Real-Redis tests skip where redis-server is missing, the alert-rule tests
# where promtool is, the River adapter's where PostgreSQL is; CI sets
# RETRYGATE_REQUIRE_REDIS=1, RETRYGATE_REQUIRE_PROMTOOL=1,
# RETRYGATE_REQUIRE_POSTGRES=1 (and RETRYGATE_REQUIRE_BROWSER=1) to fail instead.
# Nested modules (their own go.mod, so the library pulls in none of their
# dependencies) are vetted and tested like the root one: every go.mod below
# the root, found by git (or find, outside a checkout). internal/release is
# the release tooling; its tests check the API listings in api/ and build
# every published module from a module proxy, as a user would get it.
MODULES  ?= $(sort $(patsubst ./%,%,$(patsubst %/go.mod,%,$(shell { git ls-files --cached --others --exclude-standard '*/go.mod' 2>/dev/null || find . -mindepth 2 -name go.mod; } | grep -v /testdata/))))

.PHONY: all test vet race fuzz loaded storms demo bench bench-gate tidy mutate api release

all: test

## test: vet, every test under the race detector, then each fuzz target briefly.
test: vet race fuzz

vet:
	$(GO) vet ./...
	@set -e; for m in $(MODULES); do echo "vet $$m"; (cd $$m && $(GO) vet ./...); done
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

# -vet=off: vet ran above on every package, with every check go test's
# own vet would run (a subset of go vet's). limitstorm is listed first:
# its storms last as long as their providers' limits make them (12 min,
# a fifth of one core), so it starts first and the other packages run
# beside it, instead of after them (docs/contributing/testing.md).
STORMS   := ./internal/testkit/limitstorm
race:
	$(GO) test -race -count=1 -vet=off -timeout 20m $(STORMS) $$($(GO) list ./... | grep -v '/internal/testkit/limitstorm$$')
	@set -e; for m in $(MODULES); do echo "test $$m"; (cd $$m && $(GO) test -race -count=1 -vet=off -timeout 30m ./...); done

## fuzz: run every Fuzz target for FUZZTIME executions each (seeds: f.Add, plus testdata/fuzz when present).
# The targets are listed by one go test over every package (its test
# binaries built two at a time), not one go test a package; -vet=off as
# in race.
fuzz:
	@set -e; list=$$($(GO) test -vet=off -list '^Fuzz' ./...); \
	for t in $$(echo "$$list" | awk '/^Fuzz/ { f[++n] = $$1; next } /^ok/ { for (i = 1; i <= n; i++) print $$2 ":" f[i]; n = 0 }'); do \
	  pkg=$${t%%:*}; f=$${t#*:}; \
	  echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	  $(GO) test -vet=off -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 200x $$pkg; \
	done

## loaded: RUNS (default 5) make test runs in a row while a busy loop per
## core keeps every core busy; stops at the first failure
## (docs/contributing/testing.md).
RUNS ?= 5
loaded:
	.ci/loaded $(RUNS)

## storms: issue 37's rate-limit storms at the issue's own length (jobs
## offered for STORM_ARRIVALS at 2.5 × the provider's limit, the default
## wiring, on miniredis, one redis-server and a 3-master cluster), each
## held to the issue's targets; make test runs them at 4 s
## (docs/upstreams.md). About 15 minutes on 2 cores.
STORM_ARRIVALS ?= 24s
storms:
	LIMITSTORM_ARRIVALS=$(STORM_ARRIVALS) $(GO) test -race -count=1 -timeout 60m -run '^(TestStormNoHeaders|TestStormDefaultWiring)$$' -v $(STORMS)

## demo: the example server with embedded Redis and a fake LLM upstream.
demo:
	cd examples/server && $(GO) run .

## bench: head-to-head with redislock, redsync and raw SET NX locks (with and
## without a fence), the middleware's HTTP refusals against a bare 429, one
## GET and httprate, and the rate-limit storms (the budget's admission beside
## the reactive gate), on one real redis-server, ratios within one run
## → bench/RESULTS.md (~17 min on 2 cores: ~4 the head-to-head and the edge,
## ~13 the storms, 21 of them at 24 s of arrivals in 4 worker processes).
bench:
	cd bench && $(GO) run . -out RESULTS.md

## bench-gate: the gate's and the middleware's own micro-benchmarks (round
## trips and allocs per path).
bench-gate:
	$(GO) test -run '^$$' -bench . -benchmem -count 3 ./gate/... ./httpmw/

tidy:
	$(GO) mod tidy
	@set -e; for m in $(MODULES); do echo "tidy $$m"; (cd $$m && $(GO) mod tidy); done

## api: rewrite api/*.txt, the exported API of each published module, after
## a change of it that is meant (make test fails until then); say what
## changed in CHANGELOG.md.
api:
	cd internal/release && $(GO) test -count=1 -run '^TestAPI$$' . -update

## release: VERSION=vX.Y.Z — set every module's requirement of the others
## to VERSION, date CHANGELOG.md's Unreleased section, commit, and tag each
## published module (VERSION, gate/gateasynq/VERSION, …) in the local
## repository. Refuses a bad version, a tree with changes and a stale
## api/ listing; pushes nothing (it prints the push command). make test
## first: its module-proxy test builds each module as users will get it.
release:
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=v0.2.0"; exit 2; }
	cd internal/release && $(GO) run ./cmd/release -version '$(VERSION)'

## mutate: mutation testing (gremlins, its default conditionals and arithmetic
## mutants) of MUTATE_PKGS, then each package's test efficacy (killed / killed
## + lived). Not part of test: hours (gate alone: 433 mutants, 1.5 to 3
## minutes each at one worker, stop 48's count). Each mutant runs its
## package's tests on MUTATE_TARGETS (RETRYGATE_TARGETS: miniredis and one
## real redis-server, no cluster), niced, one worker. Survivors no test can
## kill are listed in docs/contributing/mutants.md.
## MUTATE_FILES (default: empty, the whole package) names the files of the
## package (one in MUTATE_PKGS) to mutate, e.g. MUTATE_FILES="acquire.go settle.go": a shard of a
## package too slow to run whole in one sitting (gate: 433 mutants, a test
## run of 2 to 3 minutes). Every other top-level file is excluded; the tests
## run are the package's whole suite, as without it. Shards run at once
## share nothing (gremlins copies the module per run).
## GREMLINS_STATUSES (default lt: lived, timed out) picks what is printed.
GREMLINS_VERSION ?= v0.6.0
GREMLINS_TIMEOUT ?= 4
MUTATE_PKGS      ?= classify classify/goopenai gate httpmw
MUTATE_TARGETS   ?= miniredis,redis
MUTATE_FILES     ?=
GREMLINS_STATUSES ?= lt
GREMLINS_DIR     := $(shell $(GO) env GOPATH)/retrygate-tools/gremlins-$(GREMLINS_VERSION)
GREMLINS         := $(GREMLINS_DIR)/gremlins

$(GREMLINS):
	GOBIN=$(GREMLINS_DIR) $(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)

mutate: $(GREMLINS)
	@set -e; out=$$(mktemp -d); trap 'rm -rf "$$out"' EXIT; \
	for pkg in $(MUTATE_PKGS); do \
	  echo "== gremlins $$pkg $(MUTATE_FILES)"; \
	  only=''; \
	  if [ -n "$(MUTATE_FILES)" ]; then \
	    for f in $(MUTATE_FILES); do test -f "$$pkg/$$f" || { echo "MUTATE_FILES: no $$pkg/$$f"; exit 2; }; done; \
	    others=$$(cd $$pkg && for f in *.go; do case "$$f" in *_test.go) continue;; esac; \
	      case " $(MUTATE_FILES) " in *" $$f "*) continue;; esac; printf '%s|' "$${f%.go}"; done); \
	    if [ -n "$$others" ]; then only="^($${others%|})\\.go$$"; fi; \
	  fi; \
	  (cd $$pkg && GOFLAGS="$$GOFLAGS -count=1" RETRYGATE_TARGETS=$(MUTATE_TARGETS) nice -n 10 $(GREMLINS) unleash \
	    --workers 1 --timeout-coefficient $(GREMLINS_TIMEOUT) \
	    --exclude-files '/' $${only:+--exclude-files "$$only"} --output-statuses $(GREMLINS_STATUSES)) | tee "$$out/$$(echo $$pkg | tr / _)"; \
	done; \
	echo "== test efficacy"; \
	for pkg in $(MUTATE_PKGS); do \
	  printf '%-10s %s\n' "$$pkg" "$$(grep -o 'Test efficacy: [0-9.]*%' "$$out/$$(echo $$pkg | tr / _)" || echo 'no result')"; \
	done
