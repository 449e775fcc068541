package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"
)

// settings size a run.
type settings struct {
	rounds      int           // interleaved rounds per-op; the median is reported
	warm, dur   time.Duration // per-op warm-up and window
	stormRounds int
	storm       stormParams
	concs       []int
	edge        edgeParams
	limit       limitParams
}

var (
	fullSettings = settings{
		rounds: 9, warm: 100 * time.Millisecond, dur: 600 * time.Millisecond,
		stormRounds: 3,
		storm:       stormParams{clients: 50, dur: 2 * time.Second, callTime: 20 * time.Millisecond, retryEvery: 10 * time.Millisecond, cooldown: 500 * time.Millisecond},
		concs:       []int{1, maxConc},
		edge:        edgeParams{rounds: 9, warm: 150 * time.Millisecond, dur: 500 * time.Millisecond, conns: maxConc, many: []int{10000, 1000000}},
		limit:       limitParams{rpm: 3000, offer: 2.5, arrivals: 24 * time.Second, drain: 12 * time.Second, seeds: []uint64{1}},
	}
	quickSettings = settings{
		rounds: 1, warm: 30 * time.Millisecond, dur: 150 * time.Millisecond,
		stormRounds: 1,
		storm:       stormParams{clients: 10, dur: 400 * time.Millisecond, callTime: 10 * time.Millisecond, retryEvery: 5 * time.Millisecond, cooldown: 100 * time.Millisecond},
		concs:       []int{1, maxConc},
		edge:        edgeParams{rounds: 1, warm: 30 * time.Millisecond, dur: 150 * time.Millisecond, conns: maxConc, many: []int{300, 3000}},
		limit:       limitParams{rpm: 3000, offer: 2.5, arrivals: time.Second, drain: 10 * time.Second, seeds: []uint64{1}},
	}
)

// row is one workload at one concurrency: its samples over the rounds.
type row struct {
	name    string
	conc    int
	samples []sample
	// vsFloor holds per round ops/s ÷ the floor's in the same round.
	vsFloor []float64
}

type stormRow struct {
	name    string
	results []stormResult
}

// results is everything a report needs.
type results struct {
	set     settings
	machine machine
	rows    []*row
	storm   []*stormRow
	limit   []*limitRow
	line    *lineRow
	edge    *edgeResults
	// ratios holds per-round ops/s ratios for the targets, by key
	// "<a>/<b>@<conc>".
	ratios  map[string][]float64
	elapsed time.Duration
}

func ratioKey(a, b string, conc int) string { return fmt.Sprintf("%s/%s@%d", a, b, conc) }

// server is the redis-server measured against.
type server struct {
	addr string
	pid  int // for its CPU time; 0 if unknown
}

// runSuite measures everything against srv; progress goes to log.
func runSuite(ctx context.Context, srv server, set settings, log io.Writer) (*results, error) {
	began := time.Now()
	ws, closeAll, err := newWorkloads(ctx, srv.addr)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	m := newMeasurer(srv, set.warm, set.dur)
	defer m.admin.Close()

	res := &results{set: set, ratios: map[string][]float64{}}
	if res.machine, err = describeMachine(ctx, m.admin); err != nil {
		return nil, err
	}
	byKey := map[string]*row{}
	for _, c := range set.concs {
		for _, w := range ws {
			r := &row{name: w.name, conc: c}
			res.rows = append(res.rows, r)
			byKey[fmt.Sprint(w.name, "@", c)] = r
		}
	}
	pairs := [][2]string{
		{wSuccess, wFenced}, {wSuccess, wRedislock}, {wSuccess, wRedsync}, {wBlocked, wGet}, {wCoalesced, wBlocked},
	}
	if err := m.admin.ConfigResetStat(ctx).Err(); err != nil {
		return nil, err
	}
	for round := range set.rounds {
		order := slices.Clone(ws)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range set.concs {
			got := map[string]sample{}
			for _, w := range order {
				s, err := m.measure(ctx, w, c)
				if err != nil {
					return nil, err
				}
				got[w.name] = s
				byKey[fmt.Sprint(w.name, "@", c)].samples = append(byKey[fmt.Sprint(w.name, "@", c)].samples, s)
				fmt.Fprintf(log, "round %d/%d  c=%-2d  %-32s %9.0f ops/s  p50 %-9v trips %.2f\n",
					round+1, set.rounds, c, w.name, s.opsPerSec, s.p50.Round(time.Microsecond), s.trips)
			}
			for _, w := range ws {
				r := byKey[fmt.Sprint(w.name, "@", c)]
				r.vsFloor = append(r.vsFloor, got[w.name].opsPerSec/got[wFloor].opsPerSec)
			}
			for _, p := range pairs {
				k := ratioKey(p[0], p[1], c)
				res.ratios[k] = append(res.ratios[k], got[p[0]].opsPerSec/got[p[1]].opsPerSec)
			}
		}
	}
	if res.edge, err = runEdge(ctx, m, srv, set.edge, log); err != nil {
		return nil, err
	}
	if res.storm, err = runStorms(ctx, srv.addr, set, log); err != nil {
		return nil, err
	}
	if res.limit, err = runLimitStorms(ctx, srv.addr, set.limit, log); err != nil {
		return nil, err
	}
	if res.line, err = runLine(ctx, "..", log); err != nil {
		return nil, err
	}
	res.elapsed = time.Since(began)
	return res, nil
}

func runStorms(ctx context.Context, addr string, set settings, log io.Writer) ([]*stormRow, error) {
	rdb, rt := newClient(addr)
	defer rdb.Close()
	libs, err := newStormLibs(rdb, set.storm)
	if err != nil {
		return nil, err
	}
	if err := warmStorm(ctx, rdb, libs, set.storm); err != nil {
		return nil, err
	}
	rows := make([]*stormRow, len(libs))
	for i, l := range libs {
		rows[i] = &stormRow{name: l.name}
	}
	for round := range set.stormRounds {
		idx := make([]int, len(libs))
		for i := range idx {
			idx[i] = i
		}
		if round%2 == 1 {
			slices.Reverse(idx)
		}
		for _, i := range idx {
			key := fmt.Sprintf("storm:%d:%d", round, i)
			r, err := runStorm(ctx, rt, libs[i].attempt(key), set.storm)
			if err != nil {
				return nil, fmt.Errorf("storm %s: %w", libs[i].name, err)
			}
			rows[i].results = append(rows[i].results, r)
			fmt.Fprintf(log, "storm %d/%d  %-28s %5d attempts %4d upstream calls %6.2f cmds/refused\n",
				round+1, set.stormRounds, libs[i].name, r.attempts, r.calls, r.perRefused())
		}
	}
	return rows, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianOf[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	return median(v)
}
