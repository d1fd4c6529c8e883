package docs

import (
	"strconv"
	"strings"

	"github.com/auditrail/auditrail/toolrunner"
)

// ServiceDomain of every tool, as seeds/002 spells it (webhook policies
// compare domains without regard to case: seeds/001's examples are lower
// case).
const ServiceDomain = "DOCUMENTS"

// Search limits: SearchDocuments lists metadata only (one Drive call per
// page); SearchAndRetrieveDocuments reads every document it lists (one Docs
// call each), so its pages are smaller.
const (
	SearchDefaultLimit   = 50
	SearchMaxLimit       = 1000
	RetrieveDefaultLimit = 10
	RetrieveMaxLimit     = 50
)

// OrderByValues are the sort keys of the search tools (seeds/002).
var OrderByValues = []string{
	"createdTime", "createdTime desc", "folder", "folder desc", "modifiedByMeTime", "modifiedByMeTime desc",
	"modifiedTime", "modifiedTime desc", "name", "name desc", "name_natural", "name_natural desc",
	"quotaBytesUsed", "quotaBytesUsed desc", "recency", "recency desc", "sharedWithMeTime", "sharedWithMeTime desc",
	"starred", "starred desc", "viewedByMeTime", "viewedByMeTime desc",
}

// Return and input formats.
const (
	FormatDocMD    = "docmd"
	FormatMarkdown = "markdown"
	FormatHTML     = "html"
	FormatJSON     = "provider_api_json"
	InputMarkdown  = "markdown"
	InputPlain     = "plain"
)

func i64(v int64) *int64 { return &v }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func joinValues(vs []string) string { return strings.Join(vs, ", ") }

// hints are the execution hints of seeds/002's table.
type hints struct {
	ops                               []string
	readOnly, destructive, idempotent bool
}

var (
	hintCreate = hints{ops: []string{"create"}}
	hintEdit   = hints{ops: []string{"read", "update"}, destructive: true}
	hintUpdate = hints{ops: []string{"update"}}
	hintRead   = hints{ops: []string{"read"}, readOnly: true, idempotent: true}
)

// Scope sets.
var (
	scopesFile   = []string{ScopeDriveFile}
	scopesWhoAmI = []string{ScopeOpenID, ScopeEmail, ScopeProfile, ScopeDriveFile}
)

func def(name, desc, out string, h hints, scopes []string, params ...toolrunner.Param) toolrunner.Definition {
	if params == nil {
		params = []toolrunner.Param{}
	}
	return toolrunner.Definition{
		Toolkit: Name, Name: name, Version: Version, Description: desc, Parameters: params,
		Output: toolrunner.Output{Type: out},
		Metadata: toolrunner.Metadata{
			Classification: toolrunner.Classification{ServiceDomains: []string{ServiceDomain}},
			Behavior: toolrunner.Behavior{Operations: h.ops, ReadOnly: h.readOnly, Destructive: h.destructive,
				Idempotent: h.idempotent, OpenWorld: true},
		},
		Requirements: toolrunner.Requirements{
			Authorization: []toolrunner.AuthRequirement{{ProviderType: Provider, ProviderID: Provider, Scopes: scopes}},
			Secrets:       []toolrunner.SecretRequirement{},
		},
	}
}

const accessNote = " Only documents this app created or the user picked with GenerateGoogleFilePickerUrl are visible; " +
	"when a document is not found, run GenerateGoogleFilePickerUrl, let the user pick it, then retry."

var (
	pDocumentID = toolrunner.Param{Name: "document_id", Type: toolrunner.TypeString, Required: true,
		Description: "The document's id (the part after /d/ in its URL; SearchDocuments lists them)."}
	pTitle = toolrunner.Param{Name: "title", Type: toolrunner.TypeString, Required: true, Description: "Title of the new document."}
)

