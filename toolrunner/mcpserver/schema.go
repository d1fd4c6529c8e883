package mcpserver

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditrail/auditrail/toolrunner"
)

// MetaDeprecated is the _meta key of a deprecated tool (MCP has no field
// for it); its description also begins with "Deprecated: ".
const MetaDeprecated = "io.auditrail/deprecated"

// Tool is the MCP tool of a definition: named by its fully qualified name,
// with the JSON Schema of its parameters and the annotations of its
// behavior; _meta names the toolkit and version.
func Tool(d toolrunner.Definition) *mcp.Tool {
	t := &mcp.Tool{
		Name:        d.FullyQualifiedName(),
		Description: d.Description,
		InputSchema: InputSchema(d),
		Annotations: Annotations(d.Metadata.Behavior),
		Meta:        mcp.Meta{"io.auditrail/toolkit": d.Toolkit, "io.auditrail/version": d.Version},
	}
	if d.Deprecated {
		t.Description = "Deprecated: " + t.Description
		t.Meta[MetaDeprecated] = true
	}
	return t
}

// Annotations are the MCP hints of a behavior. Every hint is stated (the
// MCP defaults, destructive and open-world, are the opposite of a tool
// that declares nothing).
func Annotations(b toolrunner.Behavior) *mcp.ToolAnnotations {
	destructive, openWorld := b.Destructive, b.OpenWorld
	return &mcp.ToolAnnotations{ReadOnlyHint: b.ReadOnly, DestructiveHint: &destructive, IdempotentHint: b.Idempotent, OpenWorldHint: &openWorld}
}

// InputSchema is the JSON Schema (2020-12) of a definition's parameters:
// an object of exactly those properties, the required ones listed.
func InputSchema(d toolrunner.Definition) map[string]any {
	props := make(map[string]any, len(d.Parameters))
	var required []string
	for _, p := range d.Parameters {
		props[p.Name] = ParamSchema(p)
		if p.Required {
			required = append(required, p.Name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// ParamSchema is the JSON Schema of one parameter: its type (with "null"
// when nullable), enum, bounds, default and description.
func ParamSchema(p toolrunner.Param) map[string]any {
	s := map[string]any{}
	var typ string
	switch p.Type {
	case toolrunner.TypeString:
		typ = "string"
	case toolrunner.TypeInteger:
		typ = "integer"
	case toolrunner.TypeNumber:
		typ = "number"
	case toolrunner.TypeBoolean:
		typ = "boolean"
	case toolrunner.TypeJSON:
		typ = "object"
	case toolrunner.TypeArrayString:
		typ, s["items"] = "array", map[string]any{"type": "string"}
	case toolrunner.TypeArrayJSON:
		typ, s["items"] = "array", map[string]any{"type": "object"}
	case toolrunner.TypeArray:
		typ = "array"
	}
	switch {
	case typ == "":
		// A type this package does not know: any value (the runner
		// validates).
	case p.Nullable:
		s["type"] = []string{typ, "null"}
	default:
		s["type"] = typ
	}
	if len(p.Enum) > 0 {
		enum := make([]any, 0, len(p.Enum)+1)
		for _, e := range p.Enum {
			enum = append(enum, e)
		}
		if p.Nullable {
			enum = append(enum, nil)
		}
		s["enum"] = enum
	}
	if p.Minimum != nil {
		s["minimum"] = *p.Minimum
	}
	if p.Maximum != nil {
		s["maximum"] = *p.Maximum
	}
	if p.Default != nil {
		s["default"] = p.Default
	}
	if p.Description != "" {
		s["description"] = p.Description
	}
	return s
}
