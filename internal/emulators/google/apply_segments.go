package google

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	docs "google.golang.org/api/docs/v1"
)

// toProps answers the JSON object form of a client struct.
func toProps(v any) props {
	b, err := json.Marshal(v)
	if err != nil {
		return props{}
	}
	var m props
	if json.Unmarshal(b, &m) != nil || m == nil {
		return props{}
	}
	return m
}

// maskUpdate answers old with every field named by mask taken from in (a
// client struct); a masked field absent from in is reset (removed, so the
// default shows). known lists the fields the request may update.
func maskUpdate(old props, in any, mask string, known []string) (props, error) {
	set, err := fieldSet(mask, known)
	if err != nil {
		return nil, err
	}
	src := toProps(in)
	if err := checkDimensions(src); err != nil {
		return nil, err
	}
	out := make(props, len(old)+len(set))
	for k, v := range old {
		out[k] = v
	}
	for k := range set {
		if v, ok := src[k]; ok {
			out[k] = v
		} else {
			delete(out, k)
		}
	}
	return out, nil
}

// checkDimensions refuses a Dimension with a magnitude and no unit, as
// Google does.
func checkDimensions(v any) error {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["magnitude"]; ok {
			if u, _ := x["unit"].(string); u != "PT" {
				return fmt.Errorf("Unit must be specified for a dimension with a magnitude.")
			}
		}
		for _, vv := range x {
			if err := checkDimensions(vv); err != nil {
				return err
			}
		}
	case props:
		return checkDimensions(map[string]any(x))
	case []any:
		for _, vv := range x {
			if err := checkDimensions(vv); err != nil {
				return err
			}
		}
	}
	return nil
}

// insertElement inserts one non-text item (it.k, it.x set by the caller) at
// a location, with the text style of the text around it.
func insertElement(d *document, loc *docs.Location, end *docs.EndOfSegmentLocation, it item) (*segment, int, error) {
	s, i, err := insertionPoint(d, loc, end)
	if err != nil {
		return nil, 0, err
	}
	it.ts = s.items[i].ts
	if st := s.paragraphStart(i); i > st {
		it.ts = s.items[i-1].ts
	}
	it.ts = unlinked(it.ts)
	s.splice(i, i, []item{it})
	return s, i, nil
}

func isFootnote(d *document, tabID, segID string) bool {
	t, ok := d.tab(tabID)
	if !ok {
		return false
	}
	_, fn := t.Footnotes[segID]
	return fn
}

func createHeaderFooter(d *document, typ string, sb *docs.Location, footer bool) (string, error) {
	what, field := "header", "defaultHeaderId"
	if footer {
		what, field = "footer", "defaultFooterId"
	}
	switch typ {
	case "DEFAULT":
	case "", "HEADER_FOOTER_TYPE_UNSPECIFIED":
		return "", fmt.Errorf("The %s type must be specified.", what)
	default:
		return "", fmt.Errorf("Invalid value at 'type': %q", typ)
	}
	tabID := ""
	if sb != nil {
		tabID = sb.TabId
	}
	t, ok := d.tab(tabID)
	if !ok {
		return "", fmt.Errorf("The tab with ID %s was not found.", tabID)
	}
	id := d.newObjectID("kix.")
	if sb != nil {
		if sb.SegmentId != "" || sb.Index < 0 || int(sb.Index) >= len(t.Body.items) || t.Body.items[sb.Index].k != kSectionBreak {
			return "", fmt.Errorf("The sectionBreakLocation must point at a section break.")
		}
		it := &t.Body.items[sb.Index]
		if it.x == nil {
			it.x = &attrs{}
		}
		if it.x.p[field] != nil {
			return "", fmt.Errorf("A %s of the specified type already exists for this section.", what)
		}
		it.x.p = it.x.p.with(field, id)
	} else {
		cur := &t.DefaultHeaderID
		if footer {
			cur = &t.DefaultFooterID
		}
		if *cur != "" {
			return "", fmt.Errorf("A %s of the specified type already exists.", what)
		}
		*cur = id
	}
	if footer {
		t.Footers[id] = newSideSegment()
	} else {
		t.Headers[id] = newSideSegment()
	}
	return id, nil
}

