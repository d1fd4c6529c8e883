package sqlite

import (
	"database/sql"
	"database/sql/driver"
	_ "embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/google/uuid"
	"modernc.org/sqlite"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
)

//go:embed queries/search.sql
var searchTemplate string

func init() {
	// auditrail_fold(s): s in Unicode lower case (SQLite's lower() folds
	// ASCII only), NULL for NULL.
	must(sqlite.RegisterDeterministicScalarFunction("auditrail_fold", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		if s, ok := args[0].(string); ok {
			return strings.ToLower(s), nil
		}
		return nil, nil
	}))
	// auditrail_ip16(s): the address s as search.Hex16 writes it, NULL when
	// s is no address.
	must(sqlite.RegisterDeterministicScalarFunction("auditrail_ip16", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		if s, ok := args[0].(string); ok {
			if h := search.Hex16(s); h != "" {
				return h, nil
			}
		}
		return nil, nil
	}))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// listTemplate parses a list query with the search conditions.
func listTemplate(name, text string) *template.Template {
	t := template.Must(template.New(name).Parse(text))
	template.Must(t.New("search.sql").Parse(searchTemplate))
	return t
}

// listData is what a list query renders from.
type listData struct {
	Project, After, Since, Until bool
	Terms                        []sqlTerm
}

// sqlTerm is a term of a search as search.sql renders it.
type sqlTerm struct {
	Key   string
	Not   bool
	Names []string  // the named arguments of the values
	Pairs []ipRange // ip: the named arguments of each range
}

// ipRange is the range of an ip term's prefix; V6: an IPv6 prefix, which
// holds no IPv4 address (search.Mapped).
type ipRange struct {
	Lo, Hi string
	V6     bool
}

// List is the comma-separated list of the value arguments.
func (t sqlTerm) List() string { return strings.Join(t.Names, ", ") }

// render renders a list query for q's predicates and returns it with the
// named arguments they add. text is the key of free-text terms.
func render(tmpl *template.Template, project *uuid.UUID, after *auditstore.Key, w auditstore.Window, terms []search.Term, text string) (string, []any, error) {
	v, args := pageArgs(project, after)
	d := listData{Project: v.Project, After: v.After, Since: w.Since != nil, Until: w.Until != nil}
	lo, hi := w.Bounds()
	if d.Since {
		args = append(args, sql.Named("since", lo))
	}
	if d.Until {
		args = append(args, sql.Named("until", hi))
	}
	for i, t := range terms {
		st := sqlTerm{Key: t.Key, Not: t.Not}
		arg := func(j int, suffix string, v any) string {
			name := fmt.Sprintf("t%d_%d%s", i, j, suffix)
			args = append(args, sql.Named(name, v))
			return ":" + name
		}
		for j, v := range t.Values {
			switch t.Key {
			case "":
				st.Key = text
				st.Names = append(st.Names, arg(j, "", strings.ToLower(v)))
			case search.KeyAction, search.KeySource, search.KeyResourceType:
				st.Names = append(st.Names, arg(j, "", int64(t.Nums[j])))
			case search.KeyIP:
				lo, hi := search.Range16(t.Prefixes[j])
				st.Pairs = append(st.Pairs, ipRange{arg(j, "lo", lo), arg(j, "hi", hi), t.Prefixes[j].Addr().Is6()})
			case search.KeySuccess:
				ok := int64(0)
				if v == "true" {
					ok = 1
				}
				st.Names = append(st.Names, arg(j, "", ok))
			case search.KeyHookDecision:
				st.Names = append(st.Names, arg(j, "", auditstore.HookDecisionJSON(v)))
			default:
				st.Names = append(st.Names, arg(j, "", v))
			}
		}
		d.Terms = append(d.Terms, st)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, d); err != nil {
		return "", nil, fmt.Errorf("%w: %w", auditstore.ErrInvalidQuery, err)
	}
	return b.String(), args, nil
}
