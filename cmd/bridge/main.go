// Command bridge serves the services of registries (Consul, DNS, files, an
// HTTP endpoint, ZooKeeper, etcd) to Envoy, proxyless gRPC clients and
// istiod over xDS.
//
//	bridge run FILE          serve until SIGINT or SIGTERM; SIGHUP reloads FILE
//	bridge validate FILE     check a configuration and exit
//	bridge dump FILE         read the sources once, print what a client would receive
//	bridge status [NODE]     the connected clients of a running bridge, worst first
//	bridge config NODE       what a connected node holds
//	bridge healthcheck       exit 0 if a running bridge is ready
//	bridge version           print the version
//
// FILE may also be given as --config FILE. Exit codes: 0 after a graceful
// stop, 1 on a runtime failure, 2 on an invalid configuration or command
// line.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/xdsbridge/xdsbridge/config"
	_ "github.com/xdsbridge/xdsbridge/plugins" // the built-in source types
	"github.com/xdsbridge/xdsbridge/sources"
)

// version and revision are set at build time with -ldflags
// "-X main.version=v1.2.3 -X main.revision=<commit>" (make build and the
// Dockerfile do).
var version, revision = "dev", ""

// buildRevision is the revision the binary was built from: the one stamped
// at build time, else the one the go command recorded from the checkout
// (absent with -buildvcs=false or outside a repository).
func buildRevision() string {
	if revision != "" {
		return revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}

// usageError marks errors the user can fix in the configuration or the
// command line; they exit with status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func main() {
	// SIGHUP reloads the configuration once the bridge runs (see serve);
	// until then it is ignored rather than fatal, its default action.
	signal.Ignore(syscall.SIGHUP)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// execute runs the command line args and returns the exit code.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "bridge:", err)
	if ue := (usageError{}); errors.As(err, &ue) {
		return 2
	}
	return 1
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "bridge",
		Short:         "Serve service registries to Envoy and gRPC over xDS",
		SilenceUsage:  true,
		SilenceErrors: true,
		// With Args set, cobra hands an unknown command to it, which makes
		// it a usage error (exit 2) like every other.
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Usage()
			return usageError{errors.New("a command is required: run, validate, dump, status, config, healthcheck or version")}
		},
		// --version prints what `bridge version` prints.
		Version: versionLine(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SuggestionsMinimumDistance = 2
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Unknown flags and arguments are usage errors too.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(runCmd(stderr), validateCmd(stdout), versionCmd(stdout), dumpCmd(stdout, stderr),
		statusCmd(stdout), configCmd(stdout), healthcheckCmd(stdout))
	return root
}

// configPath is the configuration file of a command that takes it as its
// one argument or as --config (promtool and consul take a path; the flag
// stays for scripts that use it).
func configPath(cmd *cobra.Command, args []string) (string, error) {
	flag, _ := cmd.Flags().GetString("config")
	switch {
	case len(args) == 1 && flag != "" && flag != args[0]:
		return "", usageError{fmt.Errorf("two configuration files given: %s and --config %s", args[0], flag)}
	case len(args) == 1:
		return args[0], nil
	case flag == "":
		return "", usageError{fmt.Errorf("a configuration file is required: bridge %s FILE (or --config FILE)", cmd.Name())}
	}
	return flag, nil
}

// loadConfig loads the configuration file of cmd (see configPath) with the
// overriding flags.
func loadConfig(cmd *cobra.Command, args []string) (*config.Config, error) {
	path, err := configPath(cmd, args)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(path, cmd.Flags())
	if err != nil {
		// A *config.Error names the file, or the variable or flag the
		// value came from.
		return nil, usageError{fmt.Errorf("%w%s", err, servicesFileHint(path))}
	}
	return cfg, nil
}

// configFlags adds --config and the flags that override the file.
func configFlags(cmd *cobra.Command) {
	cmd.Flags().StringP("config", "c", "", "configuration file (YAML); or give it as the argument")
	config.AddFlags(cmd.Flags())
}

func runCmd(stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run the bridge until SIGINT or SIGTERM",
		Long:  runHelp,
		Args:  maxOneArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(cmd, args)
			if err != nil {
				return err
			}
			path, _ := configPath(cmd, args)
			log := cfg.Log.NewLogger(stderr)
			log.Info("starting xdsbridge", "version", version, "config", path)
			for _, w := range cfg.Warnings {
				log.Warn(w)
			}
			load := func() (*config.Config, error) { return config.Load(path, cmd.Flags()) }
			if err := serve(cmd.Context(), cfg, load, log); err != nil {
				return err
			}
			log.Info("stopped")
			return nil
		},
	}
	configFlags(cmd)
	return cmd
}

func validateCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a configuration, including each source's settings, and exit",
		Long: `Validate checks the configuration FILE (or --config FILE) without starting
anything: every key, each source's settings, URLs, and that the files it
names exist. It prints each problem with its key path and a summary.

Exit codes: 0 valid (warnings are printed), 2 invalid.`,
		Args: maxOneArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(cmd, args)
			if err != nil {
				return err
			}
			if err := reportProblems(stdout, cfg.Check()); err != nil {
				return err
			}
			summary(stdout, cfg)
			return nil
		},
	}
	configFlags(cmd)
	return cmd
}

// reportProblems prints what Check found, warnings included, and returns a
// usage error if any of it is an error.
func reportProblems(w io.Writer, problems []sources.Problem) error {
	var errs int
	for _, p := range problems {
		fmt.Fprintln(w, p)
		if !p.Warning {
			errs++
		}
	}
	if errs > 0 {
		return usageError{fmt.Errorf("invalid configuration: %d error(s) above", errs)}
	}
	return nil
}

func versionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  noArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Fprintln(stdout, versionLine())
		},
	}
}

// versionLine is what `bridge version` and `bridge --version` print.
func versionLine() string {
	return fmt.Sprintf("xdsbridge %s (%s, %s/%s)", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func noArgs(cmd *cobra.Command, args []string) error {
	if err := cobra.NoArgs(cmd, args); err != nil {
		// The root hands a misspelled command here (see newRoot), where
		// cobra suggests nothing by itself.
		if s := cmd.SuggestionsFor(args[0]); !cmd.HasParent() && len(s) > 0 {
			err = fmt.Errorf("%w (did you mean %s?)", err, strings.Join(s, " or "))
		}
		return usageError{err}
	}
	return nil
}

func maxOneArg(cmd *cobra.Command, args []string) error {
	if err := cobra.MaximumNArgs(1)(cmd, args); err != nil {
		return usageError{err}
	}
	return nil
}
