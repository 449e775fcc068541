package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// docIDPrefix starts the user message the app sends; the fake upstream
// reads the document's id from it.
const docIDPrefix = "Document ID: "

// jobLevelCodePrefix tags the fake upstream's failures that concern one
// document only (see demoClassify).
const jobLevelCodePrefix = "document_"

// fakeUpstream is an OpenAI-compatible chat completions endpoint whose
// answer depends on the document in the prompt. Each start serves it
// behind one more API key (the demo's backup is a second start): a
// document's calls are counted across the keys, so a failing behaviour
// fails the document's odd calls on whichever key they land. A key-wide
// story then shows on the key it runs on, also when an earlier story has
// already cooled the first key (clicking the page top to bottom). It is
// safe for concurrent use.
type fakeUpstream struct {
	rateLimitHint time.Duration
	upstreamHint  time.Duration
	slowCall      time.Duration
	// budget and budgetRefill make each key's budget (keyBudget).
	budget       int
	budgetRefill time.Duration

	mu    sync.Mutex
	calls map[string]int // by document id
}

func newFakeUpstream(cfg config) *fakeUpstream {
	return &fakeUpstream{rateLimitHint: cfg.RateLimitHint, upstreamHint: cfg.UpstreamHint,
		slowCall: cfg.SlowCall, budget: cfg.Budget, budgetRefill: cfg.BudgetRefill, calls: make(map[string]int)}
}

// Calls returns how many requests the fake received for a document.
func (f *fakeUpstream) Calls(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[id]
}

// start serves the fake on a loopback port, one API key, and returns its
// base URL (what go-openai's BaseURL wants) and a function that stops it.
func (f *fakeUpstream) start() (baseURL string, stop func(context.Context) error, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	budget := newKeyBudget(f.budget, f.budgetRefill)
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		if !budget.take(w.Header()) {
			apiError(w, http.StatusTooManyRequests, "requests", "rate_limit_exceeded",
				"Rate limit reached for requests on this API key.", f.budgetRefill)
			return
		}
		f.chatCompletions(w, r)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/v1", srv.Shutdown, nil
}

func (f *fakeUpstream) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "could not parse the request body", 0)
		return
	}
	doc, ok := findDocument(documentIDOf(req))
	if !ok {
		doc = document{Behaviour: behaveOK, Summary: "An unknown document.", Risk: "low"}
	}
	f.mu.Lock()
	f.calls[doc.ID]++
	n := f.calls[doc.ID]
	f.mu.Unlock()
	odd := n%2 == 1 // the failing behaviours fail every other call

	switch {
	case doc.Behaviour == behaveRateLimited && odd:
		apiError(w, http.StatusTooManyRequests, "requests", jobLevelCodePrefix+"rate_limited",
			"Rate limit reached for this document.", f.rateLimitHint)
	case doc.Behaviour == behaveOverloaded && odd:
		apiError(w, http.StatusServiceUnavailable, "server_error", jobLevelCodePrefix+"overloaded",
			"The engine is currently overloaded, please try again later.", 0)
	case doc.Behaviour == behaveProviderLimit && odd:
		apiError(w, http.StatusTooManyRequests, "requests", "rate_limit_exceeded",
			"Rate limit reached for requests per minute on this API key.", f.upstreamHint)
	case doc.Behaviour == behaveNoCredit && odd:
		// Anthropic's body for an empty credit balance: only the message
		// says what it is (classify/testdata/corpus/anthropic.json).
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`))
	case doc.Behaviour == behaveTooLong:
		apiError(w, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded",
			"This model's maximum context length is 128000 tokens. However, your messages resulted in 1843211 tokens.", 0)
	case doc.Behaviour == behaveBadOutput:
		completion(w, req.Model, "Sure! Here is a summary of the survey: people like the product but want faster support.")
	case doc.Behaviour == behaveSlow:
		select {
		case <-time.After(f.slowCall):
		case <-r.Context().Done():
			return
		}
		fallthrough
	default:
		out, _ := json.Marshal(evaluation{Summary: doc.Summary, Risk: doc.Risk})
		completion(w, req.Model, string(out))
	}
}

// documentIDOf finds the document id in the request's user message.
func documentIDOf(req openai.ChatCompletionRequest) string {
	for _, m := range req.Messages {
		if m.Role != openai.ChatMessageRoleUser {
			continue
		}
		if rest, ok := strings.CutPrefix(m.Content, docIDPrefix); ok {
			id, _, _ := strings.Cut(rest, "\n")
			return strings.TrimSpace(id)
		}
	}
	return ""
}

func completion(w http.ResponseWriter, model, content string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(openai.ChatCompletionResponse{
		ID: "chatcmpl-demo", Object: "chat.completion", Created: time.Now().Unix(), Model: model,
		Choices: []openai.ChatCompletionChoice{{
			Message:      openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: content},
			FinishReason: openai.FinishReasonStop,
		}},
	})
}

// apiError answers like OpenAI does, with retry-after-ms when hint > 0.
func apiError(w http.ResponseWriter, status int, typ, code, msg string, hint time.Duration) {
	if hint > 0 {
		w.Header().Set("Retry-After-Ms", strconv.FormatInt(hint.Milliseconds(), 10))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "code": code, "param": nil,
	}})
}
