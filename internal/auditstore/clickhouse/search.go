package clickhouse

import (
	_ "embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
)

//go:embed queries/search.sql
var searchTemplate string

// listTemplate parses a list query with the search conditions.
func listTemplate(name, text string) *template.Template {
	t := template.Must(template.New(name).Parse(text))
	template.Must(t.New("search.sql").Parse(searchTemplate))
	return t
}

// chTerm is a term of a search as search.sql renders it.
type chTerm struct {
	Key   string
	Not   bool
	Names []string // one "?" per value
	Pairs []bool   // ip: one range per value, true for an IPv6 one (which holds no IPv4 address)
}

// List is the placeholder list of the values.
func (t chTerm) List() string { return strings.Join(t.Names, ", ") }

// listUses is how many times search.sql uses .List for a key (1 when not
// listed); ip and hook_decision terms take their own arguments.
var listUses = map[string]int{search.KeyActor: 3, "text": 3, "exec_text": 3}

// searchTerms returns the terms as search.sql renders them and their
// arguments in the order of the placeholders. text is the key of
// free-text terms.
func searchTerms(terms []search.Term, text string) ([]chTerm, []any) {
	var out []chTerm
	var args []any
	for _, t := range terms {
		ct := chTerm{Key: t.Key, Not: t.Not}
		if ct.Key == "" {
			ct.Key = text
		}
		vals := make([]any, len(t.Values))
		for j, v := range t.Values {
			ct.Names = append(ct.Names, "?")
			switch t.Key {
			case search.KeyAction, search.KeySource, search.KeyResourceType:
				vals[j] = t.Nums[j]
			case search.KeySuccess:
				var ok uint8
				if v == "true" {
					ok = 1
				}
				vals[j] = ok
			case search.KeyHookDecision:
				vals[j] = auditstore.HookDecisionJSON(v)
			default:
				vals[j] = v
			}
		}
		switch t.Key {
		case search.KeyIP:
			for _, p := range t.Prefixes {
				lo, hi := search.Range16(p)
				ct.Pairs = append(ct.Pairs, p.Addr().Is6())
				args = append(args, lo, hi)
			}
		case search.KeyHookDecision:
			args = append(args, vals...)
		default:
			n := listUses[ct.Key]
			if n == 0 {
				n = 1
			}
			for range n {
				args = append(args, vals...)
			}
		}
		out = append(out, ct)
	}
	return out, args
}

// render renders a list query and checks that it takes nargs arguments.
func render(tmpl *template.Template, data any, nargs int) (string, error) {
	var b strings.Builder
	if err := tmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("%w: %w", auditstore.ErrInvalidQuery, err)
	}
	query := b.String()
	if n := strings.Count(query, "?"); n != nargs {
		return "", fmt.Errorf("%w: the query takes %d arguments, %d given", auditstore.ErrInvalidQuery, n, nargs)
	}
	return query, nil
}
