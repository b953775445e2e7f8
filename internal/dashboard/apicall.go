package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/store"
)

// maxAPIAnswer caps what one in-process API answer may hold in memory (a
// process list comes from inside a sandbox, which may be hostile).
const maxAPIAnswer = 4 << 20

// apiError is an error answer of the API: its status, code and message,
// shown to the user as the API wrote it.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Message }

func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return http.StatusInternalServerError
}

// call sends one request to the API in process, authenticated as key (the
// API's own authentication and tenant rules apply), and decodes a JSON
// answer into out (if non-nil).
func (d *Dashboard) call(ctx context.Context, key store.Key, method, path string, in, out any) error {
	var body *bytes.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	} else {
		body = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(api.AsKey(ctx, key), method, "http://dashboard.invalid"+path, body)
	if err != nil {
		return err
	}
	req.RequestURI = path
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &recorder{header: http.Header{}}
	d.cfg.API.ServeHTTP(rec, req)
	if rec.over {
		return &apiError{Status: http.StatusBadGateway, Code: "too_large", Message: fmt.Sprintf("the answer to %s %s is over %d bytes", method, path, maxAPIAnswer)}
	}
	if rec.code >= 400 {
		var eb agentapi.ErrorBody
		if json.Unmarshal(rec.body.Bytes(), &eb) != nil || eb.Error.Message == "" {
			eb.Error = agentapi.Error{Code: "http_error", Message: fmt.Sprintf("%s %s answered %d", method, path, rec.code)}
		}
		return &apiError{Status: rec.code, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	if out != nil && rec.body.Len() > 0 {
		if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
			return &apiError{Status: http.StatusBadGateway, Code: "bad_answer", Message: fmt.Sprintf("%s %s: %v", method, path, err)}
		}
	}
	return nil
}

// recorder is an http.ResponseWriter that keeps an answer in memory, up to
// maxAPIAnswer bytes; past that writes fail (a forwarded answer is then cut
// off by the API's proxy).
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
	over   bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	if r.body.Len()+len(p) > maxAPIAnswer {
		r.over = true
		return 0, errors.New("dashboard: API answer too large")
	}
	return r.body.Write(p)
}

func (r *recorder) Flush() {}
