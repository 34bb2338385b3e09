package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func (a *app) checkLegacyCommand() *cobra.Command {
	return &cobra.Command{
		Use:  "check-legacy",
		RunE: func(*cobra.Command, []string) error { return exit(exitInternal, errors.New("not implemented")) },
	}
}
