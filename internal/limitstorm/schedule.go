package limitstorm

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// job is one job of the storm: when it arrives and the call it makes.
type job struct {
	id        int
	at        time.Duration // after the start
	chars     int           // the prompt's length
	maxTokens int
}

// schedule draws the storm's jobs from c.Seed: Offer × RPM a minute for
// Arrivals, at uniformly drawn instants (a Poisson process of that rate,
// given the count), in order of arrival.
func schedule(c Config) []job {
	rng := rand.New(rand.NewPCG(c.Seed, 1))
	n := int(math.Round(c.Offer * float64(c.RPM) * c.Arrivals.Minutes()))
	jobs := make([]job, n)
	for i := range jobs {
		jobs[i] = job{
			at:        time.Duration(rng.Int64N(int64(c.Arrivals))),
			chars:     promptChars[0] + rng.IntN(promptChars[1]-promptChars[0]),
			maxTokens: maxTokens[0] + rng.IntN(maxTokens[1]-maxTokens[0]),
		}
	}
	slices.SortStableFunc(jobs, func(a, b job) int { return int(a.at - b.at) })
	for i := range jobs {
		jobs[i].id = i
	}
	return jobs
}

// key is the job's gate key.
func (j job) key() string { return "job-" + strconv.Itoa(j.id) }

// gate is the index of the Gate that runs the job.
func (j job) gate(c Config) int { return j.id % c.Gates }

// answers draws the job's answer times: one per call, from a source of
// its own, so they do not depend on how the jobs interleave.
func (j job) answers(c Config) func() time.Duration {
	rng := rand.New(rand.NewPCG(c.Seed, uint64(j.id)+2))
	return func() time.Duration { return c.Latency/2 + time.Duration(rng.Int64N(int64(c.Latency))) }
}

// request is the job's chat completion request.
func (j job) request() openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:     "gpt-4o-mini",
		Messages:  []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: strings.Repeat("x", j.chars)}},
		MaxTokens: j.maxTokens,
	}
}
