package limitstorm

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// A seed fixes the storm: the same jobs at the same instants, in order of
// arrival, within the arrivals; another seed draws others.
func TestScheduleIsSeeded(t *testing.T) {
	c, err := Config{Seed: 7, Redis: Redis{Addrs: []string{"x"}}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	a, b := schedule(c), schedule(c)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("one seed drew two schedules")
	}
	// 2.5 × 1500 a minute for 2 s.
	if exp, got := 125, len(a); exp != got {
		t.Fatalf("exp %d jobs, got %d", exp, got)
	}
	// The first arrives alone at the start; the others once its answer
	// is back (60 ms at the default 40 ms latency).
	if a[0].At != 0 || a[1].At < 60*time.Millisecond {
		t.Fatalf("the first two jobs arrive at %v and %v", a[0].At, a[1].At)
	}
	for i, j := range a {
		if j.ID != i || j.At < 0 || j.At >= c.Arrivals || i > 0 && j.At < a[i-1].At {
			t.Fatalf("job %d: %+v", i, j)
		}
	}
	c.Seed = 8
	if reflect.DeepEqual(a, schedule(c)) {
		t.Fatal("seeds 7 and 8 drew the same schedule")
	}
}

// A worker gets every data field of the gate's options, so an option
// added later (the admission's switch) reaches it too.
func TestGateOptionsCrossToWorkers(t *testing.T) {
	o := gate.Options{Prefix: "p", Lease: 2 * time.Second, Upstream: "llm",
		UpstreamPolicy: gate.UpstreamPolicy{Fallbacks: []string{"b"}, Cooldown: time.Second, AllowedFails: -1}, Backoff: gate.Backoff{Max: 3 * time.Second, Jitter: -1}}
	raw, err := dataFields(o)
	if err != nil {
		t.Fatal(err)
	}
	var got gate.Options
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(o, got) {
		t.Fatalf("crossed as %+v, want %+v", got, o)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want []string
	}{
		{Config{}, []string{"Redis.Addrs"}},
		{Config{RPM: -1, Latency: -1, Dialect: 9, Redis: Redis{Addrs: []string{"x"}}}, []string{"RPM", "Latency", "Dialect"}},
		{Config{Gates: 2, Procs: 3, Redis: Redis{Addrs: []string{"x"}}}, []string{"Procs 3"}},
		{Config{Arrivals: 50 * time.Millisecond, Redis: Redis{Addrs: []string{"x"}}}, []string{"Arrivals 50ms"}},
		{Config{RPM: 1, Arrivals: time.Second, Redis: Redis{Addrs: []string{"x"}}}, []string{"none would arrive"}},
		{Config{Procs: 2, Gate: gate.Options{Classify: classify.Default}, Redis: Redis{Addrs: []string{"x"}}}, []string{"Classify"}},
		{Config{Window: -time.Second, Prompt: [2]int{-1, 5}, Redis: Redis{Addrs: []string{"x"}}}, []string{"Window", "Prompt"}},
		{Config{Prompt: [2]int{500, 300}, Redis: Redis{Addrs: []string{"x"}}}, []string{"Prompt [500 300]"}},
	} {
		_, err := tc.c.withDefaults()
		if !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%+v: got %v, want ErrInvalidConfig", tc.c, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q does not name %s", tc.c, err, w)
			}
		}
	}
}

func TestResultRatios(t *testing.T) {
	r := Result{Outcome: Outcome{Completed: 99}, Served: 99, Refused: 1, Allowed: 110}
	if r.RefusedShare() != 0.01 || r.Goodput() != 0.9 {
		t.Fatalf("share %v, goodput %v; want 0.01 and 0.9", r.RefusedShare(), r.Goodput())
	}
	if (Result{}).RefusedShare() != 0 || (Result{}).Goodput() != 0 {
		t.Fatal("an empty storm divides by zero")
	}
	// A job run twice is one job's goodput; tokens count where they bind.
	r = Result{Outcome: Outcome{Completed: 50, Tokens: 800}, Served: 60, Allowed: 100, AllowedTokens: 1000}
	if r.Goodput() != 0.8 {
		t.Fatalf("goodput %v, want the tokens' 0.8", r.Goodput())
	}
}

