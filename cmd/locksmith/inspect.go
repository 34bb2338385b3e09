package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func (a *app) inspectCommand() *cobra.Command {
	return &cobra.Command{
		Use:  "inspect",
		RunE: func(*cobra.Command, []string) error { return exit(exitInternal, errors.New("not implemented")) },
	}
}
