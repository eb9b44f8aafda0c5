// Command openai-go runs a tool call over a WebSocket to a Tether server with the official
// Go SDK, github.com/openai/openai-go/v3: the continuation names the previous response and
// sends only the tool output, on the same connection, so it takes the hot path.
//
//	go run ./examples/openai-go -url http://127.0.0.1:8787/v1
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8787/v1", "the server's API base URL")
	flag.Parse()
	key := os.Getenv("TETHER_API_KEY")
	if key == "" {
		key = "unused" // an open server takes any key; the SDK insists on one
	}
	answer, err := run(context.Background(), *url, key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(answer)
}

// run opens a WebSocket to url, lets the model call get_weather, answers the call and returns
// the model's answer.
func run(ctx context.Context, url, key string) (string, error) {
	client := openai.NewClient(option.WithAPIKey(key), option.WithBaseURL(url+"/"))
	conn, err := client.Responses.Connect(ctx, responses.ResponseConnectionOptions{})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"location": map[string]any{"type": "string"}},
		"required":             []string{"location"},
		"additionalProperties": false,
	}, true)}
	question := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Weather in Paris?", responses.EasyInputMessageRoleUser),
	}
	err = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Tools: tools,
		Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfResponse: &question},
	})
	if err != nil {
		return "", err
	}
	r1, err := conn.FinalResponse(ctx)
	if err != nil {
		return "", err
	}
	// Run the function calls of r1 and send only their outputs, naming r1.
	var outputs responses.ResponseInputParam
	for _, item := range r1.Output {
		if item.Type == "function_call" {
			out := responses.ResponseInputItemParamOfFunctionCallOutput("18C, light rain")
			out.OfFunctionCallOutput.CallID = openai.String(item.AsFunctionCall().CallID)
			outputs = append(outputs, out)
		}
	}
	err = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: "sim", Tools: tools, PreviousResponseID: openai.String(r1.ID),
		Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfResponse: &outputs},
	})
	if err != nil {
		return "", err
	}
	r2, err := conn.FinalResponse(ctx)
	if err != nil {
		return "", err
	}
	return r2.OutputText(), nil
}
