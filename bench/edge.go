package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/httprate"
	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
)

// edgeParams size the HTTP edge benchmark.
type edgeParams struct {
	rounds    int           // interleaved rounds; medians are reported
	warm, dur time.Duration // per-measurement warm-up and window
	conns     int           // keep-alive connections, one request in flight each
	many      []int         // distinct cooling jobs of each scenario after the hammered one
}

// Edge handlers: the columns of a scenario, in the table's order. Each
// answers POST /<route>/{id}/evaluate with a 429 of the same headers and
// body size.
const (
	eBare     = "bare chi 429"
	eGet      = "one Redis GET, then 429"
	eHTTPRate = "go-chi/httprate, in memory"
	eGate     = "retrygate httpmw"
)

// edgeHandler is one route of an edgeServer.
type edgeHandler struct {
	name  string
	route string
	rt    *tripCounter // Redis round trips it sends; nil if none
}

// errCoolHour is the upstream failure that cools the gate's jobs: a
// transient error whose server hint asks for an hour.
var errCoolHour = classify.Transient(errors.New("upstream: 503 Service Unavailable"), time.Hour)

// edgeServer is a chi router on loopback with one route per handler, all
// answering 429 for the jobs it was built with.
type edgeServer struct {
	addr     string
	srv      *http.Server
	handlers []edgeHandler
	jobs     []string
	clients  []*redis.Client
	// upstream counts runs of the handlers behind the gate and httprate;
	// after priming, a measurement that changes it let a request through.
	upstream atomic.Int64
	refusal  captured
	// jobBytes is the Redis memory the gate's cooling jobs take, per job:
	// used_memory_dataset (used_memory less the server's overhead: client
	// buffers, the replication backlog) after they were cooled through the
	// middleware less before.
	jobBytes float64
}

// captured is the gate's 429 as the middleware writes it, which the bare
// handler writes back byte for byte.
type captured struct {
	header http.Header
	body   []byte
}

func (c *captured) write(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range c.header {
		h.Set(k, v[0])
	}
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(c.body)
}

// newEdgeServer builds the router for jobs, cools every job down for an
// hour in each limiter, and starts serving on a free loopback port.
func newEdgeServer(ctx context.Context, redisAddr, prefix string, jobs []string) (s *edgeServer, err error) {
	s = &edgeServer{jobs: jobs}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	r := chi.NewRouter()

	// The middleware as the package doc mounts it: r.With on the route,
	// its gate on its own client. The handler is the upstream call that
	// fails once per job with an hour's hint.
	gdb, grt := newClient(redisAddr)
	s.clients = append(s.clients, gdb)
	// The priming gate has no upstream: 300 jobs failing at once would
	// trip the default upstream's breaker, and the jobs after it would be
	// refused (503) instead of cooled. The gate measured has one.
	g, err := gate.New(gdb, gate.Options{Prefix: prefix, Cooldown: time.Hour, UpstreamPolicy: gate.UpstreamPolicy{Off: true}})
	if err != nil {
		return s, err
	}
	fail := func(w http.ResponseWriter, r *http.Request) {
		s.upstream.Add(1)
		httpmw.Fail(r, errCoolHour)
	}
	mw := httpmw.Options{Job: httpmw.URLParam("id")}
	primer := chi.NewRouter()
	primer.With(httpmw.New(g, mw)).Post("/gate/{id}/evaluate", fail)
	// The priming's connections exist before the memory is read.
	if err := warmPool(ctx, gdb, 64); err != nil {
		return s, err
	}
	mem0, err := usedMemory(ctx, gdb)
	if err != nil {
		return s, err
	}
	if err := s.prime(primer, "gate", http.StatusTooManyRequests); err != nil {
		return s, err
	}
	mem1, err := usedMemory(ctx, gdb)
	if err != nil {
		return s, err
	}
	s.jobBytes = float64(mem1-mem0) / float64(len(jobs))
	// The gate measured is a fresh one: it never saw these cooldowns, so
	// every refusal is what any process pays.
	if g, err = gate.New(gdb, gate.Options{Prefix: prefix, Cooldown: time.Hour}); err != nil {
		return s, err
	}
	r.With(httpmw.New(g, mw)).Post("/gate/{id}/evaluate", fail)
	rec := s.serve(r, "gate", jobs[0])
	if rec.Code != http.StatusTooManyRequests || s.upstream.Load() != int64(len(jobs)) {
		return s, fmt.Errorf("edge: exp the gate to refuse a cooling job with 429, got %d (%d upstream runs for %d jobs)",
			rec.Code, s.upstream.Load(), len(jobs))
	}
	s.refusal = captured{header: rec.Header().Clone(), body: rec.Body.Bytes()}

	r.Post("/bare/{id}/evaluate", func(w http.ResponseWriter, _ *http.Request) { s.refusal.write(w) })

	// One GET of a key per job, as a hand-written "is it cooling?" check.
	rdb, rt := newClient(redisAddr)
	s.clients = append(s.clients, rdb)
	getPrefix := prefix + ":get:"
	for batch := range slices.Chunk(jobs, 10000) {
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, j := range batch {
				p.Set(ctx, getPrefix+j, "c:transient", time.Hour)
			}
			return nil
		}); err != nil {
			return s, err
		}
	}
	r.Post("/get/{id}/evaluate", func(w http.ResponseWriter, r *http.Request) {
		if err := rdb.Get(r.Context(), getPrefix+chi.URLParam(r, "id")).Err(); err != nil {
			http.Error(w, "redis", http.StatusInternalServerError)
			return
		}
		s.refusal.write(w)
	})

	// httprate keyed by job: one request an hour, the limit answered with
	// the same 429; its own X-RateLimit-* headers stay, as a user gets them.
	r.With(httprate.Limit(1, time.Hour,
		httprate.WithKeyFuncs(func(r *http.Request) (string, error) { return chi.URLParam(r, "id"), nil }),
		httprate.WithLimitHandler(func(w http.ResponseWriter, _ *http.Request) { s.refusal.write(w) }),
	)).Post("/httprate/{id}/evaluate", func(w http.ResponseWriter, _ *http.Request) {
		s.upstream.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})
	if err := s.prime(r, "httprate", http.StatusNoContent); err != nil {
		return s, err
	}

	// Every connection of the load may be in a handler at once.
	for _, c := range s.clients {
		if err := warmPool(ctx, c, maxConc); err != nil {
			return s, err
		}
	}
	s.handlers = []edgeHandler{
		{name: eBare, route: "bare"},
		{name: eGet, route: "get", rt: rt},
		{name: eHTTPRate, route: "httprate"},
		{name: eGate, route: "gate", rt: grt},
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return s, err
	}
	s.addr = l.Addr().String()
	s.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// prime sends each job one request to route in process, expecting exp:
// the request that cools it down (gate) or uses its one allowed call
// (httprate).
func (s *edgeServer) prime(h http.Handler, route string, exp int) error {
	const workers = 64
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		errMu sync.Mutex
		errs  error
	)
	// The first job alone: until a call to a gate's upstream settled, its
	// calls go one at a time (nothing is known of its budget yet).
	if len(s.jobs) > 0 {
		if rec := s.serve(h, route, s.jobs[0]); rec.Code != exp {
			return fmt.Errorf("edge: prime %s %s: exp %d, got %d", route, s.jobs[0], exp, rec.Code)
		}
		next.Store(1)
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(s.jobs)); i = next.Add(1) - 1 {
				if rec := s.serve(h, route, s.jobs[i]); rec.Code != exp {
					errMu.Lock()
					errs = errors.Join(errs, fmt.Errorf("edge: prime %s %s: exp %d, got %d", route, s.jobs[i], exp, rec.Code))
					errMu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return errs
}

func (s *edgeServer) serve(h http.Handler, route, job string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/"+route+"/"+job+"/evaluate", nil))
	return rec
}

// requests are the raw HTTP/1.1 requests for route, one per job.
func (s *edgeServer) requests(route string) [][]byte {
	reqs := make([][]byte, len(s.jobs))
	for i, j := range s.jobs {
		reqs[i] = []byte("POST /" + route + "/" + j + "/evaluate HTTP/1.1\r\nHost: " + s.addr + "\r\nContent-Length: 0\r\n\r\n")
	}
	return reqs
}

func (s *edgeServer) close() {
	if s.srv != nil {
		_ = s.srv.Close()
	}
	for _, c := range s.clients {
		_ = c.Close()
	}
}

// usedMemory is Redis's used_memory_dataset, in bytes: the memory its
// keys take, with their dictionaries' entries and expiry times.
func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "used_memory_dataset:"); ok {
			// Redis prints used_memory minus its overhead as an unsigned
			// size_t, which wraps when a nearly empty server's overhead
			// is larger (18446744073708659208 on a CI run): read it back
			// as the negative difference it is.
			u, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return int64(u), err
		}
	}
	return 0, fmt.Errorf("INFO memory has no used_memory_dataset")
}

// edgeJobs names n jobs.
func edgeJobs(prefix string, n int) []string {
	js := make([]string, n)
	for i := range js {
		js[i] = prefix + strconv.Itoa(i)
	}
	return js
}
