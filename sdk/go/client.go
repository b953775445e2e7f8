package withruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Environment variables and the config file that NewClient reads.
const (
	// EnvURL names the server's base URL, such as http://127.0.0.1:7780.
	EnvURL = "WITHRUNTIME_URL"
	// EnvAPIKey holds the API key (wr_...), sent as a bearer token.
	EnvAPIKey = "WITHRUNTIME_API_KEY"
)

// ConfigFile is the CLI's config file, relative to the user's config
// directory (os.UserConfigDir, usually ~/.config): {"url": ..., "apiKey": ...}.
const ConfigFile = "withruntime/config.json"

// Client talks to one Runtime server. It is safe for concurrent use. The
// package-level Create, Connect and List use a Client from NewClient().
type Client struct {
	baseURL string
	apiKey  string
	hc      *http.Client
	// respTimeout and idleTimeout bound the waits (wait.go); 0: none.
	respTimeout, idleTimeout time.Duration
}

// ClientOption configures NewClient.
type ClientOption func(*Client)

// WithBaseURL sets the server's base URL (such as http://127.0.0.1:7780),
// overriding WITHRUNTIME_URL and the config file.
func WithBaseURL(url string) ClientOption { return func(c *Client) { c.baseURL = url } }

// WithAPIKey sets the API key, overriding WITHRUNTIME_API_KEY and the
// config file.
func WithAPIKey(key string) ClientOption { return func(c *Client) { c.apiKey = key } }

// WithHTTPClient sets the HTTP client (default: one without an overall
// timeout, since exec streams and file transfers can be long; the SDK
// bounds the waits on a silent server itself: WithResponseTimeout,
// WithIdleTimeout; bound whole calls with their context).
func WithHTTPClient(hc *http.Client) ClientOption { return func(c *Client) { c.hc = hc } }

// NewClient returns a client for the server found, in this order, in the
// options (WithBaseURL), the environment (WITHRUNTIME_URL and
// WITHRUNTIME_API_KEY), or the CLI's config file
// (~/.config/withruntime/config.json, {"url", "apiKey"}). With none of these
// it returns an error wrapping ErrNotConfigured that says how to configure
// one: the SDK never starts a server itself. The local default is a server
// started on the same host with `withruntime serve`.
func NewClient(opts ...ClientOption) (*Client, error) {
	c := &Client{respTimeout: DefaultResponseTimeout, idleTimeout: DefaultIdleTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.baseURL == "" {
		if err := c.fromEnvOrFile(); err != nil {
			return nil, err
		}
	}
	if !strings.HasPrefix(c.baseURL, "http://") && !strings.HasPrefix(c.baseURL, "https://") {
		return nil, fmt.Errorf("withruntime: server URL %q must start with http:// or https://", c.baseURL)
	}
	c.baseURL = strings.TrimRight(c.baseURL, "/")
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	return c, nil
}

func (c *Client) fromEnvOrFile() error {
	key := c.apiKey
	if url := os.Getenv(EnvURL); url != "" {
		c.baseURL = url
		if key == "" {
			c.apiKey = os.Getenv(EnvAPIKey)
		}
		return nil
	}
	path := ""
	if dir, err := os.UserConfigDir(); err == nil {
		path = filepath.Join(dir, ConfigFile)
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			var fc struct {
				URL    string `json:"url"`
				APIKey string `json:"apiKey"`
			}
			if err := json.Unmarshal(b, &fc); err != nil {
				return fmt.Errorf("withruntime: config file %s is not valid JSON: %w", path, err)
			}
			if fc.URL != "" {
				c.baseURL = fc.URL
				c.apiKey = firstNonEmpty(key, os.Getenv(EnvAPIKey), fc.APIKey)
				return nil
			}
		case !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("withruntime: reading config file %s: %w", path, err)
		}
	}
	return fmt.Errorf("%w: set %s (and %s) to a server's URL and key, write %s as {\"url\": ..., \"apiKey\": ...}, "+
		"or pass withruntime.WithBaseURL; to run a server on this host: `sudo withruntime serve --listen 127.0.0.1:7780`, "+
		"then `sudo withruntime keys create NAME` for a key", ErrNotConfigured, EnvURL, EnvAPIKey, displayPath(path))
}

