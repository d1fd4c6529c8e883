package google_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPickerScript: the picker script is served without a token, as a
// script (nosniff), and defines the Picker API the platform's page calls.
// The platform's browser test (controlplane TestPickerGrantsAccessInBrowser)
// runs it in chromium.
func TestPickerScript(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		method string
		status int
	}{
		{http.MethodGet, 200},
		{http.MethodPost, 404}, // the catch-all: "Method not found."
	}
	for _, tc := range tests {
		req, _ := http.NewRequest(tc.method, e.url+"/js/api.js", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("%s /js/api.js: %d", tc.method, resp.StatusCode)
		}
		if tc.status != 200 {
			continue
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("headers: %v", resp.Header)
		}
		for _, want := range []string{"gapi.load = function", "google.picker = {", "PickerBuilder.prototype.setOAuthToken",
			"PickerBuilder.prototype.setAppId", "PickerBuilder.prototype.setDeveloperKey", "'/picker/v1/files'", "'/picker/v1/grant'",
			"MULTISELECT_ENABLED: 'multiselectEnabled'", "PICKED: 'picked'", "DOCUMENTS: 'docs'", "MIME_TYPE: 'mimeType'"} {
			if !strings.Contains(string(body), want) {
				t.Errorf("the script lacks %q", want)
			}
		}
		if strings.Contains(string(body), "innerHTML") {
			t.Error("the script writes markup from data (innerHTML)")
		}
	}
	http.DefaultClient.CloseIdleConnections()
}
