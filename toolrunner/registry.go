package toolrunner

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrUnknownTool is returned for a tool name the registry does not hold.
var ErrUnknownTool = errors.New("unknown tool")

// Registry holds tools by fully qualified name.
type Registry struct {
	tools map[string]Tool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{tools: map[string]Tool{}} }

// Register adds tools; a name registered twice, or a definition that is not
// well formed, is an error.
func (r *Registry) Register(tools ...Tool) error {
	for _, t := range tools {
		d := t.Definition()
		if err := checkDefinition(d); err != nil {
			return err
		}
		fqn := d.FullyQualifiedName()
		if _, dup := r.tools[fqn]; dup {
			return fmt.Errorf("tool %s registered twice", fqn)
		}
		r.tools[fqn] = t
	}
	return nil
}

func checkDefinition(d Definition) error {
	if d.Toolkit == "" || d.Name == "" || d.Version == "" || strings.Contains(d.Name, ".") {
		return fmt.Errorf("tool %q of %q: toolkit, name (without dots) and version are required", d.Name, d.Toolkit)
	}
	seen := map[string]bool{}
	for _, p := range d.Parameters {
		if p.Name == "" || seen[p.Name] {
			return fmt.Errorf("tool %s: parameter %q missing or twice", d.FullyQualifiedName(), p.Name)
		}
		seen[p.Name] = true
		if _, err := coerce(Param{Name: p.Name, Type: p.Type}, zeroOf(p.Type)); err != nil {
			return fmt.Errorf("tool %s: %w", d.FullyQualifiedName(), err)
		}
	}
	return nil
}

func zeroOf(typ string) any {
	switch typ {
	case TypeString:
		return ""
	case TypeInteger, TypeNumber:
		return 0.0
	case TypeBoolean:
		return false
	case TypeArrayString, TypeArrayJSON, TypeArray:
		return []any{}
	case TypeJSON:
		return map[string]any{}
	}
	return nil
}

// Lookup finds a tool by fully qualified name (Toolkit.Name).
func (r *Registry) Lookup(fqn string) (Tool, error) {
	t, ok := r.tools[fqn]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTool, fqn)
	}
	return t, nil
}

// Definitions returns every definition, sorted by fully qualified name.
func (r *Registry) Definitions() []Definition {
	out := make([]Definition, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t.Definition())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FullyQualifiedName() < out[j].FullyQualifiedName() })
	return out
}
