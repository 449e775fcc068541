package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redistest"
)

// A hint the GET found stale is forgotten: once the job ran again, its
// calls are the acquire and the release, with no GET before them.
func TestStaleHintIsForgotten(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	names := &cmdNames{}
	rdb.AddHook(names)
	opts := gate.Options{Prefix: redistest.UniqueKey(t), Cooldown: time.Minute}
	g := newGate(t, rdb, opts)
	other := newGate(t, rdb, opts)
	ctx := context.Background()
	if err := g.Do(ctx, "warm-up", okFn); err != nil { // loads the scripts
		t.Fatal(err)
	}
	_ = failWith(t, g, "job", errTransient)
	blocked(t, g, "job") // noted
	if err := other.Reset(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	names.take()
	if err := g.Do(ctx, "job", okFn); err != nil {
		t.Fatalf("after a reset elsewhere: %v", err)
	}
	if got := names.take(); !equalNames(got, []string{"get", "evalsha", "evalsha"}) {
		t.Fatalf("first call after the reset sent %v, want the GET that finds it, the acquire and the release", got)
	}
	if err := g.Do(ctx, "job", okFn); err != nil {
		t.Fatal(err)
	}
	if got := names.take(); !equalNames(got, []string{"evalsha", "evalsha"}) {
		t.Fatalf("next call sent %v, want the acquire and the release alone", got)
	}
}