// bursts groups 429s no more than burstGap apart and says when the
// largest group began, from the drain.
func TestBursts(t *testing.T) {
	t0 := time.Now()
	ms := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Millisecond) }
	u := &upstream{drained: t0, refusal: []time.Time{ms(900), ms(10), ms(40), ms(1000), ms(930), ms(960), ms(20)}}
	if n, largest, at := u.bursts(); n != 2 || largest != 4 || at != 900*time.Millisecond {
		t.Fatalf("bursts: %d, largest %d at %v; want 2, largest 4 at 900ms", n, largest, at)
	}
}

// A storm's Window and Prompt shape its jobs: at 30 requests a 2 s window
// and 2.5 × that for 8 s, 300 jobs, each prompt within 300 to 500 tokens.
func TestWindowAndPrompt(t *testing.T) {
	c, err := Config{Window: 2 * time.Second, RPM: 30, Arrivals: 8 * time.Second, Prompt: [2]int{300, 500}, Redis: Redis{Addrs: []string{"x"}}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	jobs := schedule(c)
	if len(jobs) != 300 {
		t.Fatalf("%d jobs, want 300", len(jobs))
	}
	for _, j := range jobs {
		if j.chars < 300*charsPerToken || j.chars >= 500*charsPerToken {
			t.Fatalf("job %d: a prompt of %d characters, want 1,200 to 2,000", j.ID, j.chars)
		}
	}
}

// A traced storm prints its answers from the drain on, served and 429s
// per 100 ms (the answers before the drain are the drain's own); an
// untraced one prints nothing.
func TestTracePrintsAnswersPer100ms(t *testing.T) {
	t0 := time.Now()
	u := &upstream{drained: t0, tracing: true, trace: []answered{
		{t0.Add(-time.Millisecond), http.StatusTooManyRequests},
		{t0, http.StatusOK},
		{t0.Add(150 * time.Millisecond), http.StatusTooManyRequests},
		{t0.Add(199 * time.Millisecond), http.StatusTooManyRequests},
		{t0.Add(120 * time.Millisecond), http.StatusOK},
	}}
	var b strings.Builder
	u.printTrace(&b)
	exp := "TRACE   0.0s ok   1 429   0 \n" +
		"TRACE   0.1s ok   1 429   2 ##\n"
	if got := b.String(); got != exp {
		t.Fatalf("trace:\n%s\nwant:\n%s", got, exp)
	}
	u.tracing = false
	b.Reset()
	if u.printTrace(&b); b.Len() != 0 {
		t.Fatalf("untraced: %q, want nothing", b.String())
	}
}

// A window's demand is what it admitted, and what still waits at its end
// that arrived at least the lag before; its fair share is max-min among
// those demands.
func TestSharesCountsWhatWaitedAndWhatWasServed(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r := Result{Outcome: Outcome{Admissions: []Admission{
		// Part 0 floods: 6 admitted in the first second, 2 more after it
		// that arrived in time to be its demand.
		{0, ms(0), ms(100)}, {0, ms(0), ms(200)}, {0, ms(0), ms(300)}, {0, ms(0), ms(400)},
		{0, ms(0), ms(500)}, {0, ms(0), ms(600)}, {0, ms(100), ms(1100)}, {0, ms(100), ms(1200)},
		// Part 1: one admitted at once, although it arrived within the
		// lag of the end; one that arrived within the lag and waited past
		// the end (not its demand); one that arrived before the lag and
		// waited past the end (its demand, unserved).
		{1, ms(950), ms(960)}, {1, ms(900), ms(1300)}, {1, ms(500), ms(1400)},
	}}}
	got := r.Shares(time.Second, ms(200), 2)
	want := []Share{
		{Window: 0, Part: 0, Got: 6, Fair: 5, Demand: 8},
		{Window: 0, Part: 1, Got: 1, Fair: 2, Demand: 2},
		{Window: 1, Part: 0, Got: 2, Fair: 2, Demand: 2},
		{Window: 1, Part: 1, Got: 2, Fair: 2, Demand: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}
