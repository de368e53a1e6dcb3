// Command helm is the upstream Helm CLI, built from the Go module proxy (same wiring as
// helm.sh/helm/v4/cmd/helm).
package main

import (
	"errors"
	"log/slog"
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // client auth plugins

	helmcmd "helm.sh/helm/v4/pkg/cmd"
	"helm.sh/helm/v4/pkg/kube"
)

func main() {
	// Keep the managedFields manager name "helm" whatever the binary is called.
	kube.ManagedFieldsManager = "helm"

	cmd, err := helmcmd.NewRootCmd(os.Stdout, os.Args[1:], helmcmd.SetupLogging)
	if err != nil {
		slog.Warn("command failed", slog.Any("error", err))
		os.Exit(1)
	}
	if err := cmd.Execute(); err != nil {
		if cerr, ok := errors.AsType[helmcmd.CommandError](err); ok {
			os.Exit(cerr.ExitCode)
		}
		os.Exit(1)
	}
}
