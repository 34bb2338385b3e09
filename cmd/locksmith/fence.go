package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/locksmith-go/lock/config"
	"github.com/locksmith-go/lock/fence"
)

// exitStale is fence set's exit code for a write refused as stale.
const exitStale = 1

func (a *app) fenceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fence",
		Short: "Write data on Redis behind a fencing token",
		Long: `fence writes data on the configured Redis server only if the writer's
fencing token is at least the largest one that wrote it, so that a holder
whose lock passed on cannot overwrite the next holder's data (the library's
fence package, docs/safety.md "Protecting the resource").`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.fenceSetCommand())
	return cmd
}

func (a *app) fenceSetCommand() *cobra.Command {
	var token int64
	cmd := &cobra.Command{
		Use:   "set KEY VALUE [--token N]",
		Short: "Set KEY to VALUE unless a newer holder's fencing token wrote it",
		Long: `fence set sets KEY to VALUE (SET, with no expiry) if the fencing token N is
at least the fence stored beside KEY ({KEY}:fenced, or KEY:fenced when KEY
has a hash tag), and stores N there, in one script; a lower N writes
nothing. Equal tokens are accepted: one holder may write several times.

The token is --token N or, without it, $LOCKSMITH_FENCE, which locksmith run
gives its command when the strategy issues fencing tokens (single):

  locksmith run orders -- sh -c 'locksmith fence set orders:42 paid'

KEY is the data's key, not the lock's: a fence set on the lock's own key
would overwrite the lock. The server is the configuration's (--url or
LOCKSMITH_URL), which must name one server or one deployment (not redlock's
nodes), and must allow scripts.

Exit codes: 0 set; 1 stale: a larger token wrote KEY (the message names
both); 64 usage (no token, a token that is not a positive integer, a KEY
that has '}' but no hash tag, several servers); 69 Redis unavailable, or
refused the script; 78 configuration.`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := tokenOf(cmd.Flags().Changed("token"), token)
			if err != nil {
				return err
			}
			return a.fenceSet(cmd.Context(), args[0], args[1], t)
		},
	}
	cmd.Flags().Int64Var(&token, "token", 0, "the fencing token `N` (default $LOCKSMITH_FENCE)")
	return cmd
}

// tokenOf returns the token of --token when given, else $LOCKSMITH_FENCE's.
func tokenOf(given bool, flag int64) (int64, error) {
	if given {
		if flag <= 0 {
			return 0, exit(exitUsage, fmt.Errorf("fence set: --token must be a positive integer, got %d", flag))
		}
		return flag, nil
	}
	env, ok := os.LookupEnv("LOCKSMITH_FENCE")
	if !ok || env == "" {
		return 0, exit(exitUsage, errors.New("fence set: no fencing token: pass --token N, or run it under locksmith run, which sets LOCKSMITH_FENCE"))
	}
	t, err := strconv.ParseInt(env, 10, 64)
	if err != nil || t <= 0 {
		return 0, exit(exitUsage, fmt.Errorf("fence set: LOCKSMITH_FENCE=%q: want a positive integer", env))
	}
	return t, nil
}

// fenceSet runs fence set on the configuration's server.
func (a *app) fenceSet(ctx context.Context, key, value string, token int64) error {
	cfg, err := a.config()
	if err != nil {
		return err
	}
	conns, clients, err := config.OpenConns(cfg)
	if err != nil {
		return exit(exitConfig, err)
	}
	defer clients.Close()
	if len(conns) != 1 {
		return exit(exitUsage, fmt.Errorf("fence set: the configuration names %d servers: a fence lives on one server or deployment", len(conns)))
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Defaults().ReadTimeout)
	defer cancel()
	a.logf("fence set %s with token %d", key, token)
	err = fence.Set(ctx, conns[0], key, value, token)
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		return exit(exitStale, fmt.Errorf("fence set %s: stale token %d: the fence is %d, written by a newer holder: nothing written", stale.Key, stale.Token, stale.Fence))
	}
	return err
}
