package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func (a *app) acquireCommand() *cobra.Command {
	return &cobra.Command{Use: "acquire", RunE: func(*cobra.Command, []string) error { return exit(exitInternal, errors.New("not implemented")) }}
}

func (a *app) refreshCommand() *cobra.Command {
	return &cobra.Command{Use: "refresh", RunE: func(*cobra.Command, []string) error { return exit(exitInternal, errors.New("not implemented")) }}
}

func (a *app) releaseCommand() *cobra.Command {
	return &cobra.Command{Use: "release", RunE: func(*cobra.Command, []string) error { return exit(exitInternal, errors.New("not implemented")) }}
}