func displayPath(p string) string {
	if p == "" {
		return "~/.config/" + ConfigFile
	}
	return p
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// BaseURL is the server's base URL.
func (c *Client) BaseURL() string { return c.baseURL }

// request performs one request: body is sent as is (contentType says what
// it is), and an error status becomes an *APIError. The caller closes the
// answer's body.
func (c *Client) request(ctx context.Context, method, path string, body io.Reader, contentType, accept string) (*http.Response, error) {
	resp, err := c.send(ctx, method, path, body, contentType, accept, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// send performs one request with the extra headers given and returns the
// answer whatever its status. The caller closes the answer's body.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, contentType, accept string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, body)
	if err != nil {
		return nil, fmt.Errorf("withruntime: %w", err)
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if body != nil && contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	headers := c.respTimeout
	if extra, ok := ctx.Value(waitKey{}).(time.Duration); ok && headers > 0 {
		headers += extra
	}
	resp, err := boundedDo(c.hc, req, c.baseURL, headers, c.idleTimeout)
	if err != nil {
		if isTimeout(err) {
			return nil, err // it names the server and the seconds waited
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("withruntime: %s %s: %w", method, path, ctx.Err())
		}
		return nil, fmt.Errorf("withruntime: cannot reach the Runtime server at %s: %w", c.baseURL, err)
	}
	return resp, nil
}

// decodeError turns an error answer into an *APIError.
func decodeError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb ErrorBody
	if json.Unmarshal(data, &eb) != nil || eb.Error.Code == "" {
		msg := strings.TrimSpace(string(data))
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return &APIError{Status: resp.StatusCode, Code: fmt.Sprintf("http_%d", resp.StatusCode), Message: msg}
	}
	return &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
}

// doJSON sends in (if non-nil) as JSON and decodes the answer into out (if
// non-nil).
func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	return c.doJSONCapped(ctx, method, path, in, out, 0)
}

// maxAgentAnswerBytes bounds a JSON answer that comes from inside a sandbox
// (exec results, file lists), where root may have replaced Runtime's agent
// with a program of its own: without a bound, one answer could take all the
// memory of a process that serves many sandboxes, such as `withruntime mcp
// --http` (a 500 MiB file list took 1.8 GiB). The largest real answer, an
// exec result with both streams at the 16 MiB cap, every byte a NUL (six
// bytes in JSON) and also in base64, is under 240 MiB.
var maxAgentAnswerBytes int64 = 256 << 20

// maxInfoBytes bounds an answer describing one file (its path is at most
// 4 KiB).
var maxInfoBytes int64 = 1 << 20

// errAnswerTooLarge is the failure to decode an answer over its bound.
type errAnswerTooLarge struct{ max int64 }

func (e errAnswerTooLarge) Error() string {
	return fmt.Sprintf("the answer is over %d bytes, more than Runtime's agent ever sends (was the sandbox's agent replaced from inside?)", e.max)
}

// capReader reads at most max bytes of r; reading more fails with
// errAnswerTooLarge.
type capReader struct {
	r         io.Reader
	left, max int64
}

func newCapReader(r io.Reader, max int64) *capReader { return &capReader{r: r, left: max, max: max} }

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errAnswerTooLarge{c.max}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// doJSONCapped is doJSON reading at most max bytes of the answer (0: no
// bound).
func (c *Client) doJSONCapped(ctx context.Context, method, path string, in, out any, max int64) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("withruntime: encoding request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	resp, err := c.request(ctx, method, path, body, "application/json", "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	var r io.Reader = resp.Body
	if max > 0 {
		r = newCapReader(r, max)
	}
	if err := json.NewDecoder(r).Decode(out); err != nil {
		if isTimeout(err) {
			return err
		}
		return fmt.Errorf("withruntime: decoding the answer to %s %s: %w", method, path, err)
	}
	return nil
}
