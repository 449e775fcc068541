package limitstorm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/llmfake"
)

// Config shapes one storm. The zero value of a field means its documented
// default.
type Config struct {
	// Dialect is the provider imitated (default: llmfake.OpenAI).
	Dialect llmfake.Dialect
	// RPM is the provider's requests limit per Window (default: 1500, 25
	// calls a second at a minute's Window).
	RPM int64
	// TPM is its tokens limit per Window: OpenAI's counts each call's
	// prompt and max_tokens, Anthropic's the prompt (input tokens). 0 sets
	// it far above what the calls use, so the requests limit alone
	// refuses; the headers report it either way, as a real provider's
	// do. Anthropic's output-tokens limit is always far above.
	TPM int64
	// Window is the provider's limits' period: RPM and TPM count per
	// Window, and an emptied bucket is whole again after it (default: a
	// minute). A shorter one keeps a limit's size beside a call's while
	// its calls come many a second, as a test needs.
	Window time.Duration
	// Prompt is the range each job's prompt is drawn from, in tokens,
	// [Prompt[0], Prompt[1]) (default: 10 to 100).
	Prompt [2]int
	// MidwayRPM, when set, is the requests limit from the middle of the
	// arrivals on (Arrivals/2 after the storm starts): a limit that halves
	// or doubles midway. Result.Allowed counts the limit in force.
	MidwayRPM int64
	// DeclareTokens: each call says its tokens (gate.WithTokens), the
	// precise form; false is the default wiring, which says nothing.
	DeclareTokens bool
	// Gates is how many Gates share the upstream (default: 4).
	Gates int
	// Procs is how many worker processes the Gates are spread over, Gate
	// k in process k mod Procs; 0 or 1 runs them in this process.
	Procs int
	// Offer is the offered load ÷ the limit: jobs arrive at Offer × RPM a
	// minute (default: 2.5).
	Offer float64
	// Arrivals is how long jobs arrive for (default: 2s).
	Arrivals time.Duration
	// Drain is how long after the arrivals end a job may still complete;
	// a job not completed by then, or told to wait past it, is lost
	// (default: 4 × Arrivals, at least 10s: time for the backlog at Offer
	// 2.5, and for a few of the reactive gate's 2 s waits in a row).
	Drain time.Duration
	// Latency is a call's mean answer time: each call's is drawn from
	// [Latency/2, 3·Latency/2) after the provider decided on it
	// (default: 40ms).
	Latency time.Duration
	// Seed draws the arrivals, the prompts and the answer times.
	Seed uint64
	// Parts, when set, split the jobs among callers of classes and
	// tenants (gate.WithPriority, gate.WithTenant), each arriving at its
	// own Offer × RPM a minute; Offer is then their sum. Set Gate.Wait
	// for the jobs to wait in line for their turn.
	Parts []Part
	// Faults happen during the storm, each At after its start: a worker
	// process killed (KillWorker: worker 0, whose jobs are then counted
	// as Killed), or Do run in this process (a Redis restarted).
	Faults []Fault `json:"-"`

	// Redis is the server or cluster the Gates share.
	Redis Redis
	// Gate is every Gate's options: without Upstream the Gates share
	// gate.DefaultUpstream under their Prefix, as the Quickstart's wiring
	// does; Prefix must be unique to the storm. With Procs ≥ 2 the
	// options cross to the workers as data: Classify and Observer must be
	// nil.
	Gate gate.Options `json:"-"`

	// Through, when set, runs the jobs instead of Gates in this process:
	// a queue adapter's storm, whose workers call Storm.Call under their
	// own Gates. It returns when every job completed, failed or was lost
	// (Storm.End). Gates, Procs, Redis and Gate are then unused.
	Through func(ctx context.Context, s *Storm) Outcome `json:"-"`
}

// Part is a share of a storm's jobs: their class, their tenant, and how
// fast they arrive.
type Part struct {
	Priority gate.Priority
	Tenant   string
	Offer    float64 // × RPM a minute
}

// Fault is something that happens during a storm.
type Fault struct {
	At         time.Duration
	KillWorker bool
	Do         func()
}

// Redis addresses the Redis the Gates share: each Gate connects on its
// own, as separate processes would.
type Redis struct {
	Addrs   []string
	Cluster bool // a cluster: Addrs are its seed nodes
}

// Defaults.
const (
	defaultRPM      = 1500
	defaultGates    = 4
	defaultOffer    = 2.5
	defaultArrivals = 2 * time.Second
	defaultLatency  = 40 * time.Millisecond
	// drainArrivals is Drain's default in Arrivals, at least minDrain.
	drainArrivals = 4
	minDrain      = 10 * time.Second
)

// Job sizes: a prompt of promptChars (4 characters a token at the
// provider) and a max_tokens of maxTokens, each drawn uniformly.
var (
	promptChars = [2]int{40, 400}
	maxTokens   = [2]int{16, 128}
)

