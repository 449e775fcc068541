// Package goopenai wires github.com/sashabaranov/go-openai to classify: its
// Transport, set as the client's ClientConfig.HTTPClient, keeps the retry
// hint headers and the body (its first MiB) of a failed response in the
// error the client returns, which go-openai otherwise drops, and reports every
// response's rate-limit Budget to the function classify.WithBudgetFunc put
// on the request's context.
//
// It is a package of its own so that classify does not import go-openai:
// an application on another client builds no go-openai, while
// classify.Default still recognises go-openai's errors by their shape,
// with or without this Transport.
//
// The zero Transport is ready to use; a Transport is safe for concurrent
// use if its Doer is.
package goopenai
