package graph

import "github.com/auditrail/auditrail/internal/emulators/graph/odata"

// searcher is a parsed $search.
type searcher interface{ Match(map[string]any) bool }

// parseSearch parses $search. The KQL evaluator (odata.ParseSearch) is not
// merged yet: until it is, $search is refused as Graph refuses a query it
// cannot run.
func parseSearch(s string) (searcher, error) {
	return nil, &odata.Error{Code: CodeBadRequest, Message: "$search is not supported by this emulator build yet."}
}
