package api

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"withruntime.dev/runtime/internal/template"
)

// Warm templates (sandbox/warm.go): a template build may carry a start —
// in CreateTemplateRequest.start, or for a tar body (an upload or a
// Dockerfile build) in the query as startCommand, readyCommand,
// readyTimeoutSeconds and startKernel; a Dockerfile's CMD is its start
// command. After the template is made the build runs its start once and
// saves the warm image; a start that fails (the ready check did not pass)
// fails the build, and the template is deleted again.

// startQuery are the query parameters of a tar body's start.
var startQuery = []string{"startCommand", "readyCommand", "readyTimeoutSeconds", "startKernel"}

// startFromQuery reads a tar body's start from q (nil when q has none).
func startFromQuery(q url.Values) (*template.Start, error) {
	st := &template.Start{Command: q.Get("startCommand"), ReadyCommand: q.Get("readyCommand")}
	if v := q.Get("readyTimeoutSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, badRequest("readyTimeoutSeconds=%q: write a whole number of seconds", v)
		}
		st.ReadyTimeoutSeconds = n
	}
	if v := q.Get("startKernel"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, badRequest("startKernel=%q: write true or false", v)
		}
		st.Kernel = b
	}
	return st.Normal()
}

// startFromWire is a JSON body's start, checked (nil when it has none).
func startFromWire(w *TemplateStart) (*template.Start, error) {
	if w == nil {
		return nil, nil
	}
	st := template.Start{Command: w.Command, ReadyCommand: w.ReadyCommand, ReadyTimeoutSeconds: w.ReadyTimeoutSeconds, Kernel: w.Kernel}
	return st.Normal()
}

// toTemplateStart is a template's start on the wire.
func toTemplateStart(st *template.Start) *TemplateStart {
	if st.IsZero() {
		return nil
	}
	return &TemplateStart{Command: st.Command, ReadyCommand: st.ReadyCommand, ReadyTimeoutSeconds: st.ReadyTimeoutSeconds, Kernel: st.Kernel}
}

// warmBuild wraps a template build: once it made a warm template, its
// start runs and the warm image is saved (a step of its own); when the
// start fails, the template is deleted and the build fails with why.
func (s *Server) warmBuild(ctx context.Context, st *template.Store, name string, build buildFunc) buildFunc {
	return func(progress func(template.Progress), output func(string)) (template.Info, error) {
		start := time.Now()
		info, err := build(progress, output)
		if err != nil || info.Start.IsZero() {
			return info, err
		}
		step := "starting the template (" + info.Start.String() + ") and saving its warm image"
		report := func(done bool) {
			if progress != nil {
				progress(template.Progress{Step: step, Elapsed: time.Since(start), Done: done})
			}
		}
		report(false)
		if err := s.cfg.Manager.Warm(ctx, name); err != nil {
			if derr := st.Delete(context.WithoutCancel(ctx), name, nil); derr != nil {
				s.cfg.Log.Error("delete a template whose start failed", "template", name, "err", derr)
			}
			return template.Info{}, err
		}
		report(true)
		return info, nil
	}
}

// buildFunc is one template build as runBuild runs it.
type buildFunc = func(progress func(template.Progress), output func(string)) (template.Info, error)