func searchParams(retrieve bool) []toolrunner.Param {
	def, max := int64(SearchDefaultLimit), int64(SearchMaxLimit)
	if retrieve {
		def, max = RetrieveDefaultLimit, RetrieveMaxLimit
	}
	ps := []toolrunner.Param{
		{Name: "document_contains", Type: toolrunner.TypeArrayString, Description: "Keywords or phrases that must all be in the title or body."},
		{Name: "document_not_contains", Type: toolrunner.TypeArrayString, Description: "Keywords or phrases that must not be in the title or body."},
		{Name: "search_only_in_shared_drive_id", Type: toolrunner.TypeString, Description: "Restrict the search to this shared drive; default none (all drives the other options allow)."},
		{Name: "include_shared_drives", Type: toolrunner.TypeBoolean, Default: false, Description: "Also search shared drives; default false (the user's own drive only)."},
		{Name: "include_organization_domain_documents", Type: toolrunner.TypeBoolean, Default: false,
			Description: "Search the documents shared with the user's organization domain (for admin users); default false."},
		{Name: "order_by", Type: toolrunner.TypeArrayString, Default: []string{"modifiedTime desc"}, Enum: OrderByValues,
			Description: "Sort keys, first wins; default most recently modified first. Ignored when document_contains or document_not_contains is given (Drive does not sort full-text searches). Values: " + joinValues(OrderByValues) + "."},
		{Name: "limit", Type: toolrunner.TypeInteger, Default: def, Minimum: i64(1), Maximum: i64(max),
			Description: "Documents per page (1 to " + itoa(max) + ", default " + itoa(def) + ")."},
		{Name: "pagination_token", Type: toolrunner.TypeString,
			Description: "The pagination_token of the previous answer, to continue it; valid only with the same filters."},
	}
	if retrieve {
		ps = append([]toolrunner.Param{{Name: "return_format", Type: toolrunner.TypeString, Default: FormatMarkdown,
			Enum:        []string{FormatDocMD, FormatMarkdown, FormatHTML, FormatJSON},
			Description: "Format of each document's content: docmd, markdown (default), html or provider_api_json (the Docs API document)."}}, ps...)
	}
	return ps
}

func defCommentOnDocument() toolrunner.Definition {
	return def("CommentOnDocument", "Add a comment to a document; answers the comment id, documentId and documentUrl."+accessNote,
		toolrunner.TypeJSON, hintCreate, scopesFile, pDocumentID,
		toolrunner.Param{Name: "comment_text", Type: toolrunner.TypeString, Required: true, Description: "The comment's text."})
}

func defCreateBlankDocument() toolrunner.Definition {
	return def("CreateBlankDocument", "Create an empty document; answers its title, documentId and documentUrl.",
		toolrunner.TypeJSON, hintCreate, scopesFile, pTitle)
}

func defCreateDocumentFromText() toolrunner.Definition {
	return def("CreateDocumentFromText", "Create a document holding the given text; answers its title, documentId and documentUrl. "+
		"With input_format markdown (the default), headings (# to ######), **bold**, *italic*, links, bullet lists and numbered lists (nested by indentation) become the document's own styles and lists; plain inserts the text as is.",
		toolrunner.TypeJSON, hintCreate, scopesFile, pTitle,
		toolrunner.Param{Name: "text_content", Type: toolrunner.TypeString, Required: true, Description: "The document's content."},
		toolrunner.Param{Name: "input_format", Type: toolrunner.TypeString, Default: InputMarkdown, Enum: []string{InputMarkdown, InputPlain},
			Description: "markdown (default) or plain."})
}

