package main

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateriver"
)

// summariseArgs is the River job for one document.
type summariseArgs struct {
	Doc string `json:"doc"`
}

func (summariseArgs) Kind() string { return "summarise" }

type summariseWorker struct {
	river.WorkerDefaults[summariseArgs]
	client *openai.Client
	save   saveFunc
}

func (w *summariseWorker) Work(ctx context.Context, job *river.Job[summariseArgs]) error {
	summary, err := summarise(ctx, w.client, job.Args.Doc)
	if err != nil {
		return err
	}
	return w.save(ctx, job.Args.Doc, summary)
}

// jobDocument keys the gate by document, so two jobs for one document
// share its lock, cooldown and failed mark.
func jobDocument(_ context.Context, job *rivertype.JobRow) (string, error) {
	var a summariseArgs
	if err := json.Unmarshal(job.EncodedArgs, &a); err != nil {
		return "", err
	}
	return "summarise:" + a.Doc, nil
}

// riverClient is a River client whose jobs run under g.
func riverClient(pool *pgxpool.Pool, cfg *river.Config, g *gate.Gate, client *openai.Client, save saveFunc) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &summariseWorker{client: client, save: save})
	cfg.Workers = workers
	cfg.Middleware = append(cfg.Middleware, gateriver.New(g, gateriver.Options{Job: jobDocument}))
	return river.NewClient(riverpgxv5.New(pool), cfg)
}
