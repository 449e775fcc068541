package stormtest

import (
	"errors"
	"syscall"
	"testing"
)

// RunWorker decodes its config, runs until SIGTERM, stops, and says how it
// ended in its exit code.
func TestRunWorker(t *testing.T) {
	type config struct{ Queue string }
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		raw       string
		startErr  error
		stopErr   error
		exp       int
		wantStart bool
	}{
		{name: "stopped by SIGTERM", raw: `{"Queue":"q"}`, exp: 0, wantStart: true},
		{name: "config not JSON", raw: `{`, exp: 2},
		{name: "start failed", raw: `{"Queue":"q"}`, startErr: boom, exp: 2, wantStart: true},
		{name: "stop failed", raw: `{"Queue":"q"}`, stopErr: boom, exp: 1, wantStart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg config
			started, stopped := false, false
			got := RunWorker(tc.raw, &cfg, func() (func() error, error) {
				started = true
				if cfg.Queue != "q" {
					t.Errorf("start saw config %+v, want the decoded one", cfg)
				}
				if tc.startErr != nil {
					return nil, tc.startErr
				}
				// The worker's own SIGTERM: RunWorker listens before start.
				if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				return func() error { stopped = true; return tc.stopErr }, nil
			})
			if got != tc.exp {
				t.Fatalf("exit code %d, want %d", got, tc.exp)
			}
			if started != tc.wantStart || stopped != (tc.wantStart && tc.startErr == nil) {
				t.Fatalf("started %v, stopped %v; want started %v and stopped after a start that succeeded", started, stopped, tc.wantStart)
			}
		})
	}
}
