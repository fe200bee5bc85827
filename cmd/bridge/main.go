// Command bridge serves the services of registries (Consul, DNS SRV, files)
// to Envoy and proxyless gRPC clients over xDS.
//
//	bridge run --config FILE        serve until SIGINT or SIGTERM; SIGHUP reloads FILE
//	bridge validate --config FILE   check a configuration and exit
//	bridge dump --config FILE       read the sources once, print what a client would receive
//	bridge version                  print the version
//
// Exit codes: 0 after a graceful stop, 1 on a runtime failure, 2 on an
// invalid configuration or command line.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/xdsbridge/xdsbridge/config"
	_ "github.com/xdsbridge/xdsbridge/plugins" // the built-in source types
	"github.com/xdsbridge/xdsbridge/sources"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

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
			return usageError{errors.New("a command is required: run, validate, dump or version")}
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Unknown flags and arguments are usage errors too.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(runCmd(stderr), validateCmd(stdout), versionCmd(stdout), dumpCmd(stdout, stderr))
	return root
}

// loadConfig loads the file named by --config with the overriding flags.
func loadConfig(cmd *cobra.Command) (*config.Config, error) {
	path, _ := cmd.Flags().GetString("config")
	if path == "" {
		return nil, usageError{errors.New("--config is required")}
	}
	cfg, err := config.Load(path, cmd.Flags())
	if err != nil {
		return nil, usageError{fmt.Errorf("invalid configuration %s: %w", path, err)}
	}
	return cfg, nil
}

func configFlags(cmd *cobra.Command) {
	cmd.Flags().StringP("config", "c", "", "configuration file (YAML)")
	config.AddFlags(cmd.Flags())
}

func runCmd(stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Run the bridge until SIGINT or SIGTERM",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			log := cfg.Log.NewLogger(stderr)
			log.Info("starting xdsbridge", "version", version, "config", cmd.Flag("config").Value.String())
			load := func() (*config.Config, error) { return config.Load(cmd.Flag("config").Value.String(), cmd.Flags()) }
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
		Use:   "validate --config FILE",
		Short: "Check a configuration, including each source's settings, and exit",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			if err := reportProblems(stdout, cfg.Check()); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "config OK")
			fmt.Fprintf(stdout, "  xds.listen    %s (grpc chain: %t)\n", cfg.XDS.Listen, cfg.XDS.GRPC.Enabled)
			fmt.Fprintf(stdout, "  admin.listen  %s\n", cfg.Admin.Listen)
			fmt.Fprintf(stdout, "  log           %s, %s\n", cfg.Log.Level, cfg.Log.Format)
			fmt.Fprintf(stdout, "  holdoff       %s (max %s)\n", cfg.Holdoff.Min, cfg.Holdoff.Max)
			fmt.Fprintf(stdout, "  sources       %d\n", len(cfg.Entries))
			for _, e := range cfg.Entries {
				fmt.Fprintf(stdout, "    - %s (%s)\n", e.Name, e.Type)
			}
			fmt.Fprintf(stdout, "  transforms    %d\n", cfg.Chain.Len())
			fmt.Fprintf(stdout, "  clusters      %d shaping rules\n", len(cfg.Shaping.Rules))
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
			fmt.Fprintf(stdout, "xdsbridge %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}

func noArgs(cmd *cobra.Command, args []string) error {
	if err := cobra.NoArgs(cmd, args); err != nil {
		return usageError{err}
	}
	return nil
}