func deleteHeaderFooter(d *document, id, tabID string, footer bool) error {
	t, ok := d.tab(tabID)
	if !ok {
		return fmt.Errorf("The tab with ID %s was not found.", tabID)
	}
	m, cur, field, what := t.Headers, &t.DefaultHeaderID, "defaultHeaderId", "header"
	if footer {
		m, cur, field, what = t.Footers, &t.DefaultFooterID, "defaultFooterId", "footer"
	}
	if _, ok := m[id]; !ok || id == "" {
		return fmt.Errorf("The %s with ID %s was not found.", what, id)
	}
	delete(m, id)
	if *cur == id {
		*cur = ""
	}
	for i := range t.Body.items {
		if x := t.Body.items[i].x; t.Body.items[i].k == kSectionBreak && x != nil && x.p[field] == id {
			x.p = x.p.with(field, nil)
		}
	}
	return nil
}

func createFootnote(d *document, r *docs.CreateFootnoteRequest) (string, error) {
	if segOf(r.Location, r.EndOfSegmentLocation) != "" {
		return "", fmt.Errorf("Footnote references can only be inserted in the body.")
	}
	t, ok := d.tab(tabOf(r.Location, r.EndOfSegmentLocation))
	if !ok {
		return "", fmt.Errorf("The tab with ID %s was not found.", tabOf(r.Location, r.EndOfSegmentLocation))
	}
	id := d.newObjectID("kix.")
	if _, _, err := insertElement(d, r.Location, r.EndOfSegmentLocation, item{k: kFootnoteRef, x: &attrs{ref: id}}); err != nil {
		return "", err
	}
	// The new footnote holds a space followed by a newline.
	fn := newSideSegment()
	fn.items = append([]item{{k: kChar, u: ' '}}, fn.items...)
	t.Footnotes[id] = fn
	return id, nil
}

// dropOrphanFootnotes deletes the footnotes whose reference was deleted.
func dropOrphanFootnotes(d *document) {
	for _, t := range d.Tabs {
		if len(t.Footnotes) == 0 {
			continue
		}
		live := map[string]bool{}
		for _, it := range t.Body.items {
			if it.k == kFootnoteRef {
				live[it.x.ref] = true
			}
		}
		for id := range t.Footnotes {
			if !live[id] {
				delete(t.Footnotes, id)
			}
		}
	}
}

// checkImageURI applies Google's rules to an image URI: public http(s), at
// most 2 kB.
func checkImageURI(uri string) error {
	if uri == "" {
		return fmt.Errorf("The URI must be specified.")
	}
	if len(uri) > 2048 {
		return fmt.Errorf("The URI cannot exceed 2 kB in length.")
	}
	u, err := url.Parse(uri)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("The URI %q is not a valid public image URL.", uri)
	}
	return nil
}

