// Package mcp gives agents the tools of Model Context Protocol servers
// (docs/DESIGN.md §4): it wraps the official Go SDK's client, keeps one
// session per configured server alive (stdio servers from the start, HTTP
// ones from first use, each restarted with backoff when it goes away) and
// offers each server tool as a tools.Tool named mcp__<server>__<tool>.
package mcp
