package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

// evaluation is what the model must answer, as JSON.
type evaluation struct {
	Summary string `json:"summary"`
	Risk    string `json:"risk"`
}

const systemPrompt = `You review business documents. Answer with JSON only, exactly {"summary": "<one sentence>", "risk": "low" | "medium" | "high"}.`

// errBadOutput is the app's error for an answer that is not the JSON asked
// for. The model may well comply next time, so it is marked transient: the
// gate cools the job down and its MaxAttempts ends the attempts.
var errBadOutput = errors.New("model answer is not the requested JSON")

// evaluator asks the model about documents, through one client per
// upstream (the gate's Upstream, and its Fallbacks).
type evaluator struct {
	clients map[string]*openai.Client
	model   string
}

// evaluate makes one model call for doc on the upstream the gate chose for
// this run (Lease.Upstream). It is the function the gate guards.
func (e *evaluator) evaluate(ctx context.Context, upstream string, doc document) (evaluation, error) {
	client, ok := e.clients[upstream]
	if !ok {
		return evaluation{}, classify.Permanent(fmt.Errorf("no client for upstream %q", upstream))
	}
	resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model: e.model,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: systemPrompt},
			{Role: openai.ChatMessageRoleUser, Content: docIDPrefix + doc.ID + "\n\n" + doc.Text},
		},
		ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject},
	})
	if err != nil {
		return evaluation{}, err
	}
	if len(resp.Choices) == 0 {
		return evaluation{}, classify.WithReason(errBadOutput, classify.ClassTransient, classify.ReasonBadOutput, 0)
	}
	out, err := parseEvaluation(resp.Choices[0].Message.Content)
	if err != nil {
		return evaluation{}, classify.WithReason(err, classify.ClassTransient, classify.ReasonBadOutput, 0)
	}
	return out, nil
}

// parseEvaluation accepts exactly the JSON the system prompt asks for.
func parseEvaluation(content string) (evaluation, error) {
	var out evaluation
	dec := json.NewDecoder(strings.NewReader(content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return evaluation{}, fmt.Errorf("%w: %v", errBadOutput, err)
	}
	switch out.Risk {
	case "low", "medium", "high":
	default:
		return evaluation{}, fmt.Errorf("%w: risk %q", errBadOutput, out.Risk)
	}
	if strings.TrimSpace(out.Summary) == "" {
		return evaluation{}, fmt.Errorf("%w: empty summary", errBadOutput)
	}
	return out, nil
}

// demoClassify is classify.Default, except for the fake upstream's failures
// tagged "document_*": a real provider's 429 or 503 concerns the API key or
// the whole service, so Default marks it provider-wide and the gate pauses
// every job of the upstream. The demo wants to show a single job's
// cooldown too, so its fake upstream tags the failures that concern one
// document and this classifier keeps them to the job. With the real API the
// tag never appears and this is exactly classify.Default.
func demoClassify(err error) classify.Verdict {
	v := classify.Default(err)
	var he *classify.HTTPError
	if v.ProviderWide && errors.As(err, &he) && strings.HasPrefix(he.Code, jobLevelCodePrefix) {
		v.ProviderWide = false
	}
	return v
}
