package main

import (
	"fmt"
	"slices"
	"strings"
)

// edgeMarkdown renders the HTTP edge section of the report.
func (r *results) edgeMarkdown(b *strings.Builder) {
	e, p := r.edge, r.set.edge
	if e == nil {
		return
	}
	b.WriteString("\n## HTTP edge: refusing a cooling job\n\n")
	fmt.Fprintf(b, "Real HTTP over loopback: a chi router per scenario served by net/http in this process, and a wrk-like load loop in the same process "+
		"(%d keep-alive connections, one request in flight on each, every response read whole and checked to be a 429). "+
		"Requests are `POST /<handler>/{id}/evaluate`; in the scenarios of %s distinct jobs each connection walks them from its own offset. "+
		"Every handler answers with the same 429: the middleware's own refusal, captured at setup and written back byte for byte "+
		"(headers %s; a %d-byte application/problem+json body). The baselines:\n\n",
		p.conns, manyList(p.many), "`"+strings.Join(e.header, "`, `")+"`", e.bodyLen)
	b.WriteString("- **" + eBare + "**: a chi handler that writes that 429 and nothing else: the floor of routing plus net/http.\n")
	b.WriteString("- **" + eGet + "**: the cheapest hand-written check of shared state: one `GET` of a key per job (its own go-redis client), then the same 429.\n")
	b.WriteString("- **" + eHTTPRate + "**: `httprate.Limit(1, time.Hour)` keyed by the job's URL parameter, each job primed with its one allowed request; " +
		"its limit handler writes the same 429 and its own `X-RateLimit-*` headers stay, as a user gets them. " +
		"It sees this process's requests only (no Redis), so it is a ceiling for an in-memory limiter, not a like-for-like shared one.\n")
	b.WriteString("- **" + eGate + "**: `httpmw.New(g, httpmw.Options{Job: httpmw.URLParam(\"id\")})` mounted with `r.With` on the route, as the package doc does; " +
		"each job was cooled for an hour through the middleware itself (its handler reported `classify.Transient(err, time.Hour)` with `httpmw.Fail`). " +
		"The Gate measured is a fresh one (a new `gate.New` after the jobs were cooled), so no refusal comes from anything this process saw before: " +
		"each is the acquire's one round trip of native commands (`PTTL`, `SET NX GET`, `TIME` in a pipeline; no script, nothing written), " +
		"except that a request arriving while an acquire of the same job is in flight in the same Gate shares its answer without a round trip, so one hammered job costs under one trip per refusal.\n\n")
	fmt.Fprintf(b, "Medians of %d rounds, the order of handlers reversed every other round; each measurement opens fresh connections, warms up for %v and measures for %v. "+
		"×bare and ×httprate are medians of per-round ratios of req/s within a scenario. "+
		"Process CPU is this process's, server and load loop together; ×bare and ×httprate by CPU are the baseline's CPU per request (process plus redis-server) over the handler's, per round: "+
		"with both cores saturated req/s follows it, and the other work on a shared machine moves it far less than req/s.\n\n",
		p.rounds, p.warm, p.dur)
	b.WriteString("Redis memory per cooling job (`used_memory_dataset` after the jobs were cooled through the middleware, less before, over the number of jobs; job keys `job-<n>`, prefix `edge-<n>`):\n\n")
	b.WriteString("| scenario | bytes per cooling job |\n|---|---:|\n")
	for _, n := range p.many {
		if n < minMemJobs {
			fmt.Fprintf(b, "| %s | too few jobs to measure |\n", scMany(n))
			continue
		}
		fmt.Fprintf(b, "| %s | %.0f |\n", scMany(n), e.jobBytes[scMany(n)])
	}
	b.WriteString("\n")
	b.WriteString("| scenario | handler | req/s | spread | ×bare 429 | ×one GET | ×httprate | ×bare by CPU | ×one GET by CPU | ×httprate by CPU | p50 µs | p99 µs | Redis trips/req | scripts/req | process CPU µs/req | redis CPU µs/req |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range e.rows {
		rps := medianOf(x.samples, func(s edgeSample) float64 { return s.reqsPerSec })
		lo := slices.MinFunc(x.samples, func(a, b edgeSample) int { return cmpF(a.reqsPerSec, b.reqsPerSec) }).reqsPerSec
		hi := slices.MaxFunc(x.samples, func(a, b edgeSample) int { return cmpF(a.reqsPerSec, b.reqsPerSec) }).reqsPerSec
		fmt.Fprintf(b, "| %s | %s | %.0f | ±%.0f%% | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f | %.2f | %.1f | %.1f |\n",
			x.scenario, x.name, rps, 50*(hi-lo)/rps, median(x.vsBare), median(x.vsGet), median(x.vsRate),
			median(x.cpuVsBare), median(x.cpuVsGet), median(x.cpuVsRate),
			medianOf(x.samples, func(s edgeSample) float64 { return us(s.p50) }),
			medianOf(x.samples, func(s edgeSample) float64 { return us(s.p99) }),
			medianOf(x.samples, func(s edgeSample) float64 { return s.trips }),
			medianOf(x.samples, func(s edgeSample) float64 { return s.scripts }),
			medianOf(x.samples, func(s edgeSample) float64 { return s.procCPU }),
			medianOf(x.samples, func(s edgeSample) float64 { return s.redisCPU }))
	}
}

// minMemJobs is the fewest cooling jobs whose memory the report gives:
// below it, client buffers that Redis's cron resizes meanwhile (megabytes)
// outweigh the jobs.
const minMemJobs = 100000

// manyList names the sizes of the many-jobs scenarios: "10000 and 1000000".
func manyList(many []int) string {
	parts := make([]string, len(many))
	for i, n := range many {
		parts[i] = fmt.Sprint(n)
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
