package limitstorm

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// errorPause is how long a job waits after an error that states no wait
// (Redis unreachable, say) before it tries again; such errors are counted.
const errorPause = 100 * time.Millisecond

// outcome is what one process's jobs came to.
type outcome struct {
	Jobs, Completed, Failed, Lost, Errors int
	FirstError                            string
	Last                                  time.Time // the last completion
}

func (o *outcome) add(p outcome) {
	o.Jobs += p.Jobs
	o.Completed += p.Completed
	o.Failed += p.Failed
	o.Lost += p.Lost
	o.Errors += p.Errors
	if o.FirstError == "" {
		o.FirstError = p.FirstError
	}
	if p.Last.After(o.Last) {
		o.Last = p.Last
	}
}

// share is one process's part of a storm: its Gates, each with a Redis
// client and a go-openai client of its own, and their jobs.
type share struct {
	c       Config
	gates   map[int]*gate.Gate
	clients map[int]*openai.Client
	closers []func() error

	mu  sync.Mutex
	out outcome
}

// newShare builds the Gates process proc runs, calling the provider at url.
func newShare(c Config, url string, proc int) (*share, error) {
	s := &share{c: c, gates: map[int]*gate.Gate{}, clients: map[int]*openai.Client{}}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	s.closers = append(s.closers, func() error { hc.CloseIdleConnections(); return nil })
	for k := range c.Gates {
		if k%c.procs() != proc {
			continue
		}
		rdb := newRedis(c.Redis)
		s.closers = append(s.closers, rdb.Close)
		g, err := gate.New(rdb, c.Gate)
		if err != nil {
			s.close()
			return nil, err
		}
		oc := openai.DefaultConfig("sk-limitstorm")
		oc.BaseURL = url
		oc.HTTPClient = &classify.Transport{Doer: hc}
		s.gates[k], s.clients[k] = g, openai.NewClientWithConfig(oc)
	}
	return s, nil
}

func newRedis(r Redis) redis.UniversalClient {
	if r.Cluster {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.Addrs})
	}
	return redis.NewClient(&redis.Options{Addr: r.Addrs[0]})
}

func (s *share) close() {
	for _, f := range s.closers {
		_ = f()
	}
}

// run runs this process's jobs, arriving after start, until each
// completed, failed, or was lost at the end of the drain.
func (s *share) run(ctx context.Context, start time.Time) outcome {
	end := start.Add(s.c.Arrivals + s.c.Drain)
	var wg sync.WaitGroup
	for _, j := range schedule(s.c) {
		g, ok := s.gates[j.gate(s.c)]
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.job(ctx, j, g, s.clients[j.gate(s.c)], start, end)
		}()
	}
	wg.Wait()
	return s.out
}

// job runs one job: it arrives, calls through its Gate, and retries when
// gate.RetryAfter says, until it completes, fails, or would wait past end.
func (s *share) job(ctx context.Context, j job, g *gate.Gate, cl *openai.Client, start, end time.Time) {
	answer, req := j.answers(s.c), j.request()
	s.note(func(o *outcome) { o.Jobs++ })
	if !sleep(ctx, time.Until(start.Add(j.at))) {
		s.note(func(o *outcome) { o.Lost++ })
		return
	}
	for {
		err := g.Do(ctx, j.key(), func(ctx context.Context, _ *gate.Lease) error {
			_, err := cl.CreateChatCompletion(ctx, req)
			// The provider decided at once; its answer takes a while.
			sleep(ctx, answer())
			return err
		})
		wait, ok := gate.RetryAfter(err)
		switch {
		case err == nil:
			now := time.Now()
			s.note(func(o *outcome) {
				o.Completed++
				if now.After(o.Last) {
					o.Last = now
				}
			})
			return
		case errors.Is(err, gate.ErrFailed):
			s.note(func(o *outcome) { o.Failed++ })
			return
		case !ok:
			s.note(func(o *outcome) {
				o.Errors++
				if o.FirstError == "" {
					o.FirstError = err.Error()
				}
			})
			wait = errorPause
		}
		if time.Now().Add(wait).After(end) || !sleep(ctx, wait) {
			s.note(func(o *outcome) { o.Lost++ })
			return
		}
	}
}

func (s *share) note(f func(*outcome)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.out)
}

// sleep waits d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
