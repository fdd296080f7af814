package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"herd/internal/config"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

// commands are herd's sub-commands, in the order --help lists them.
var commands = []struct{ name, usage, summary string }{
	{"serve", "herd [serve] [flags]", "serve the web app (the default command)"},
	{"backup", "herd backup [flags] BACKUP_FILE", "write a consistent copy of the database; safe while herd serves"},
	{"migrate", "herd migrate --from FILE --to DSN", "copy a SQLite instance's data into an empty PostgreSQL database, verified"},
	{"version", "herd version", "print the version"},
	{"help", "herd help", "print this help"},
}

// splitCommand takes the sub-command off args: the first argument unless
// it is a flag, else serve.
func splitCommand(args []string) (string, []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "serve", args
}

// cliFlags are the flags of serve and backup.
type cliFlags struct {
	config, addr, dataDir string
}

func newFlagSet(stderr io.Writer) (*flag.FlagSet, *cliFlags) {
	var f cliFlags
	fs := flag.NewFlagSet("herd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "YAML config `FILE` (default ./herd.yaml when present)")
	fs.StringVar(&f.addr, "addr", "", "listen `ADDRESS` (default 127.0.0.1:8080)")
	fs.StringVar(&f.dataDir, "data-dir", "", "data `DIR`: database and workspaces (default ./data)")
	// The flag package calls Usage for -h too; run prints the help itself,
	// and the hint for a bad flag.
	fs.Usage = func() {}
	return fs, &f
}

// versionLine is what herd version prints: the version, the Go release and
// the commit it was built from when the build recorded one.
func versionLine() string {
	line := "herd " + version + " (" + runtime.Version()
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				line += ", " + s.Value[:12]
			}
		}
	}
	return line + ")"
}

// printHelp lists the sub-commands, the flags and the HERD_* variables,
// the last generated from the configuration so the list cannot drift.
func printHelp(w io.Writer) {
	fmt.Fprintln(w, "herd: chat with an LLM lead agent that delegates bounded work to subagents.")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-34s %s\n", c.usage, c.summary)
	}
	fmt.Fprintln(w, "\nFlags (serve and backup):")
	fs, _ := newFlagSet(w)
	fs.PrintDefaults()
	fmt.Fprintln(w, "\nEnvironment:")
	fmt.Fprintf(w, "  %-34s %s\n", config.EnvAdminEmail+", "+config.EnvAdminPassword, "create the first admin on an empty instance")
	fmt.Fprintln(w, "  Every config key can be set by HERD_ + its path in upper case, with \".\" and \"-\" as \"_\"")
	fmt.Fprintln(w, "  (a value is read as YAML; lists and maps can be given whole). The variables:")
	names, err := config.Variables(defaultConfig)
	if err != nil {
		fmt.Fprintf(w, "  (the list is unavailable: %v)\n", err)
		return
	}
	for _, n := range names {
		fmt.Fprintf(w, "    %s\n", n)
	}
	fmt.Fprintln(w, "  List entries and map keys extend these: HERD_MODELS_0_API_KEY, HERD_SUBAGENTS_AGENTS_RESEARCHER_MODEL.")
	fmt.Fprintln(w, "\nconfig.example.yaml documents every key and its default.")
}