func insertInlineImage(d *document, r *docs.InsertInlineImageRequest) (string, error) {
	if err := checkImageURI(r.Uri); err != nil {
		return "", err
	}
	if isFootnote(d, tabOf(r.Location, r.EndOfSegmentLocation), segOf(r.Location, r.EndOfSegmentLocation)) {
		return "", fmt.Errorf("Inline images cannot be inserted into footnotes.")
	}
	// Without objectSize Google uses the image's own size; the emulator
	// fetches nothing and uses 100x100 pt. A single given dimension keeps
	// the aspect ratio, so the other takes the same value here.
	w, h := 100.0, 100.0
	if sz := r.ObjectSize; sz != nil {
		if err := checkDimensions(toProps(sz)); err != nil {
			return "", err
		}
		switch {
		case sz.Width != nil && sz.Height != nil:
			w, h = sz.Width.Magnitude, sz.Height.Magnitude
		case sz.Width != nil:
			w, h = sz.Width.Magnitude, sz.Width.Magnitude
		case sz.Height != nil:
			w, h = sz.Height.Magnitude, sz.Height.Magnitude
		}
		if w <= 0 || h <= 0 {
			return "", fmt.Errorf("The object size must be positive.")
		}
	}
	id := d.newObjectID("kix.")
	eo := props{"imageProperties": map[string]any{"contentUri": r.Uri, "sourceUri": r.Uri, "cropProperties": map[string]any{}},
		"size": map[string]any{"width": pt(w), "height": pt(h)}, "embeddedObjectBorder": map[string]any{"color": map[string]any{"color": map[string]any{"rgbColor": map[string]any{}}},
			"width": pt(0), "dashStyle": "SOLID", "propertyState": "NOT_RENDERED"},
		"marginTop": pt(9), "marginBottom": pt(9), "marginRight": pt(9), "marginLeft": pt(9)}
	if _, _, err := insertElement(d, r.Location, r.EndOfSegmentLocation, item{k: kInlineObject, x: &attrs{ref: id, p: eo}}); err != nil {
		return "", err
	}
	return id, nil
}

func replaceImage(d *document, r *docs.ReplaceImageRequest) error {
	if err := checkImageURI(r.Uri); err != nil {
		return err
	}
	switch r.ImageReplaceMethod {
	case "", "IMAGE_REPLACE_METHOD_UNSPECIFIED", "CENTER_CROP":
	default:
		return fmt.Errorf("Invalid value at 'image_replace_method': %q", r.ImageReplaceMethod)
	}
	t, ok := d.tab(r.TabId)
	if !ok {
		return fmt.Errorf("The tab with ID %s was not found.", r.TabId)
	}
	for _, s := range allSegments(t) {
		for i := range s.items {
			if x := s.items[i].x; s.items[i].k == kInlineObject && x.ref == r.ImageObjectId {
				ip, _ := x.p["imageProperties"].(map[string]any)
				nip := map[string]any{}
				for k, v := range ip {
					nip[k] = v
				}
				nip["contentUri"], nip["sourceUri"] = r.Uri, r.Uri
				x.p = x.p.with("imageProperties", nip)
				return nil
			}
		}
	}
	return fmt.Errorf("The image with ID %s was not found.", r.ImageObjectId)
}

func insertPerson(d *document, r *docs.InsertPersonRequest) error {
	if r.PersonProperties == nil || r.PersonProperties.Email == "" {
		return fmt.Errorf("The person's email must be specified.")
	}
	if !strings.Contains(r.PersonProperties.Email, "@") {
		return fmt.Errorf("The email %q is not a valid email address.", r.PersonProperties.Email)
	}
	p := props{"email": r.PersonProperties.Email, "name": r.PersonProperties.Email}
	if r.PersonProperties.Name != "" {
		p["name"] = r.PersonProperties.Name
	}
	_, _, err := insertElement(d, r.Location, r.EndOfSegmentLocation, item{k: kPerson, x: &attrs{ref: d.newObjectID("kix."), p: p}})
	return err
}

var dateFormats = map[string]string{
	"":                                       "Jan 2, 2006",
	"DATE_FORMAT_UNSPECIFIED":                "Jan 2, 2006",
	"DATE_FORMAT_MONTH_DAY_ABBREVIATED":      "Jan 2",
	"DATE_FORMAT_MONTH_DAY_FULL":             "January 2",
	"DATE_FORMAT_MONTH_DAY_YEAR_ABBREVIATED": "Jan 2, 2006",
	"DATE_FORMAT_ISO8601":                    "2006-01-02",
}

var timeFormats = map[string]string{"": "", "TIME_FORMAT_UNSPECIFIED": "", "TIME_FORMAT_DISABLED": "",
	"TIME_FORMAT_HOUR_MINUTE": "3:04 PM", "TIME_FORMAT_HOUR_MINUTE_TIMEZONE": "3:04 PM MST"}

