package persistence

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// replyErr is an error reply from Redis, as go-redis returns them.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// server answers CONFIG GET from config (or with configErr) and INFO
// persistence with info (or infoErr).
type server struct {
	config    map[string]string
	configErr error
	info      string
	infoErr   error
}

func (s server) ConfigGet(_ context.Context, p string) *redis.MapStringStringCmd {
	v, ok := s.config[p]
	m := map[string]string{}
	if ok {
		m[p] = v
	}
	return redis.NewMapStringStringResult(m, s.configErr)
}

func (s server) Info(context.Context, ...string) *redis.StringCmd {
	return redis.NewStringResult(s.info, s.infoErr)
}

var (
	noperm  = replyErr("NOPERM User gate has no permissions to run the 'config|get' command")
	unknown = replyErr("ERR unknown command 'info'")
)

// INFO persistence as redis-server 7.0.15 answers it (`redis-cli INFO
// persistence` with appendonly no, and yes), cut to its first lines and
// the AOF's; the lines between are counters Read does not look at.
const (
	infoAOFOn  = "# Persistence\r\nloading:0\r\nasync_loading:0\r\naof_enabled:1\r\naof_rewrite_in_progress:0\r\n"
	infoAOFOff = "# Persistence\r\nloading:0\r\nasync_loading:0\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\n"
)

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       server
		none    bool
		unknown string // a word the note must hold, "" for none
	}{
		{"nothing", server{config: map[string]string{"appendonly": "no", "save": ""}}, true, ""},
		{"aof", server{config: map[string]string{"appendonly": "yes", "save": ""}}, false, ""},
		{"rdb", server{config: map[string]string{"appendonly": "no", "save": "3600 1 300 100"}}, false, ""},
		{"config refused, aof on", server{configErr: noperm, info: infoAOFOn}, false, ""},
		{"config refused, aof off", server{configErr: noperm, info: infoAOFOff}, false, "RDB save schedule"},
		{"both refused", server{configErr: noperm, infoErr: unknown}, false, "persistence settings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Read(context.Background(), tc.s, "10.0.0.7:6379")
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if f.None != tc.none {
				t.Errorf("None: %v, want %v", f.None, tc.none)
			}
			if (f.Unknown == "") != (tc.unknown == "") || !strings.Contains(f.Unknown, tc.unknown) {
				t.Errorf("Unknown: %q, want one holding %q", f.Unknown, tc.unknown)
			}
			if tc.none && !strings.Contains(f.Warning(), "on 10.0.0.7:6379") {
				t.Errorf("Warning %q does not name the server", f.Warning())
			}
		})
	}
}

// A network failure is an error, never a finding.
func TestReadUnreachable(t *testing.T) {
	down := errors.New("dial tcp 10.0.0.7:6379: connect: connection refused")
	for _, s := range []server{{configErr: down}, {configErr: noperm, infoErr: down}} {
		if _, err := Read(context.Background(), s, ""); !errors.Is(err, down) {
			t.Errorf("Read: %v, want the network error", err)
		}
	}
}
