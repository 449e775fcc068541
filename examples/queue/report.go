package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/retrygate/retrygate/gate"
)

// report says what the gate decided about a document when the worker
// never ran, or ran for the last time: a document submitted again after
// its summary is completed without a model call, and one the model cannot
// take is archived (asynq) or cancelled (River) with the reason. Without
// it the queue drops both without a word.
type report struct{ out io.Writer }

func (r report) Observe(_ context.Context, e gate.Event) {
	doc := strings.TrimPrefix(e.Job, "summarise:")
	switch {
	case e.Kind == gate.EventRefused && e.State == gate.Done:
		fmt.Fprintf(r.out, "%s: already summarised; this job completes without a model call\n", doc)
	case e.Kind == gate.EventRefused && e.State == gate.Failed:
		fmt.Fprintf(r.out, "%s: failed for good earlier (%s); this job is not run\n", doc, e.Reason)
	case e.Kind == gate.EventSettled && e.State == gate.Failed:
		fmt.Fprintf(r.out, "%s: cannot be summarised (%s); it will not be retried\n", doc, e.Reason)
	}
}