func insertDate(d *document, r *docs.InsertDateRequest) error {
	in := r.DateElementProperties
	if in == nil || in.Timestamp == "" {
		return fmt.Errorf("The date's timestamp must be specified.")
	}
	ts, err := time.Parse(time.RFC3339Nano, in.Timestamp)
	if err != nil {
		return fmt.Errorf("Invalid value at 'timestamp': %q", in.Timestamp)
	}
	loc := time.UTC
	if in.TimeZoneId != "" {
		if loc, err = time.LoadLocation(in.TimeZoneId); err != nil {
			return fmt.Errorf("Invalid time zone ID: %q", in.TimeZoneId)
		}
	}
	df, ok := dateFormats[in.DateFormat]
	if !ok {
		return fmt.Errorf("Invalid value at 'date_format': %q", in.DateFormat)
	}
	tf, ok := timeFormats[in.TimeFormat]
	if !ok {
		return fmt.Errorf("Invalid value at 'time_format': %q", in.TimeFormat)
	}
	display := ts.In(loc).Format(df)
	if tf != "" {
		display += " " + ts.In(loc).Format(tf)
	}
	p := toProps(in)
	p["displayText"] = display
	if in.Locale == "" {
		p["locale"] = "en"
	}
	_, _, err = insertElement(d, r.Location, r.EndOfSegmentLocation, item{k: kDate, x: &attrs{ref: d.newObjectID("kix."), p: p}})
	return err
}

func insertSectionBreak(d *document, r *docs.InsertSectionBreakRequest) error {
	switch r.SectionType {
	case "CONTINUOUS", "NEXT_PAGE":
	case "", "SECTION_TYPE_UNSPECIFIED":
		return fmt.Errorf("The section type must be specified.")
	default:
		return fmt.Errorf("Invalid value at 'section_type': %q", r.SectionType)
	}
	if segOf(r.Location, r.EndOfSegmentLocation) != "" {
		return fmt.Errorf("Section breaks can only be inserted in the body.")
	}
	s, i, err := insertionPoint(d, r.Location, r.EndOfSegmentLocation)
	if err != nil {
		return err
	}
	if inTable(s, i) {
		return fmt.Errorf("Section breaks cannot be inserted inside a table.")
	}
	// The new section starts with the style of the section it splits.
	var p props
	for j := i - 1; j >= 0; j-- {
		if s.items[j].k == kSectionBreak {
			if s.items[j].x != nil {
				p = s.items[j].x.p
			}
			break
		}
	}
	p = p.with("sectionType", r.SectionType)
	for _, k := range []string{"defaultHeaderId", "defaultFooterId", "firstPageHeaderId", "firstPageFooterId", "evenPageHeaderId", "evenPageFooterId"} {
		p = p.with(k, nil)
	}
	ps := s.items[s.paragraphEnd(i)].para()
	s.splice(i, i, []item{newline(ps), {k: kSectionBreak, x: &attrs{p: p}}})
	return nil
}

var sectionStyleFields = []string{"columnProperties", "columnSeparatorStyle", "contentDirection", "marginTop", "marginBottom",
	"marginLeft", "marginRight", "marginHeader", "marginFooter", "pageNumberStart", "useFirstPageHeaderFooter", "flipPageOrientation"}

