// Package witness submits checkpoints to C2SP tlog-witness witnesses: POST
// <url>/add-checkpoint with the size the witness is believed to know, the
// consistency proof from it, and the log's signed note; a witness answers
// its cosignature (C2SP tlog-cosignature), 409 with the size it knows, 403
// (unknown log, or a signature it cannot verify) or 422 (a proof that does
// not verify: the log was forked or rolled back).
//
// What a witness answers is hostile input (an organization may name one):
// the answer is read up to MaxAnswerBytes, a 409's size is taken only
// within the checkpoint's, a cosignature is kept only when it verifies with
// the witness's configured key, and no redirect is followed.
package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/auditrail/auditrail/internal/tlog"
)

// Witness is one witness: where it takes checkpoints and its cosigning key.
type Witness struct {
	// URL is the witness's submission prefix: the request goes to
	// URL + "/add-checkpoint".
	URL string
	Key tlog.WitnessKey
}

// Parse reads a witness as the --witness flag gives it: URL,VKEY.
func Parse(s string) (Witness, error) {
	u, vkey, ok := strings.Cut(strings.TrimSpace(s), ",")
	if !ok {
		return Witness{}, fmt.Errorf("%w: %.200q is not URL,VKEY", ErrInvalid, s)
	}
	w, err := New(u, vkey)
	if err != nil {
		return Witness{}, err
	}
	return w, nil
}

// New checks a witness's URL (http or https, a host, no query, fragment or
// credentials) and vkey.
func New(rawURL, vkey string) (Witness, error) {
	u, err := checkURL(rawURL)
	if err != nil {
		return Witness{}, err
	}
	k, err := tlog.ParseWitnessKey(strings.TrimSpace(vkey))
	if err != nil {
		return Witness{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return Witness{URL: u, Key: k}, nil
}

// Errors of the package.
var (
	// ErrInvalid: a witness's URL or key is malformed.
	ErrInvalid = errors.New("invalid witness")
	// ErrRefused: the witness answered 403 (it does not know the log or
	// its key) or 422 (the consistency proof does not verify: the log is
	// not an extension of what the witness saw).
	ErrRefused = errors.New("witness refused the checkpoint")
	// ErrUnavailable: the witness could not be reached or failed (a
	// network error, a timeout, 5xx, 429): worth trying again later.
	ErrUnavailable = errors.New("witness unavailable")
	// ErrBadAnswer: the answer is not what C2SP tlog-witness allows (no
	// valid cosignature by the witness's key, an unexpected status, a
	// malformed size).
	ErrBadAnswer = errors.New("bad witness answer")
)

// ConflictError is a 409: the witness knows the log at Size, not at the
// size the request said.
type ConflictError struct{ Size int64 }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("the witness knows the log at size %d", e.Size)
}

// StatusError is a refusal (403, 422) with the witness's words.
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	what := "refused the checkpoint"
	switch e.Status {
	case http.StatusForbidden:
		what = "does not know this log or its key (403)"
	case http.StatusUnprocessableEntity:
		what = "found the consistency proof invalid (422): the log does not extend the checkpoint the witness saw"
	}
	if e.Body != "" {
		return fmt.Sprintf("the witness %s: %q", what, e.Body)
	}
	return "the witness " + what
}

func (e *StatusError) Unwrap() error { return ErrRefused }

// MaxAnswerBytes bounds what is read of an answer.
const MaxAnswerBytes = 64 << 10

// Client sends add-checkpoint requests.
type Client struct {
	hc *http.Client
}

