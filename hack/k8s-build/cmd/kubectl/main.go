// Command kubectl is the upstream Kubernetes CLI, built from the Go module proxy (same
// wiring as k8s.io/kubernetes/cmd/kubectl).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // client auth plugins
)

func main() {
	// Set the log verbosity before the command is built (as upstream does).
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) // nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
