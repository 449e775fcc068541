package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// edgeSample is one measurement of one handler in one scenario.
type edgeSample struct {
	reqs       uint64
	reqsPerSec float64
	p50, p99   time.Duration
	trips      float64 // Redis round trips per request (go-redis hook)
	scripts    float64 // EVALSHA calls per request (INFO commandstats)
	procCPU    float64 // this process's CPU per request, µs: server and load generator
	redisCPU   float64 // redis-server's CPU per request, µs
}

// cpu is the CPU both processes spend per request, µs.
func (s edgeSample) cpu() float64 { return s.procCPU + s.redisCPU }

// edgeRow is one handler in one scenario over the rounds.
type edgeRow struct {
	scenario, name string
	samples        []edgeSample
	// vsBare and vsRate hold per round req/s ÷ the bare 429's and
	// httprate's in the same round; cpuVsBare and cpuVsRate their CPU per
	// request (this process and redis-server) ÷ this handler's, which other
	// load on the machine moves far less than req/s.
	vsBare, vsRate, cpuVsBare, cpuVsRate []float64
	// vsGet and cpuVsGet are the same against the one-GET handler.
	vsGet, cpuVsGet []float64
}

// edgeResults is the HTTP edge part of a report.
type edgeResults struct {
	rows []*edgeRow
	// header and bodyLen describe the 429 every handler writes.
	header  []string
	bodyLen int
	// jobBytes is the Redis memory per cooling gate job, by scenario.
	jobBytes map[string]float64
}

// edgeScenario is one load shape: its server holds its jobs, all cooling.
type edgeScenario struct {
	name string
	srv  *edgeServer
	reqs map[string][][]byte // by route
}

// Scenario names.
const scHot = "one job hammered"

func scMany(jobs int) string { return fmt.Sprintf("%d distinct cooling jobs", jobs) }

// runEdge measures every handler of both scenarios in interleaved rounds,
// against the redis-server at srv.
func runEdge(ctx context.Context, m *measurer, srv server, p edgeParams, log io.Writer) (*edgeResults, error) {
	var scs []*edgeScenario
	defer func() {
		for _, sc := range scs {
			sc.srv.close()
		}
	}()
	type shape struct {
		name, prefix string
		jobs         []string
	}
	shapes := []shape{{scHot, "edge-hot", []string{"hot"}}}
	for _, n := range p.many {
		shapes = append(shapes, shape{scMany(n), fmt.Sprintf("edge-%d", n), edgeJobs("job-", n)})
	}
	for _, x := range shapes {
		fmt.Fprintf(log, "edge: cooling %d jobs for %s\n", len(x.jobs), x.name)
		s, err := newEdgeServer(ctx, srv.addr, x.prefix, x.jobs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", x.name, err)
		}
		sc := &edgeScenario{name: x.name, srv: s, reqs: map[string][][]byte{}}
		scs = append(scs, sc)
		for _, h := range s.handlers {
			sc.reqs[h.route] = s.requests(h.route)
		}
	}

	res := &edgeResults{bodyLen: len(scs[0].srv.refusal.body), jobBytes: map[string]float64{}}
	for _, sc := range scs {
		res.jobBytes[sc.name] = sc.srv.jobBytes
	}
	for k := range scs[0].srv.refusal.header {
		res.header = append(res.header, k)
	}
	slices.Sort(res.header)
	byKey := map[string]*edgeRow{}
	for _, sc := range scs {
		for _, h := range sc.srv.handlers {
			r := &edgeRow{scenario: sc.name, name: h.name}
			res.rows = append(res.rows, r)
			byKey[sc.name+"|"+h.name] = r
		}
	}
	hists := make([]hist, p.conns)
	for round := range p.rounds {
		for _, sc := range scs {
			order := slices.Clone(sc.srv.handlers)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			got := map[string]edgeSample{}
			for _, h := range order {
				s, err := measureEdge(ctx, m, sc, h, p, hists)
				if err != nil {
					return nil, fmt.Errorf("edge %s, %s: %w", sc.name, h.name, err)
				}
				got[h.name] = s
				byKey[sc.name+"|"+h.name].samples = append(byKey[sc.name+"|"+h.name].samples, s)
				fmt.Fprintf(log, "edge %d/%d  %-28s %-28s %8.0f req/s  p50 %-9v trips %.2f scripts %.2f\n",
					round+1, p.rounds, sc.name, h.name, s.reqsPerSec, s.p50.Round(time.Microsecond), s.trips, s.scripts)
			}
			for _, h := range sc.srv.handlers {
				r := byKey[sc.name+"|"+h.name]
				r.vsBare = append(r.vsBare, got[h.name].reqsPerSec/got[eBare].reqsPerSec)
				r.vsRate = append(r.vsRate, got[h.name].reqsPerSec/got[eHTTPRate].reqsPerSec)
				r.cpuVsBare = append(r.cpuVsBare, got[eBare].cpu()/got[h.name].cpu())
				r.cpuVsRate = append(r.cpuVsRate, got[eHTTPRate].cpu()/got[h.name].cpu())
				r.vsGet = append(r.vsGet, got[h.name].reqsPerSec/got[eGet].reqsPerSec)
				r.cpuVsGet = append(r.cpuVsGet, got[eGet].cpu()/got[h.name].cpu())
			}
		}
	}
	return res, nil
}

// measureEdge warms h up on fresh keep-alive connections, then measures
// it for p.dur.
func measureEdge(ctx context.Context, m *measurer, sc *edgeScenario, h edgeHandler, p edgeParams, hists []hist) (edgeSample, error) {
	conns, err := dialLoad(ctx, sc.srv.addr, p.conns)
	if err != nil {
		return edgeSample{}, err
	}
	defer closeLoad(conns)
	reqs := sc.reqs[h.route]
	upstream0 := sc.srv.upstream.Load()
	if _, _, err := hammer(conns, reqs, p.warm, hists, false); err != nil {
		return edgeSample{}, fmt.Errorf("warm-up: %w", err)
	}
	if err := m.admin.ConfigResetStat(ctx).Err(); err != nil {
		return edgeSample{}, err
	}
	for i := range hists {
		hists[i].reset()
	}
	var trips0 int64
	if h.rt != nil {
		trips0 = h.rt.n.Load()
	}
	self := os.Getpid()
	proc0, redis0 := cpuTime(self), cpuTime(m.pid)
	n, elapsed, err := hammer(conns, reqs, p.dur, hists, true)
	proc, redisCPU := cpuTime(self)-proc0, cpuTime(m.pid)-redis0
	if err != nil {
		return edgeSample{}, err
	}
	if n == 0 {
		return edgeSample{}, fmt.Errorf("no request completed")
	}
	if ran := sc.srv.upstream.Load() - upstream0; ran != 0 {
		return edgeSample{}, fmt.Errorf("%d requests reached the upstream handler: a job was not cooling", ran)
	}
	var trips int64
	if h.rt != nil {
		trips = h.rt.n.Load() - trips0
	}
	info, err := m.admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return edgeSample{}, err
	}
	var lat hist
	for i := range hists {
		lat.merge(&hists[i])
	}
	return edgeSample{
		reqs:       n,
		reqsPerSec: float64(n) / elapsed.Seconds(),
		p50:        lat.quantile(0.50),
		p99:        lat.quantile(0.99),
		trips:      float64(trips) / float64(n),
		scripts:    float64(parseCommandStats(info)["evalsha"].calls) / float64(n),
		procCPU:    us(proc) / float64(n),
		redisCPU:   us(redisCPU) / float64(n),
	}, nil
}
