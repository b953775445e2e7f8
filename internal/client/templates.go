package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/httpwait"
)

// CreateTemplate makes a template from a registry image, calling onStep
// with each build step as the server streams it (onStep may be nil).
func (c *Client) CreateTemplate(ctx context.Context, req api.CreateTemplateRequest, onStep func(api.TemplateEvent)) (api.Template, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return api.Template{}, err
	}
	resp, err := c.send(waitFor(ctx, buildWait), http.MethodPost, "/v1/templates", bytes.NewReader(b), agentapi.ContentTypeNDJSON)
	if err != nil {
		return api.Template{}, err
	}
	return templateStream(resp, onStep)
}

// UploadTemplate makes the template name from a `docker save` tarball read
// from body; label is recorded as the template's origin, start (nil: none)
// makes it warm.
func (c *Client) UploadTemplate(ctx context.Context, name, label string, start *api.TemplateStart, body io.Reader, onStep func(api.TemplateEvent)) (api.Template, error) {
	q := StartQuery(start)
	q.Set("name", name)
	if label != "" {
		q.Set("image", label)
	}
	resp, err := c.sendAs(waitFor(ctx, buildWait), http.MethodPost, "/v1/templates?"+q.Encode(), body, api.ContentTypeTar, agentapi.ContentTypeNDJSON)
	if err != nil {
		return api.Template{}, err
	}
	return templateStream(resp, onStep)
}

// BuildTemplate makes the template name from a Dockerfile: body is the
// build context as a tar, dockerfile the Dockerfile's path in it; query may
// add buildArg, internet and allow (see POST /v1/templates). onEvent gets
// the step and output events.
func (c *Client) BuildTemplate(ctx context.Context, name, dockerfile string, query url.Values, body io.Reader, onEvent func(api.TemplateEvent)) (api.Template, error) {
	q := url.Values{"name": {name}, "dockerfile": {dockerfile}}
	for k, v := range query {
		q[k] = v
	}
	resp, err := c.sendAs(waitFor(ctx, buildWait), http.MethodPost, "/v1/templates?"+q.Encode(), body, api.ContentTypeTar, agentapi.ContentTypeNDJSON)
	if err != nil {
		return api.Template{}, err
	}
	return templateStream(resp, onEvent)
}

// StartQuery is a template's start as the query parameters of a tar body
// (POST /v1/templates): startCommand, readyCommand, readyTimeoutSeconds,
// startKernel. Empty for nil.
func StartQuery(st *api.TemplateStart) url.Values {
	q := url.Values{}
	if st == nil {
		return q
	}
	if st.Command != "" {
		q.Set("startCommand", st.Command)
	}
	if st.ReadyCommand != "" {
		q.Set("readyCommand", st.ReadyCommand)
	}
	if st.ReadyTimeoutSeconds != 0 {
		q.Set("readyTimeoutSeconds", strconv.FormatInt(st.ReadyTimeoutSeconds, 10))
	}
	if st.Kernel {
		q.Set("startKernel", "true")
	}
	return q
}

func templateStream(resp *http.Response, onStep func(api.TemplateEvent)) (api.Template, error) {
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev api.TemplateEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return api.Template{}, fmt.Errorf("bad event from server: %w", err)
		}
		switch ev.Type {
		case "step", "output":
			if onStep != nil {
				onStep(ev)
			}
		case "template":
			if ev.Template == nil {
				return api.Template{}, errors.New("template event without a template")
			}
			return *ev.Template, nil
		case "error":
			if ev.Error != nil {
				return api.Template{}, &APIError{Status: statusOfCode(ev.Error.Code), Code: ev.Error.Code, Message: ev.Error.Message}
			}
		}
	}
	if err := sc.Err(); err != nil {
		if httpwait.IsTimeout(err) {
			return api.Template{}, err
		}
		return api.Template{}, fmt.Errorf("template build stream broke: %w", err)
	}
	return api.Template{}, errors.New("template build stream ended without a result (the server may have stopped)")
}

// statusOfCode is the HTTP status an error code would have had outside a
// stream.
func statusOfCode(code string) int {
	switch code {
	case agentapi.CodeBadRequest:
		return http.StatusBadRequest
	case agentapi.CodeNotFound:
		return http.StatusNotFound
	case agentapi.CodeConflict:
		return http.StatusConflict
	case agentapi.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}

// GetTemplate returns one template.
func (c *Client) GetTemplate(ctx context.Context, name string) (api.Template, error) {
	var t api.Template
	return t, c.do(ctx, http.MethodGet, "/v1/templates/"+url.PathEscape(name), nil, &t)
}

// DeleteTemplate deletes a template no sandbox uses.
func (c *Client) DeleteTemplate(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/templates/"+url.PathEscape(name), nil, nil)
}