// updateSectionStyle updates every section the range overlaps.
func updateSectionStyle(d *document, r *docs.UpdateSectionStyleRequest) error {
	if r.Range != nil && r.Range.SegmentId != "" {
		return fmt.Errorf("Section styles can only be updated in the body.")
	}
	_, s, a, b, err := resolveTabRange(d, r.Range)
	if err != nil {
		return err
	}
	in := r.SectionStyle
	if in == nil {
		in = &docs.SectionStyle{}
	}
	switch in.ColumnSeparatorStyle {
	case "", "NONE", "BETWEEN_EACH_COLUMN":
	default:
		return fmt.Errorf("Invalid value at 'section_style.column_separator_style': %q", in.ColumnSeparatorStyle)
	}
	if len(in.ColumnProperties) > 3 {
		return fmt.Errorf("A section can have at most 3 columns.")
	}
	last := 0 // the section break governing a
	for j := 0; j <= a; j++ {
		if s.items[j].k == kSectionBreak {
			last = j
		}
	}
	breaks := []int{last}
	for j := a + 1; j < b; j++ {
		if s.items[j].k == kSectionBreak {
			breaks = append(breaks, j)
		}
	}
	for _, j := range breaks {
		it := &s.items[j]
		if it.x == nil {
			it.x = &attrs{}
		}
		np, err := maskUpdate(it.x.p, in, r.Fields, sectionStyleFields)
		if err != nil {
			return err
		}
		it.x.p = np
	}
	return nil
}

var documentStyleFields = []string{"background", "marginTop", "marginBottom", "marginLeft", "marginRight", "marginHeader",
	"marginFooter", "pageSize", "pageNumberStart", "useFirstPageHeaderFooter", "useEvenPageHeaderFooter",
	"useCustomHeaderFooterMargins", "flipPageOrientation", "documentFormat"}

func updateDocumentStyle(d *document, r *docs.UpdateDocumentStyleRequest) error {
	t, ok := d.tab(r.TabId)
	if !ok {
		return fmt.Errorf("The tab with ID %s was not found.", r.TabId)
	}
	in := r.DocumentStyle
	if in == nil {
		in = &docs.DocumentStyle{}
	}
	if ps := in.PageSize; ps != nil && (ps.Width != nil && ps.Width.Magnitude < 0 || ps.Height != nil && ps.Height.Magnitude < 0) {
		return fmt.Errorf("The page size must be positive.")
	}
	np, err := maskUpdate(t.DocStyle, in, r.Fields, documentStyleFields)
	if err != nil {
		return err
	}
	t.DocStyle = np
	return nil
}

func createNamedRange(d *document, r *docs.CreateNamedRangeRequest) (string, error) {
	if r.Name == "" || len([]rune(r.Name)) > 256 {
		return "", fmt.Errorf("The name must be between 1 and 256 characters.")
	}
	_, s, a, b, err := resolveTabRange(d, r.Range)
	if err != nil {
		return "", err
	}
	id := d.newObjectID("kix.")
	s.ranges = append(s.ranges, namedRange{id: id, name: r.Name, a: a, b: b})
	return id, nil
}

// criteriaTabs answers the tabs a tabsCriteria selects (all when empty).
func criteriaTabs(d *document, c *docs.TabsCriteria) ([]*tab, error) {
	if c == nil || len(c.TabIds) == 0 {
		return d.Tabs, nil
	}
	var out []*tab
	for _, id := range c.TabIds {
		t, ok := d.tab(id)
		if !ok {
			return nil, fmt.Errorf("The tab with ID %s was not found.", id)
		}
		out = append(out, t)
	}
	return out, nil
}

func namedRangeSelector(id, name string) (func(namedRange) bool, error) {
	switch {
	case id != "" && name != "":
		return nil, fmt.Errorf("Exactly one of namedRangeId or name must be specified.")
	case id != "":
		return func(r namedRange) bool { return r.id == id }, nil
	case name != "":
		return func(r namedRange) bool { return r.name == name }, nil
	}
	return nil, fmt.Errorf("Exactly one of namedRangeId or name must be specified.")
}

func deleteNamedRange(d *document, r *docs.DeleteNamedRangeRequest) error {
	match, err := namedRangeSelector(r.NamedRangeId, r.Name)
	if err != nil {
		return err
	}
	tabs, err := criteriaTabs(d, r.TabsCriteria)
	if err != nil {
		return err
	}
	found := false
	for _, t := range tabs {
		for _, s := range allSegments(t) {
			n := len(s.ranges)
			s.ranges = slices.DeleteFunc(s.ranges, match)
			found = found || len(s.ranges) != n
		}
	}
	if !found && r.NamedRangeId != "" {
		return fmt.Errorf("The named range with ID %s was not found.", r.NamedRangeId)
	}
	return nil
}

