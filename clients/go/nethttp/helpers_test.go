package nethttp_test

import (
	"context"
	"io"
	"log/slog"
	"runtime"

	"github.com/redis/go-redis/v9"
)

var ctx = context.Background()

func runtimeCaller() (uintptr, string, int, bool) { return runtime.Caller(0) }

// quietLogger drops the warnings the cases provoke on purpose.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}

// go-redis logs each failed dial; the "down" cases make many on purpose.
func init() { redis.SetLogger(silent{}) }