// NewClient returns a client over transport (nil: http.DefaultTransport's
// settings); it never follows a redirect.
func NewClient(transport http.RoundTripper) *Client {
	if transport == nil {
		transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	return &Client{hc: &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// AddCheckpoint submits note (the log's signed checkpoint of size) to w,
// saying the witness knows the log at oldSize, with proof the consistency
// proof from oldSize to size. It returns the witness's cosignature, checked
// with w.Key over the note's text. A 409 is *ConflictError, its size
// within [0, size] (a larger one is ErrBadAnswer naming it: the witness
// saw a larger log than this one, which was rolled back or forked).
func (c *Client) AddCheckpoint(ctx context.Context, w Witness, oldSize, size int64, proof []tlog.Hash, note []byte) (tlog.Cosignature, error) {
	var body bytes.Buffer
	body.WriteString("old ")
	body.WriteString(strconv.FormatInt(oldSize, 10))
	body.WriteByte('\n')
	for _, h := range proof {
		body.WriteString(base64.StdEncoding.EncodeToString(h[:]))
		body.WriteByte('\n')
	}
	body.WriteByte('\n')
	body.Write(note)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL+"/add-checkpoint", &body)
	if err != nil {
		return tlog.Cosignature{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := c.hc.Do(req)
	if err != nil {
		return tlog.Cosignature{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	ans, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return tlog.Cosignature{}, fmt.Errorf("%w: reading the answer: %w", ErrUnavailable, err)
	}
	if len(ans) > MaxAnswerBytes {
		return tlog.Cosignature{}, fmt.Errorf("%w: an answer over %d bytes", ErrBadAnswer, MaxAnswerBytes)
	}
	switch s := resp.StatusCode; {
	case s == http.StatusOK:
		return cosignature(w, note, ans)
	case s == http.StatusConflict:
		known, err := parseSize(ans)
		if err != nil {
			return tlog.Cosignature{}, err
		}
		if known > size {
			return tlog.Cosignature{}, fmt.Errorf("%w: the witness knows the log at size %d, beyond this checkpoint's %d: the log was rolled back or forked", ErrRefused, known, size)
		}
		return tlog.Cosignature{}, &ConflictError{Size: known}
	case s == http.StatusForbidden || s == http.StatusUnprocessableEntity:
		return tlog.Cosignature{}, &StatusError{Status: s, Body: printable(ans)}
	case s == http.StatusTooManyRequests || s >= 500:
		return tlog.Cosignature{}, fmt.Errorf("%w: HTTP %d", ErrUnavailable, s)
	default:
		return tlog.Cosignature{}, fmt.Errorf("%w: HTTP %d %q", ErrBadAnswer, s, printable(ans))
	}
}

// parseSize reads a 409's body: a decimal size and a newline.
func parseSize(b []byte) (int64, error) {
	s := strings.TrimSuffix(string(b), "\n")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, fmt.Errorf("%w: a 409 whose body %q is not a size", ErrBadAnswer, printable(b))
	}
	return n, nil
}

// cosignature finds the witness's valid cosignature among the signature
// lines answered.
func cosignature(w Witness, note, ans []byte) (tlog.Cosignature, error) {
	text, _, err := tlog.SplitNote(note)
	if err != nil {
		return tlog.Cosignature{}, err
	}
	// The answer is signature lines: check them as the note's.
	got, problems, err := tlog.Cosignatures(append(append(bytes.Clone(text), '\n'), ans...), []tlog.WitnessKey{w.Key})
	if err != nil {
		return tlog.Cosignature{}, fmt.Errorf("%w: not signature lines: %w", ErrBadAnswer, err)
	}
	if len(got) == 0 {
		if len(problems) > 0 {
			return tlog.Cosignature{}, fmt.Errorf("%w: %w", ErrBadAnswer, problems[0])
		}
		return tlog.Cosignature{}, fmt.Errorf("%w: no cosignature by key %s (%s)", ErrBadAnswer, w.Key.KeyID(), w.Key.Name)
	}
	return got[0], nil
}

// printable is up to 200 bytes of b for a message.
func printable(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.ToValidUTF8(s, "?")
}

func checkURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	u, err := parseURL(raw)
	if err != nil {
		return "", fmt.Errorf("%w: URL %.200q: %w", ErrInvalid, raw, err)
	}
	return u, nil
}

// parseURL checks a witness URL: http or https, a host, no user
// information, query or fragment; the trailing slash is dropped.
func parseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", err
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errors.New("the scheme is not http or https")
	case u.Host == "" || u.Hostname() == "":
		return "", errors.New("no host")
	case u.User != nil:
		return "", errors.New("credentials in a URL are refused")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", errors.New("a query or fragment is refused")
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}
