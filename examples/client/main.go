// Command client runs an agent loop against a Tether server with package client: the model
// calls the get_weather tool, the program answers it, and the model gives its answer.
//
//	go run ./examples/client -url http://127.0.0.1:8787/v1
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/tetherd/tether/client"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8787/v1", "the server's API base URL")
	flag.Parse()
	answer, err := run(context.Background(), *url, os.Getenv("TETHER_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(answer)
}

// getWeather answers the get_weather tool. call.Arguments is the JSON the model wrote, for
// example {"location":"Paris"}.
func getWeather(ctx context.Context, call client.Call) (string, error) {
	return "18C, light rain", nil
}

// run dials url with key ("" for an open server) and runs the agent loop to its answer.
func run(ctx context.Context, url, key string) (string, error) {
	c, err := client.Dial(ctx, url, &client.Options{APIKey: key})
	if err != nil {
		return "", err
	}
	defer c.Close()
	schema := map[string]any{
		"type":       "object",
		"properties": map[string]any{"location": map[string]any{"type": "string"}},
		"required":   []string{"location"},
	}
	resp, err := c.Run(ctx, client.CreateRequest{
		Model: "sim",
		Input: []client.Item{client.UserMessage("Weather in Paris?")},
		Tools: []client.Tool{client.FunctionTool("get_weather", "Current weather.", schema)},
	}, client.RunOptions{
		Tools:       map[string]client.ToolFunc{"get_weather": getWeather},
		CallTimeout: 30 * time.Second,
	})
	if err != nil {
		return "", err
	}
	return resp.OutputText(), nil
}
