package odata

import "strings"

// Kind is the EDM type of a property or literal.
type Kind uint8

// The kinds of values a filter handles.
const (
	KindNull Kind = iota
	KindString
	KindInt
	KindDouble
	KindBool
	KindDateTime // Edm.DateTimeOffset
	KindDate     // Edm.Date (a date-only literal)
	KindComplex
	KindCollection
	KindEnum // a Graph enum, compared by member order
)

// edmName is the type name ODataLib prints in its messages.
func (k Kind) edmName() string {
	switch k {
	case KindString:
		return "Edm.String"
	case KindInt:
		return "Edm.Int32"
	case KindDouble:
		return "Edm.Double"
	case KindBool:
		return "Edm.Boolean"
	case KindDateTime:
		return "Edm.DateTimeOffset"
	case KindDate:
		return "Edm.Date"
	case KindComplex:
		return "complex"
	case KindCollection:
		return "collection"
	case KindEnum:
		return "enum"
	}
	return "null"
}

func (k Kind) numeric() bool  { return k == KindInt || k == KindDouble }
func (k Kind) temporal() bool { return k == KindDateTime || k == KindDate }

// Prop is the type of a property: a primitive Kind, a complex type, or a
// collection of Elem.
type Prop struct {
	Kind    Kind
	Complex *EntityType // KindComplex
	Elem    *Prop       // KindCollection
	Enum    *EnumType   // KindEnum
}

// EnumType is a Graph enum: its members in the order of their values.
type EnumType struct {
	Name    string // e.g. "microsoft.graph.importance"
	Members []string
}

// member returns the index of the member named s (ignoring case), or -1.
func (e *EnumType) member(s string) int {
	for i, m := range e.Members {
		if strings.EqualFold(m, s) {
			return i
		}
	}
	return -1
}

func enumProp(name string, members ...string) *Prop {
	return &Prop{Kind: KindEnum, Enum: &EnumType{Name: name, Members: members}}
}

// typeName is the name ODataLib prints for the property's type.
func (p *Prop) typeName() string {
	if p.Kind == KindEnum {
		return p.Enum.Name
	}
	return p.Kind.edmName()
}

// EntityType is a Graph entity or complex type: its properties by name.
type EntityType struct {
	Name  string // e.g. "microsoft.graph.message"
	Props map[string]*Prop
}

var (
	pString   = &Prop{Kind: KindString}
	pBool     = &Prop{Kind: KindBool}
	pDateTime = &Prop{Kind: KindDateTime}
	pInt      = &Prop{Kind: KindInt}
)

func complexProp(t *EntityType) *Prop { return &Prop{Kind: KindComplex, Complex: t} }
func collOf(p *Prop) *Prop            { return &Prop{Kind: KindCollection, Elem: p} }

var (
	emailAddressType = &EntityType{Name: "microsoft.graph.emailAddress", Props: map[string]*Prop{
		"name": pString, "address": pString,
	}}
	recipientType = &EntityType{Name: "microsoft.graph.recipient", Props: map[string]*Prop{
		"emailAddress": complexProp(emailAddressType),
	}}
	itemBodyType = &EntityType{Name: "microsoft.graph.itemBody", Props: map[string]*Prop{
		"contentType": enumProp("microsoft.graph.bodyType", "text", "html"), "content": pString,
	}}
	dateTimeTimeZoneType = &EntityType{Name: "microsoft.graph.dateTimeTimeZone", Props: map[string]*Prop{
		"dateTime": pString, "timeZone": pString,
	}}
	followupFlagType = &EntityType{Name: "microsoft.graph.followupFlag", Props: map[string]*Prop{
		"flagStatus":        enumProp("microsoft.graph.followupFlagStatus", "notFlagged", "complete", "flagged"),
		"completedDateTime": complexProp(dateTimeTimeZoneType),
		"dueDateTime":       complexProp(dateTimeTimeZoneType),
		"startDateTime":     complexProp(dateTimeTimeZoneType),
	}}
)

// Message is microsoft.graph.message, the type $filter and $orderby of
// /me/messages run against.
var Message = &EntityType{Name: "microsoft.graph.message", Props: map[string]*Prop{
	"id":                         pString,
	"changeKey":                  pString,
	"conversationId":             pString,
	"internetMessageId":          pString,
	"parentFolderId":             pString,
	"subject":                    pString,
	"bodyPreview":                pString,
	"importance":                 enumProp("microsoft.graph.importance", "low", "normal", "high"),
	"inferenceClassification":    enumProp("microsoft.graph.inferenceClassificationType", "focused", "other"),
	"webLink":                    pString,
	"createdDateTime":            pDateTime,
	"lastModifiedDateTime":       pDateTime,
	"receivedDateTime":           pDateTime,
	"sentDateTime":               pDateTime,
	"hasAttachments":             pBool,
	"isDeliveryReceiptRequested": pBool,
	"isDraft":                    pBool,
	"isRead":                     pBool,
	"isReadReceiptRequested":     pBool,
	"body":                       complexProp(itemBodyType),
	"uniqueBody":                 complexProp(itemBodyType),
	"from":                       complexProp(recipientType),
	"sender":                     complexProp(recipientType),
	"flag":                       complexProp(followupFlagType),
	"toRecipients":               collOf(complexProp(recipientType)),
	"ccRecipients":               collOf(complexProp(recipientType)),
	"bccRecipients":              collOf(complexProp(recipientType)),
	"replyTo":                    collOf(complexProp(recipientType)),
	"categories":                 collOf(pString),
}}

// MailFolder is microsoft.graph.mailFolder, for $filter on /me/mailFolders.
var MailFolder = &EntityType{Name: "microsoft.graph.mailFolder", Props: map[string]*Prop{
	"id":               pString,
	"displayName":      pString,
	"parentFolderId":   pString,
	"childFolderCount": pInt,
	"unreadItemCount":  pInt,
	"totalItemCount":   pInt,
	"isHidden":         pBool,
}}

// prop finds a property by name as Graph does: exactly, else ignoring
// case (Graph accepts "ReceivedDateTime"). It returns the canonical name.
func (t *EntityType) prop(name string) (string, *Prop, bool) {
	if p, ok := t.Props[name]; ok {
		return name, p, true
	}
	for n, p := range t.Props {
		if strings.EqualFold(n, name) {
			return n, p, true
		}
	}
	return "", nil, false
}

// enumAt returns the enum type of the message property at a slash path,
// or nil: $orderby on an enum sorts by member order.
func enumAt(t *EntityType, path string) *EnumType {
	var p *Prop
	for _, seg := range strings.Split(path, "/") {
		if t == nil {
			return nil
		}
		if p = t.Props[seg]; p == nil {
			return nil
		}
		t = p.Complex
	}
	if p == nil || p.Kind != KindEnum {
		return nil
	}
	return p.Enum
}
