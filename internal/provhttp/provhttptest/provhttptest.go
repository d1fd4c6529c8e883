// Package provhttptest plays the hostile provider in tests: answers far
// larger than any client should read.
package provhttptest

import (
	"io"
	"net/http"
	"strconv"
	"strings"
)

// WriteHuge answers open, then size bytes of 'x', then close (a JSON
// document whose one string holds them), streamed 1 MiB at a time; with
// declared, Content-Length announces the whole length first. It stops when
// the client goes away.
func WriteHuge(w http.ResponseWriter, open, close string, size int64, declared bool) {
	if declared {
		w.Header().Set("Content-Length", strconv.FormatInt(size+int64(len(open)+len(close)), 10))
	}
	io.WriteString(w, open)
	chunk := []byte(strings.Repeat("x", 1<<20))
	for left := size; left > 0; left -= int64(len(chunk)) {
		if _, err := w.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
			return
		}
	}
	io.WriteString(w, close)
}
