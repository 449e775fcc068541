package llmfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Dialect is the provider a Provider imitates.
type Dialect uint8

const (
	// OpenAI answers as OpenAI's chat completions API (and Azure, Groq and
	// the other OpenAI-compatible providers) does.
	OpenAI Dialect = iota
	// Anthropic answers as Anthropic's Messages API does.
	Anthropic
	// NoHeaders answers as an OpenAI-compatible endpoint that reports
	// nothing of its limits: no rate-limit header on any answer, and a 429
	// that states no wait (Vertex AI's and Gemini's OpenAI-compatible
	// endpoints, Bedrock, most self-hosted servers).
	NoHeaders
)

// Config sets a Provider's limits and clock. A zero limit is no limit.
type Config struct {
	// Dialect is the provider imitated (default: OpenAI).
	Dialect Dialect
	// RPM is the requests-per-minute limit.
	RPM int64
	// TPM is the tokens-per-minute limit: OpenAI's tokens (input and
	// output together), Anthropic's input tokens.
	TPM int64
	// OutputTPM is Anthropic's output-tokens-per-minute limit; OpenAI has
	// none and ignores it.
	OutputTPM int64
	// Window is how long each limit takes to refill from empty, the period
	// RPM, TPM and OutputTPM count (default: a minute). A shorter window
	// keeps a limit's size beside a call's (12,000 tokens, calls of 470)
	// while its calls come many a second, as a test needs.
	Window time.Duration
	// Now is the clock (default: time.Now).
	Now func() time.Time
}

// Stats counts a Provider's answers.
type Stats struct {
	// Served is the calls answered 200.
	Served int64
	// Refused is the calls answered 429.
	Refused int64
}

// Provider is a fake LLM API enforcing Config's limits; see the package doc.
type Provider struct {
	dialect Dialect
	now     func() time.Time

	mu       sync.Mutex
	requests bucket
	tokens   bucket // OpenAI: all tokens; Anthropic: input tokens
	output   bucket // Anthropic's output tokens
	stats    Stats
}

// New returns a Provider with full buckets. It fails, naming every bad
// field, when a limit is negative or the dialect unknown.
func New(c Config) (*Provider, error) {
	var errs []error
	if c.Dialect > NoHeaders {
		errs = append(errs, fmt.Errorf("llmfake: Dialect %d is unknown", c.Dialect))
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"RPM", c.RPM}, {"TPM", c.TPM}, {"OutputTPM", c.OutputTPM}, {"Window", int64(c.Window)}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("llmfake: %s is %d, below zero", f.name, f.v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	now := c.Now
	if now == nil {
		now = time.Now
	}
	p := &Provider{dialect: c.Dialect, now: now, requests: bucket{limit: c.RPM, window: c.Window}, tokens: bucket{limit: c.TPM, window: c.Window}}
	if c.Dialect == Anthropic {
		p.output = bucket{limit: c.OutputTPM, window: c.Window}
	}
	return p, nil
}

// SetRPM changes the requests-per-minute limit from now on, as a provider
// that changes a key's tier does: what the bucket holds stays (up to the
// new limit) and refills at the new rate. A zero or negative rpm is
// ignored.
func (p *Provider) SetRPM(rpm int64) {
	if rpm <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	held := min(p.requests.remaining(now), rpm)
	w := p.requests.window
	p.requests = bucket{limit: rpm, window: w, whole: now.Add(refill(rpm-held, rpm, true, p.requests.period()))}
}

// Stats returns the answers so far.
func (p *Provider) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// maxBody bounds the request body read.
const maxBody = 10 << 20

// ServeHTTP answers one call: admitted calls get a short completion, the
// others a 429; both carry the rate-limit headers after the call.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	var c cost
	if err == nil {
		c, err = parseCost(body)
	}
	if err != nil {
		p.badRequest(w, err)
		return
	}
	a := p.admit(c)
	w.Header().Set("Date", a.now.UTC().Format(http.TimeFormat))
	p.writeHeaders(w.Header(), a)
	if a.refused {
		p.writeRefusal(w, a)
		return
	}
	p.writeCompletion(w, c)
}

