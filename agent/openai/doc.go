// Package openai is herd's provider for any OpenAI-compatible
// chat-completions endpoint (OpenAI, vLLM, Ollama, LiteLLM, DeepSeek, …),
// built on the openai-go SDK, which this package imports as oai. Its fake
// server for tests is openaitest.
package openai
