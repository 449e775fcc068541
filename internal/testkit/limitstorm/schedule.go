package limitstorm

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify/goopenai"
	"github.com/retrygate/retrygate/internal/testkit/llmfake"
)

// Job is one job of a storm.
type Job struct {
	ID int
	// At is when the job arrives, after the storm's start.
	At time.Duration

	// Part is the job's index in Config.Parts (0 without).
	Part int

	chars     int // the prompt's length
	maxTokens int
}

// tokens is what the job's call counts against the provider's token
// limit as llmfake charges it: its prompt at charsPerToken (rounded up)
// and, for OpenAI (and llmfake.NoHeaders, OpenAI-compatible), whose one
// limit counts input and output, its max_tokens, charged up front
// (Cerebras documents the same; Anthropic keeps output tokens on a limit
// of their own).
func (j Job) tokens(d llmfake.Dialect) int64 {
	n := int64((j.chars + charsPerToken - 1) / charsPerToken)
	if d != llmfake.Anthropic {
		n += int64(j.maxTokens)
	}
	return n
}

// Key is the job's gate key.
func (j Job) Key() string { return "job-" + strconv.Itoa(j.ID) }

// Storm is a storm's jobs and the call each makes. Run builds it; a
// Config.Through gets it to run the jobs through a queue.
type Storm struct {
	// Jobs are the jobs in order of arrival; Jobs[i].ID is i.
	Jobs []Job
	// Start is when the storm started (the provider's bucket just
	// drained): a job arrives at Start + At.
	Start time.Time
	// End is the end of the drain: a job not completed by then is lost.
	End time.Time

	dialect llmfake.Dialect
	client  *openai.Client
	http    *http.Client
	answers []*answers
	served  []atomic.Bool // the job's call was served once
	tokens  atomic.Int64  // on the token limit, of the jobs served
}

// schedule draws a storm's jobs from c.Seed: Offer × RPM a minute for
// Arrivals, in order of arrival. The first arrives at the start, alone:
// the others come from lead on, when its answer is back at the latest, at
// uniformly drawn instants (a Poisson process of that rate, given the
// count). A system that has been at the limit has heard the provider's
// headers; the lone first call stands for that, so a gate that reads them
// is not judged on the calls sent before any answer came back.
func schedule(c Config) []Job {
	rng := rand.New(rand.NewPCG(c.Seed, 1))
	parts := []float64{c.Offer}
	if len(c.Parts) > 0 {
		parts = parts[:0]
		for _, p := range c.Parts {
			parts = append(parts, p.Offer)
		}
	}
	var jobs []Job
	chars := c.promptChars()
	lead := c.lead()
	for part, offer := range parts {
		for range int(math.Round(offer * float64(c.RPM) * c.windows(c.Arrivals))) {
			jobs = append(jobs, Job{
				At:        lead + time.Duration(rng.Int64N(int64(c.Arrivals-lead))),
				Part:      part,
				chars:     chars[0] + rng.IntN(chars[1]-chars[0]),
				maxTokens: maxTokens[0] + rng.IntN(maxTokens[1]-maxTokens[0]),
			})
		}
	}
	slices.SortStableFunc(jobs, func(a, b Job) int { return int(a.At - b.At) })
	for i := range jobs {
		jobs[i].ID = i
	}
	if len(jobs) > 0 {
		jobs[0].At = 0
	}
	return jobs
}

// lead is when the jobs after the first start to arrive: the longest
// answer time.
func (c Config) lead() time.Duration { return c.Latency * 3 / 2 }

// firstFits is how long after the provider's buckets were drained its
// first call fits: the refill of one request, and of the call's tokens.
func (c Config) firstFits(j Job) time.Duration {
	return max(c.Window/time.Duration(c.RPM), c.Window*time.Duration(j.tokens(c.Dialect))/time.Duration(c.tpm())) + time.Millisecond
}

// newStorm is the storm of c, calling the provider at url.
func newStorm(c Config, url string) *Storm {
	s := &Storm{Jobs: schedule(c), dialect: c.Dialect, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	s.served = make([]atomic.Bool, len(s.Jobs))
	for i := range s.Jobs {
		s.answers = append(s.answers, &answers{rng: rand.New(rand.NewPCG(c.Seed, uint64(i)+2)), latency: c.Latency})
	}
	oc := openai.DefaultConfig("sk-limitstorm")
	oc.BaseURL = url
	oc.HTTPClient = &goopenai.Transport{Doer: s.http}
	s.client = openai.NewClientWithConfig(oc)
	return s
}

// begin sets the storm's start and the end of its drain.
func (s *Storm) begin(c Config, start time.Time) {
	s.Start, s.End = start, start.Add(c.Arrivals+c.Drain)
}

func (s *Storm) close() { s.http.CloseIdleConnections() }

// Call makes job id's model call, as a worker would: go-openai's chat
// completion through goopenai.Transport, then the answer's time (the
// provider decided at once; its answer takes a while). The error is
// go-openai's, for the gate to classify.
func (s *Storm) Call(ctx context.Context, id int) error {
	j := s.Jobs[id]
	_, err := s.client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model:     "gpt-4o-mini",
		Messages:  []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: strings.Repeat("x", j.chars)}},
		MaxTokens: j.maxTokens,
	})
	if err == nil && !s.served[id].Swap(true) {
		s.tokens.Add(j.tokens(s.dialect))
	}
	sleep(ctx, s.answers[id].next())
	return err
}

// answers draws one job's answer times from a source of its own, so they
// do not depend on how the jobs interleave.
type answers struct {
	latency time.Duration
	mu      sync.Mutex
	rng     *rand.Rand
}

// next is the next call's answer time, in [latency/2, 3·latency/2).
func (a *answers) next() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.latency/2 + time.Duration(a.rng.Int64N(int64(a.latency)))
}
