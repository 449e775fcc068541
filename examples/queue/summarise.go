package main

import (
	"context"
	"errors"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

// summarise is the model call a job makes. The queue adapter runs it under
// the gate: its error is classified there, so it returns go-openai's error
// as it is.
func summarise(ctx context.Context, client *openai.Client, doc string) (string, error) {
	resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model:    openai.GPT4oMini,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Summarise " + doc + "."}},
	})
	if err != nil {
		return "", err
	}
	if len(resp.Choices) == 0 {
		return "", classify.Transient(errors.New("the model returned no choices"), 0)
	}
	return resp.Choices[0].Message.Content, nil
}

// saveFunc stores a document's summary (a database, in a real service).
type saveFunc func(ctx context.Context, doc, summary string) error
