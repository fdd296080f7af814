// Package tools holds the tools a model may call and what they share: the
// Tool interface, a Set of tools keyed by name, the JSON schema of a tool's
// arguments and the check its arguments meet, the workspace file tools,
// and the bash tool with its sandbox. It knows nothing of the runtime that
// calls them.
package tools
