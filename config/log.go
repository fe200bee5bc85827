package config

import (
	"io"
	"log/slog"
)

// NewLogger returns a logger writing to w in the configured format, at the
// configured level. The level must have passed Validate; an unknown one
// logs at info.
func (l Log) NewLogger(w io.Writer) *slog.Logger {
	level, err := ParseLevel(l.Level)
	if err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
