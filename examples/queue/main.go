package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify/goopenai"
	"github.com/retrygate/retrygate/gate"
)

func main() {
	queue := flag.String("queue", "asynq", "asynq or river")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *queue, os.Getenv, flag.Args(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run enqueues docs and works the queue until ctx ends, saying on out
// what became of each document.
func run(ctx context.Context, queue string, getenv func(string) string, docs []string, out io.Writer) (err error) {
	redisURL := getenv("REDIS_URL")
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	g, err := gate.New(rdb, gate.Options{Upstream: "openai", Retention: gate.Retention{Done: 24 * time.Hour}, Observer: report{out}})
	if err != nil {
		return err
	}
	defer func() {
		// After the workers stop: the successes Redis refused, which only
		// this process remembers, are written before it exits.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if cerr := g.Close(cctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	cfg := openai.DefaultConfig(getenv("OPENAI_API_KEY"))
	if base := getenv("OPENAI_BASE_URL"); base != "" {
		cfg.BaseURL = base
	}
	cfg.HTTPClient = &goopenai.Transport{Doer: cfg.HTTPClient} // keeps retry-after headers
	client := openai.NewClientWithConfig(cfg)
	save := func(_ context.Context, doc, summary string) error {
		fmt.Fprintf(out, "%s: %s\n", doc, summary)
		return nil
	}

	switch queue {
	case "asynq":
		conn, err := asynq.ParseRedisURI(redisURL)
		if err != nil {
			return err
		}
		enq := asynq.NewClient(conn)
		defer enq.Close()
		for _, doc := range docs {
			if _, err := enq.EnqueueContext(ctx, summariseTask(doc)); err != nil {
				return err
			}
		}
		srv, mux := asynqServer(conn, asynq.Config{Concurrency: 10}, g, client, save)
		if err := srv.Start(mux); err != nil {
			return err
		}
		<-ctx.Done()
		srv.Shutdown()
		return nil
	case "river":
		pool, err := pgxpool.New(ctx, getenv("DATABASE_URL"))
		if err != nil {
			return fmt.Errorf("DATABASE_URL: %w", err)
		}
		defer pool.Close()
		migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
		if err != nil {
			return err
		}
		if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return err
		}
		rc, err := riverClient(pool, &river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}}}, g, client, save)
		if err != nil {
			return err
		}
		for _, doc := range docs {
			if _, err := rc.Insert(ctx, summariseArgs{Doc: doc}, nil); err != nil {
				return err
			}
		}
		if err := rc.Start(ctx); err != nil {
			return err
		}
		<-ctx.Done()
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return rc.Stop(stopCtx)
	}
	return errors.New("-queue: want asynq or river, got " + queue)
}
