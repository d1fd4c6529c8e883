package docs

import (
	gdocs "google.golang.org/api/docs/v1"

	"github.com/auditrail/auditrail/toolrunner"
)

// exportText renders the main document as markdown or HTML.
// TODO(issue 11): docexport (picker branch) renders these; until it is merged
// the formats are refused, not faked.
func exportText(_ *gdocs.Document, format string) (any, error) {
	return nil, toolrunner.Errorf(toolrunner.KindInputInvalid, false, "return_format %s is not available yet; use docmd or provider_api_json", format)
}
