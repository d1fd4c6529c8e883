package docs

import (
	gdocs "google.golang.org/api/docs/v1"

	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docexport"
)

// exportText renders the main document as markdown or HTML.
func exportText(d *gdocs.Document, format string) (any, error) {
	if format == FormatHTML {
		return docexport.HTML(d), nil
	}
	return docexport.Markdown(d), nil
}
