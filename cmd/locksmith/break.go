package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func (a *app) breakCommand() *cobra.Command {
	return &cobra.Command{
		Use:  "break",
		RunE: func(*cobra.Command, []string) error { return exit(exitInternal, errors.New("not implemented")) },
	}
}