func defEditDocument() toolrunner.Definition {
	d := def("EditDocument", "Read a document as DocMD or edit it with Google Docs batchUpdate requests, applied together (all or none), "+
		"and answer document_id, document_url, edits_applied and the new DocMD. Each request is an object with exactly one key, the request type "+
		"(replaceAllText, insertText, deleteContentRange, updateTextStyle, updateParagraphStyle, createParagraphBullets, insertTable, …), whose value is its body. "+
		"Take indices from the DocMD annotations (half-open UTF-16 ranges) and order index-based edits from the highest index to the lowest so that earlier edits do not shift later ones; "+
		"a fields mask lists the properties to set: a property named in it but absent from the style is reset, * sets all. Tables are addressed by tableStartLocation (the TABLE block's start) with rowIndex and columnIndex. "+
		"Give the DocMD's @revision_id as revision_id so that an edit is refused when the document changed since you read it. "+
		"LLM_API_KEY is listed as the seed requires but optional: the requests are given directly, the platform makes no LLM call and never fails for lack of it."+accessNote,
		toolrunner.TypeJSON, hintEdit, scopesFile, pDocumentID,
		toolrunner.Param{Name: "requests", Type: toolrunner.TypeArrayJSON, Description: "Batch update requests; when omitted the document is only read."},
		toolrunner.Param{Name: "revision_id", Type: toolrunner.TypeString,
			Description: "The @revision_id of the DocMD the edit is based on; the edit is refused if the document changed since."})
	d.Requirements.Secrets = []toolrunner.SecretRequirement{{Name: SecretLLM, Type: "password", Optional: true}}
	return d
}

func defGenerateGoogleFilePickerUrl() toolrunner.Definition {
	return def("GenerateGoogleFilePickerUrl", "Answer the URL of a file picker page for the user: there the user picks Google documents and grants this app access to them. "+
		"Use it when a document tool answers not found or access denied, give the URL to the user, and retry the tool once the user has picked the file.",
		toolrunner.TypeJSON, hintRead, scopesFile)
}

func defGetDocumentAsDocmd() toolrunner.Definition {
	return def("GetDocumentAsDocmd", "Read a document as DocMD: each block annotated with its id, half-open UTF-16 index range, type and style spans; every tab in depth-first order unless tab_id is given."+accessNote,
		toolrunner.TypeString, hintRead, scopesFile, pDocumentID,
		toolrunner.Param{Name: "tab_id", Type: toolrunner.TypeString, Description: "Only this tab (GetDocumentMetadata lists them); default all tabs."})
}

func defGetDocumentByID() toolrunner.Definition {
	d := def("GetDocumentById", "DEPRECATED, do not use: use GetDocumentAsDocmd. Answers the document as the Docs API returns it."+accessNote,
		toolrunner.TypeJSON, hintRead, scopesFile, pDocumentID)
	d.Deprecated = true
	return d
}

func defGetDocumentMetadata() toolrunner.Definition {
	return def("GetDocumentMetadata", "Answer a document's title, id, URL, total character count and its tabs (nested) with each tab's character count."+accessNote,
		toolrunner.TypeJSON, hintRead, scopesFile, pDocumentID)
}

func defInsertTextAtEndOfDocument() toolrunner.Definition {
	return def("InsertTextAtEndOfDocument", "Append text to the end of the document's body (its first tab); answers the batchUpdate response."+accessNote,
		toolrunner.TypeJSON, hintUpdate, scopesFile, pDocumentID,
		toolrunner.Param{Name: "text_content", Type: toolrunner.TypeString, Required: true, Description: "Text appended to the end."})
}

func defListDocumentComments() toolrunner.Definition {
	return def("ListDocumentComments", "List the comments of a document with their replies."+accessNote,
		toolrunner.TypeJSON, hintRead, scopesFile, pDocumentID,
		toolrunner.Param{Name: "include_deleted", Type: toolrunner.TypeBoolean, Default: false, Description: "Also list deleted comments; default false."})
}

func defSearchAndRetrieveDocuments() toolrunner.Definition {
	return def("SearchAndRetrieveDocuments", "Search the user's documents (trashed ones excluded) and answer documents_count, documents with metadata and content (main body and tab metadata only), pagination_token and has_more."+accessNote,
		toolrunner.TypeJSON, hintRead, scopesFile, searchParams(true)...)
}

func defSearchDocuments() toolrunner.Definition {
	return def("SearchDocuments", "Search the user's documents (trashed ones excluded) and answer documents_count, documents (metadata only), pagination_token and has_more."+accessNote,
		toolrunner.TypeJSON, hintRead, scopesFile, searchParams(false)...)
}

func defWhoAmI() toolrunner.Definition {
	return def("WhoAmI", "Answer the user's profile (name, email, picture) and Drive environment (storage quota, what the user can do).",
		toolrunner.TypeJSON, hintRead, scopesWhoAmI)
}
