package limitstorm

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/internal/testkit/llmfake"
)

// upstream is the provider every Gate of a storm calls, over loopback
// HTTP: an llmfake.Provider that notes when it refused.
type upstream struct {
	p   *llmfake.Provider
	srv *httptest.Server

	dialect llmfake.Dialect
	tokens  bool // the token limit binds: drain it too

	drained time.Time     // when the storm started: the buckets were empty
	base    llmfake.Stats // the answers before

	// The requests limit becomes midwayRPM midwayAt after the drain
	// (Config.MidwayRPM; 0: never), by the midway timer.
	midwayRPM int64
	midwayAt  time.Duration
	midway    *time.Timer

	mu      sync.Mutex
	refusal []time.Time // when each 429 of the storm was sent
	tracing bool        // traceEnv is set
	trace   []answered  // every answer, when tracing
}

// traceEnv, set to anything, makes Run print each storm's answers to
// stderr, served and 429s per 100 ms from the drain on, where a
// storm's 429s came from is read (the storm's start, a probe's end); a
// test may print what the gates held beside it (TestStormNoHeaders
// prints the learned rate's fields as they change).
const traceEnv = "LIMITSTORM_TRACE"

// Tracing reports whether traceEnv is set.
func Tracing() bool { return os.Getenv(traceEnv) != "" }

// answered is one answer of the provider: when, and its status.
type answered struct {
	at     time.Time
	status int
}

// printTrace prints the answers since the drain to w, 100 ms a line,
// when tracing.
func (u *upstream) printTrace(w io.Writer) {
	if !u.tracing {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	type cell struct{ ok, refused int }
	var cells []cell
	for _, a := range u.trace {
		if a.at.Before(u.drained) {
			continue
		}
		i := int(a.at.Sub(u.drained) / (100 * time.Millisecond))
		for len(cells) <= i {
			cells = append(cells, cell{})
		}
		if a.status == http.StatusTooManyRequests {
			cells[i].refused++
		} else {
			cells[i].ok++
		}
	}
	for i, c := range cells {
		fmt.Fprintf(w, "TRACE %5.1fs ok %3d 429 %3d %s\n", float64(i)/10, c.ok, c.refused, strings.Repeat("#", c.refused))
	}
}

func newUpstream(c Config) (*upstream, error) {
	p, err := llmfake.New(llmfake.Config{Dialect: c.Dialect, RPM: c.RPM, TPM: c.tpm(), OutputTPM: c.RPM * ampleTokens, Window: c.Window})
	if err != nil {
		return nil, err
	}
	u := &upstream{p: p, dialect: c.Dialect, tokens: c.TPM != 0, midwayRPM: c.MidwayRPM, midwayAt: c.midway(), tracing: Tracing()}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	return u, nil
}

func (u *upstream) url() string { return u.srv.URL + "/v1" }

func (u *upstream) close() {
	if u.midway != nil {
		u.midway.Stop()
	}
	u.srv.Close()
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	u.p.ServeHTTP(sw, r)
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tracing {
		u.trace = append(u.trace, answered{now, sw.status})
	}
	if sw.status == http.StatusTooManyRequests {
		u.refusal = append(u.refusal, now)
	}
}

// drain empties the provider's requests bucket (and its tokens bucket,
// when Config.TPM set it), reading what is left from its headers, so the
// storm starts at the limit, and starts the storm's count.
func (u *upstream) drain() {
	if u.dialect == llmfake.NoHeaders {
		// It says nothing: call until it refuses.
		for u.drainCall(0).Code != http.StatusTooManyRequests {
		}
		u.started()
		return
	}
	h := u.drainCall(0).Header()
	for {
		b, _ := classify.ParseBudget(h, time.Now())
		switch {
		case b.Requests.Remaining == 0:
			u.started()
			return
		case u.tokens && b.Tokens.Remaining > 0:
			h = u.drainCall(b.Tokens.Remaining).Header()
		default:
			h = u.drainCall(0).Header()
		}
	}
}

// started starts the storm's count, the buckets just drained, and the
// change of the requests limit midway (Config.MidwayRPM).
func (u *upstream) started() {
	u.base, u.drained = u.p.Stats(), time.Now()
	u.mu.Lock()
	u.refusal = nil
	u.mu.Unlock()
	if u.midwayRPM > 0 {
		u.midway = time.AfterFunc(time.Until(u.drained.Add(u.midwayAt)), func() { u.p.SetRPM(u.midwayRPM) })
	}
}

// drainCall sends the provider a call of n tokens on its token limit and
// returns its answer.
func (u *upstream) drainCall(n int64) *httptest.ResponseRecorder {
	body := fmt.Sprintf(`{"model":"drain","messages":[],"max_tokens":%d}`, n)
	if u.dialect == llmfake.Anthropic { // its token limit counts input tokens
		body = fmt.Sprintf(`{"model":"drain","messages":[{"role":"user","content":"%s"}],"max_tokens":0}`, strings.Repeat("x", int(n)*charsPerToken))
	}
	w := httptest.NewRecorder()
	u.p.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
	return w
}

// stats are the provider's answers since the drain.
func (u *upstream) stats() llmfake.Stats {
	s := u.p.Stats()
	return llmfake.Stats{Served: s.Served - u.base.Served, Refused: s.Refused - u.base.Refused}
}

// burstGap is the longest gap between two 429s of one burst: the calls
// sent while the first 429 of a burst travelled back.
const burstGap = 50 * time.Millisecond

// bursts counts the storm's bursts of 429s and the largest, and when it
// began, from the drain.
func (u *upstream) bursts() (n, largest int, largestAt time.Duration) {
	u.mu.Lock()
	at := slices.SortedFunc(slices.Values(u.refusal), time.Time.Compare)
	u.mu.Unlock()
	size, began := 0, time.Time{}
	for i := range at {
		if i == 0 || at[i].Sub(at[i-1]) > burstGap {
			n, size, began = n+1, 0, at[i]
		}
		size++
		if size > largest {
			largest, largestAt = size, began.Sub(u.drained)
		}
	}
	return n, largest, largestAt
}

// statusWriter notes the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
