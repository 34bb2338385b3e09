package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func (a *app) runCommand() *cobra.Command {
	return &cobra.Command{
		Use:  "run",
		RunE: func(*cobra.Command, []string) error { return exit(exitInternal, errors.New("not implemented")) },
	}
}