// charsPerToken is the provider's estimate of a prompt's tokens: "one
// token generally corresponds to ~4 characters of text"
// (https://platform.openai.com/tokenizer), as llmfake counts them.
const charsPerToken = 4

// ampleTokens sets a token limit that never refuses: this many tokens a
// request, far above the largest call's.
const ampleTokens = 2000

// tpm is the provider's tokens-per-minute limit.
func (c Config) tpm() int64 {
	if c.TPM != 0 {
		return c.TPM
	}
	return c.RPM * ampleTokens
}

// ErrInvalidConfig is matched by the error Run returns for a bad Config;
// its text names every bad field.
var ErrInvalidConfig = errors.New("limitstorm: invalid config")

// withDefaults validates c and fills its zero fields.
func (c Config) withDefaults() (Config, error) {
	var bad []error
	if c.Dialect > llmfake.NoHeaders {
		bad = append(bad, fmt.Errorf("Dialect %d is unknown", c.Dialect))
	}
	for _, f := range []struct {
		name string
		neg  bool
	}{
		{"RPM", c.RPM < 0}, {"TPM", c.TPM < 0}, {"MidwayRPM", c.MidwayRPM < 0}, {"Gates", c.Gates < 0}, {"Procs", c.Procs < 0}, {"Offer", c.Offer < 0},
		{"Arrivals", c.Arrivals < 0}, {"Drain", c.Drain < 0}, {"Latency", c.Latency < 0}, {"Window", c.Window < 0},
		{"Prompt", c.Prompt[0] < 0 || c.Prompt[1] < 0},
	} {
		if f.neg {
			bad = append(bad, fmt.Errorf("%s is negative", f.name))
		}
	}
	if c.RPM == 0 {
		c.RPM = defaultRPM
	}
	if c.Window == 0 {
		c.Window = time.Minute
	}
	if c.Prompt != [2]int{} && c.Prompt[1] <= c.Prompt[0] {
		bad = append(bad, fmt.Errorf("Prompt %v is not a range [low, high)", c.Prompt))
	}
	if c.Gates == 0 {
		c.Gates = defaultGates
	}
	if len(c.Parts) > 0 {
		c.Offer = 0
		for _, p := range c.Parts {
			if p.Offer <= 0 {
				bad = append(bad, fmt.Errorf("Parts: %q's Offer is not positive", p.Tenant))
			}
			c.Offer += p.Offer
		}
	}
	if c.Offer == 0 {
		c.Offer = defaultOffer
	}
	if c.Arrivals == 0 {
		c.Arrivals = defaultArrivals
	}
	if c.Drain == 0 {
		c.Drain = max(drainArrivals*c.Arrivals, minDrain)
	}
	if c.Latency == 0 {
		c.Latency = defaultLatency
	}
	if c.Arrivals <= c.lead() {
		bad = append(bad, fmt.Errorf("Arrivals %v is not longer than 3/2 Latency, %v", c.Arrivals, c.lead()))
	}
	if n := c.Offer * float64(c.RPM) * c.windows(c.Arrivals); n < 1 {
		bad = append(bad, fmt.Errorf("Offer × RPM × Arrivals is %.2f jobs: none would arrive", n))
	}
	if c.Procs > c.Gates {
		bad = append(bad, fmt.Errorf("Procs %d is more than Gates %d: a process would have none", c.Procs, c.Gates))
	}
	if len(c.Redis.Addrs) == 0 && c.Through == nil {
		bad = append(bad, errors.New("Redis.Addrs is empty"))
	}
	for _, f := range c.Faults {
		if f.KillWorker && c.Procs < 2 {
			bad = append(bad, errors.New("Faults: a worker killed needs Procs ≥ 2"))
		}
	}
	if c.Procs >= 2 && (c.Gate.Classify != nil || c.Gate.Observer != nil) {
		bad = append(bad, errors.New("Gate.Classify and Gate.Observer cannot cross to worker processes (Procs ≥ 2)"))
	}
	if err := errors.Join(bad...); err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

// windows is d in Windows.
func (c Config) windows(d time.Duration) float64 { return float64(d) / float64(c.Window) }

// promptChars is the range a job's prompt length is drawn from.
func (c Config) promptChars() [2]int {
	if c.Prompt == [2]int{} {
		return promptChars
	}
	return [2]int{c.Prompt[0] * charsPerToken, c.Prompt[1] * charsPerToken}
}

// midway is when the requests limit becomes MidwayRPM, from the start of
// the storm.
func (c Config) midway() time.Duration { return c.Arrivals / 2 }

// allowed is how many calls the requests limit allowed in the first d of
// the storm: RPM a Window, and MidwayRPM from midway on when set.
func (c Config) allowed(d time.Duration) float64 {
	if c.MidwayRPM == 0 || d <= c.midway() {
		return float64(c.RPM) * c.windows(d)
	}
	return float64(c.RPM)*c.windows(c.midway()) + float64(c.MidwayRPM)*c.windows(d-c.midway())
}

// procs is the number of processes that run Gates: 1 for this one.
func (c Config) procs() int { return max(c.Procs, 1) }
