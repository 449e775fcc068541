package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify/goopenai"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
)

// backupUpstream names the demo's second fake upstream.
const backupUpstream = "fake-backup"

// run serves the demo until ctx is cancelled, then shuts down gracefully:
// requests in flight (a slow model call included) finish and settle.
func run(ctx context.Context, cfg config, stdout io.Writer) error {
	rdb, redisDesc, closeRedis, err := connectRedis(ctx, cfg.RedisURL)
	if err != nil {
		return err
	}
	defer closeRedis()

	st := &stats{}
	oaCfg := openai.DefaultConfig(cfg.OpenAIKey)
	upstream, modelDesc := "openai", "OpenAI API, model "+cfg.Model
	model := cfg.Model
	if cfg.OpenAIBaseURL != "" {
		oaCfg.BaseURL = cfg.OpenAIBaseURL
		upstream, modelDesc = "openai-compatible", "model "+cfg.Model+" at "+cfg.OpenAIBaseURL
	}
	// The Transport keeps the retry hint headers (retry-after-ms) of failed
	// responses, which go-openai drops, so they reach the gate.
	oaCfg.HTTPClient = &goopenai.Transport{Doer: countingDoer{next: &http.Client{Timeout: 2 * time.Minute}, stats: st}}
	var fallbacks []string
	clients := map[string]*openai.Client{}
	if cfg.OpenAIKey == "" {
		fake := newFakeUpstream(cfg)
		base, stop, err := fake.start()
		if err != nil {
			return fmt.Errorf("fake upstream: %w", err)
		}
		defer func() { _ = stop(context.Background()) }()
		oaCfg.BaseURL = base
		upstream, modelDesc, model = "fake-openai", "built-in fake OpenAI-compatible upstream (set OPENAI_API_KEY for the real API)", "demo-model"
		if cfg.Backup {
			// The same fake behind another key: when the first key is
			// rate-limited or out of credits, jobs run on it.
			bbase, bstop, err := fake.start()
			if err != nil {
				return fmt.Errorf("fake backup upstream: %w", err)
			}
			defer func() { _ = bstop(context.Background()) }()
			bCfg := oaCfg
			bCfg.BaseURL = bbase
			clients[backupUpstream] = openai.NewClientWithConfig(bCfg)
			fallbacks = []string{backupUpstream}
			modelDesc += ", and a backup one"
		}
	}
	clients[upstream] = openai.NewClientWithConfig(oaCfg)
	fails := newFailures()
	obs := observers{st, fails}
	if cfg.observer != nil {
		obs = append(observers{cfg.observer}, obs...)
	}

	g, err := gate.New(rdb, gate.Options{
		Prefix:         "retrygate-demo",
		Lease:          cfg.Lease,
		Cooldown:       cfg.Cooldown,
		Backoff:        gate.Backoff{MaxAttempts: cfg.MaxAttempts, Max: cfg.MaxCooldown},
		Retention:      gate.Retention{Done: cfg.DoneTTL},
		Classify:       demoClassify,
		Observer:       obs,
		Upstream:       upstream,
		UpstreamPolicy: gate.UpstreamPolicy{Fallbacks: fallbacks, Cooldown: cfg.UpstreamCooldown, PauseTTL: cfg.UpstreamPause},
	})
	if err != nil {
		return err
	}
	var backup string
	if len(fallbacks) > 0 {
		backup = fallbacks[0]
	}
	a := &app{gate: g, primary: upstream, backup: backup, eval: &evaluator{clients: clients, model: model}, results: newResults(), failures: fails, stats: st,
		logf:     logTo(stdout),
		shutdown: make(chan struct{}), pageStreams: &httpmw.Streams{Max: maxPageStreams}, places: newPlaces()}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.routes(), ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(func() { close(a.shutdown) })
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	base := "http://" + ln.Addr().String()
	printBanner(stdout, base, redisDesc, modelDesc, cfg, upstream)
	if cfg.ready != nil {
		cfg.ready(base)
	}

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "\nshutting down: waiting for requests in flight…")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	// The successes Redis refused, which only this process remembers, are
	// written before it exits, so they do not run again.
	if err := g.Close(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

func printBanner(w io.Writer, base, redisDesc, modelDesc string, cfg config, upstream string) {
	fmt.Fprintf(w, `retrygate demo: open %s

  Redis:  %s
  Model:  %s
  Gate:   cooldown %v (doubling, max %v), lease %v, max attempts %d, upstream %q

Try:
  curl -i -X POST %[1]s/documents/supplier-contract/evaluate   # the model answers 429: cooling down
  curl -i -X POST %[1]s/documents/supplier-contract/evaluate   # refused at once: 429 + Retry-After, no model call
  curl -s %[1]s/documents/supplier-contract/retry-status
  curl -s %[1]s/api/stats

Ctrl+C stops the server.
`, base, redisDesc, modelDesc, cfg.Cooldown, cfg.MaxCooldown, cfg.Lease, cfg.MaxAttempts, upstream)
}
