// Package anthropic is herd's provider for Anthropic's Messages API, built
// on the official Go SDK (anthropic-sdk-go), which this package imports as
// sdk. Its fake server for tests is anthropictest.
package anthropic