// answer is the decision on one call and the buckets right after it.
type answer struct {
	now      time.Time
	cost     cost
	refused  bool
	tooLarge bool          // the call exceeds a token limit and can never fit
	limit    string        // refused: the limit in the way, "requests" or "tokens" (Anthropic: "input_tokens", "output_tokens")
	wait     time.Duration // refused: until the call fits

	// The buckets right after the call.
	requests, tokens, output bucket
}

// admit decides on a call of cost c now and takes its units when it fits.
func (p *Provider) admit(c cost) answer {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	toks, outs := c.input+c.output, int64(0)
	if p.dialect == Anthropic {
		toks, outs = c.input, c.output
	}
	a := answer{now: now, cost: c}
	if p.tokens.limit != 0 && toks > p.tokens.limit || p.output.limit != 0 && outs > p.output.limit {
		a.refused, a.tooLarge, a.limit = true, true, "tokens"
	} else {
		for _, need := range []struct {
			name string
			b    *bucket
			n    int64
		}{{"requests", &p.requests, 1}, {p.tokenName(), &p.tokens, toks}, {"output_tokens", &p.output, outs}} {
			if w := need.b.wait(now, need.n); w > a.wait {
				a.refused, a.limit, a.wait = true, need.name, w
			}
		}
	}
	switch {
	case !a.refused:
		p.requests.take(now, 1)
		p.tokens.take(now, toks)
		p.output.take(now, outs)
		p.stats.Served++
	default:
		// OpenAI: "unsuccessful requests contribute to your per-minute
		// limit" (rate-limits guide, error mitigation); a bucket never
		// goes below empty. A refusal for tokens may now wait for a request.
		if p.dialect == OpenAI && p.requests.wait(now, 1) == 0 {
			p.requests.take(now, 1)
			if !a.tooLarge {
				a.wait = max(a.wait, p.requests.wait(now, 1))
			}
		}
		p.stats.Refused++
	}
	a.requests, a.tokens, a.output = p.requests, p.tokens, p.output
	return a
}

func (p *Provider) tokenName() string {
	if p.dialect == Anthropic {
		return "input_tokens"
	}
	return "tokens"
}

// cost is what a call counts against the token limits: its prompt, estimated
// at four characters a token, and the output it may produce, its max_tokens
// (or max_completion_tokens). Cerebras documents the same estimate: "the
// input tokens in your prompt" plus "the max_completion_tokens parameter"
// (https://inference-docs.cerebras.ai/support/rate-limits); Anthropic
// estimates output tokens from max_tokens at the start of a request
// (https://docs.anthropic.com/en/api/rate-limits). The fake charges both
// up front and refunds nothing.
type cost struct {
	model         string
	input, output int64
}

// parseCost reads a chat completions or messages request body.
func parseCost(body []byte) (cost, error) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		System              json.RawMessage `json:"system"`
		MaxTokens           *int64          `json:"max_tokens"`
		MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return cost{}, fmt.Errorf("the body is not a JSON request: %w", err)
	}
	chars := textLen(req.System)
	for _, m := range req.Messages {
		chars += textLen(m.Content)
	}
	c := cost{model: req.Model, input: (chars + 3) / 4}
	switch {
	case req.MaxCompletionTokens != nil:
		c.output = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		c.output = *req.MaxTokens
	}
	if c.output < 0 {
		return cost{}, fmt.Errorf("max_tokens is %d, below zero", c.output)
	}
	return c, nil
}

// textLen is the length of a message content or system prompt: a string, or
// a list of parts whose text counts.
func textLen(raw json.RawMessage) int64 {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return int64(len(s))
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts) // anything else counts as no text
	var n int64
	for _, p := range parts {
		n += int64(len(p.Text))
	}
	return n
}