// replaceNamedRangeContent puts text in the first range of each selected
// named range and deletes the content of its other ranges.
func replaceNamedRangeContent(d *document, r *docs.ReplaceNamedRangeContentRequest) error {
	match, err := namedRangeSelector(r.NamedRangeId, r.NamedRangeName)
	if err != nil {
		return err
	}
	tabs, err := criteriaTabs(d, r.TabsCriteria)
	if err != nil {
		return err
	}
	found := false
	for _, t := range tabs {
		// Each named range id is replaced once: its first range (in
		// segment order, body first) gets the text.
		done := map[string]bool{}
		for _, segID := range append([]string{""}, sortedSegmentIDs(t)...) {
			s, _ := t.segment(segID)
			for k := len(s.ranges) - 1; k >= 0; k-- {
				if k >= len(s.ranges) {
					continue
				}
				nr := s.ranges[k]
				if !match(nr) {
					continue
				}
				found = true
				first := !done[nr.id] && isFirstRange(s, nr)
				if err := replaceRangeContent(s, nr, first, toUnits(r.Text)); err != nil {
					return err
				}
				if first {
					done[nr.id] = true
				}
			}
		}
	}
	if !found {
		return fmt.Errorf("The named range was not found.")
	}
	return nil
}

func sortedSegmentIDs(t *tab) []string {
	var ids []string
	for id := range allSegments(t) {
		if id != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func isFirstRange(s *segment, nr namedRange) bool {
	for _, o := range s.ranges {
		if o.id == nr.id && o.a < nr.a {
			return false
		}
	}
	return true
}

// replaceRangeContent deletes the text of [nr.a, nr.b) (not its final
// newline or any structure) and, for the first range, inserts text there;
// the named range then covers the new text.
func replaceRangeContent(s *segment, nr namedRange, first bool, text []uint16) error {
	a, b := nr.a, nr.b
	for k := a; k < b; k++ {
		if !s.items[k].k.inline() || k == len(s.items)-1 {
			return fmt.Errorf("Replacing the named range's content would leave an invalid document structure.")
		}
	}
	var ins []item
	if first && len(text) > 0 {
		ts := s.items[a].ts
		ps := s.items[s.paragraphEnd(a)].ps
		for _, u := range text {
			it := item{k: kChar, u: u, ts: ts}
			if u == '\n' {
				it.ps = ps
			}
			ins = append(ins, it)
		}
	}
	s.splice(a, b, ins)
	if len(ins) > 0 {
		// The range covers the new text (splice kept it as [a, a+len)
		// unless it had been dropped as empty).
		for k := range s.ranges {
			if s.ranges[k].id == nr.id && s.ranges[k].a == a {
				return nil
			}
		}
		s.ranges = append(s.ranges, namedRange{id: nr.id, name: nr.name, a: a, b: a + len(ins)})
	}
	return nil
}

func addDocumentTab(d *document, r *docs.AddDocumentTabRequest) (*docs.TabProperties, error) {
	in := r.TabProperties
	if in == nil {
		in = &docs.TabProperties{}
	}
	if in.TabId != "" {
		return nil, fmt.Errorf("The tab ID is output only and cannot be set.")
	}
	if in.ParentTabId != "" {
		if _, ok := d.tabByID(in.ParentTabId); !ok {
			return nil, fmt.Errorf("The parent tab with ID %s was not found.", in.ParentTabId)
		}
		if d.depth(in.ParentTabId) >= 2 {
			return nil, fmt.Errorf("Tabs can be nested at most 3 levels deep.")
		}
	}
	// An index of 0 cannot be told from an absent one once decoded: both
	// append the tab after its siblings.
	siblings := d.children(in.ParentTabId)
	if in.Index < 0 || int(in.Index) > len(siblings) {
		return nil, fmt.Errorf("The tab index %d is out of range.", in.Index)
	}
	idx := int(in.Index)
	if idx == 0 {
		idx = len(siblings)
	}
	title := in.Title
	if title == "" {
		title = fmt.Sprintf("Tab %d", len(d.Tabs)+1)
	}
	t := newTab(d.newObjectID("t."), title)
	t.ParentID, t.IconEmoji = in.ParentTabId, in.IconEmoji
	d.placeTab(t, idx)
	return &docs.TabProperties{TabId: t.ID, Title: t.Title, ParentTabId: t.ParentID, IconEmoji: t.IconEmoji,
		Index: int64(idx), NestingLevel: int64(d.depth(t.ID))}, nil
}

func deleteTab(d *document, r *docs.DeleteTabRequest) error {
	if _, ok := d.tabByID(r.TabId); !ok || r.TabId == "" {
		return fmt.Errorf("The tab with ID %s was not found.", r.TabId)
	}
	gone := map[string]bool{r.TabId: true}
	for changed := true; changed; {
		changed = false
		for _, t := range d.Tabs {
			if gone[t.ParentID] && !gone[t.ID] {
				gone[t.ID], changed = true, true
			}
		}
	}
	if len(gone) == len(d.Tabs) {
		return fmt.Errorf("A document must keep at least one tab.")
	}
	d.Tabs = slices.DeleteFunc(d.Tabs, func(t *tab) bool { return gone[t.ID] })
	return nil
}

func updateDocumentTabProperties(d *document, r *docs.UpdateDocumentTabPropertiesRequest) error {
	in := r.TabProperties
	if in == nil || in.TabId == "" {
		return fmt.Errorf("The tab ID must be specified.")
	}
	t, ok := d.tabByID(in.TabId)
	if !ok {
		return fmt.Errorf("The tab with ID %s was not found.", in.TabId)
	}
	set, err := fieldSet(r.Fields, []string{"title", "iconEmoji", "index", "parentTabId"})
	if err != nil {
		return err
	}
	if set["title"] {
		t.Title = in.Title
		if t.Title == "" {
			return fmt.Errorf("The tab title must not be empty.")
		}
	}
	if set["iconEmoji"] {
		t.IconEmoji = in.IconEmoji
	}
	if set["parentTabId"] || set["index"] {
		parent := t.ParentID
		if set["parentTabId"] {
			parent = in.ParentTabId
			for p := parent; p != ""; {
				if p == t.ID {
					return fmt.Errorf("A tab cannot be moved under itself.")
				}
				pt, ok := d.tabByID(p)
				if !ok {
					return fmt.Errorf("The parent tab with ID %s was not found.", parent)
				}
				p = pt.ParentID
			}
		}
		d.Tabs = slices.DeleteFunc(d.Tabs, func(x *tab) bool { return x == t })
		t.ParentID = parent
		idx := int(in.Index)
		if !set["index"] {
			idx = len(d.children(parent))
		}
		if idx < 0 || idx > len(d.children(parent)) {
			return fmt.Errorf("The tab index %d is out of range.", in.Index)
		}
		d.placeTab(t, idx)
		if d.maxDepth() > 2 {
			return fmt.Errorf("Tabs can be nested at most 3 levels deep.")
		}
	}
	return nil
}

// deletePositionedObject: the emulator's documents hold no positioned
// objects (no request creates one), so every id is unknown, as Google
// answers for an id that does not exist.
func deletePositionedObject(d *document, r *docs.DeletePositionedObjectRequest) error {
	if _, ok := d.tab(r.TabId); !ok {
		return fmt.Errorf("The tab with ID %s was not found.", r.TabId)
	}
	return fmt.Errorf("The positioned object with ID %s was not found.", r.ObjectId)
}
