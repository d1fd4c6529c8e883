#!/usr/bin/env python3
"""Generates the docs.Document JSON fixtures (shapes from the Docs API reference) with exact
UTF-16 indices. Run from this directory: python3 gen_fixtures.py"""
import json

def u16(s): return len(s.encode('utf-16-le')) // 2

class Seg:
    def __init__(self, start=0, section_break=True):
        self.i = start; self.content = []
        if section_break:
            self.content.append({"endIndex": 1, "sectionBreak": {"sectionStyle": {"columnSeparatorStyle": "NONE", "contentDirection": "LEFT_TO_RIGHT", "sectionType": "CONTINUOUS"}}})
            self.i = 1
    def para(self, parts, style="NORMAL_TEXT", bullet=None, into=None):
        into = self.content if into is None else into
        start = self.i; els = []
        parts = list(parts)
        if not parts or not isinstance(parts[-1], tuple) or parts[-1][0] != 'text' or not parts[-1][1].endswith('\n'):
            parts.append(('text', '\n', {}))
        for p in parts:
            kind = p[0]
            if kind == 'text':
                n = u16(p[1]); el = {"startIndex": self.i, "endIndex": self.i + n, "textRun": {"content": p[1], "textStyle": p[2]}}
            else:
                n = 1; el = {"startIndex": self.i, "endIndex": self.i + 1, kind: p[1]}
            if el["startIndex"] == 0: del el["startIndex"]
            els.append(el); self.i += n
        pe = {"startIndex": start, "endIndex": self.i, "paragraph": {"elements": els, "paragraphStyle": {"namedStyleType": style, "direction": "LEFT_TO_RIGHT"}}}
        if start == 0: del pe["startIndex"]
        if bullet: pe["paragraph"]["bullet"] = bullet
        into.append(pe)
    def table(self, cells_text):
        start = self.i; self.i += 1
        rows = []
        for row in cells_text:
            rs = self.i; self.i += 1; cells = []
            for txt in row:
                cs = self.i; self.i += 1; content = []
                self.para([('text', txt + '\n', {})], into=content)
                cells.append({"startIndex": cs, "endIndex": self.i, "content": content, "tableCellStyle": {"rowSpan": 1, "columnSpan": 1}})
            rows.append({"startIndex": rs, "endIndex": self.i, "tableCells": cells, "tableRowStyle": {"minRowHeight": {"unit": "PT"}}})
        self.content.append({"startIndex": start, "endIndex": self.i, "table": {"rows": len(rows), "columns": len(rows[0]["tableCells"]), "tableRows": rows}})

rgb = lambda r, g, b: {"color": {"rgbColor": {"red": r, "green": g, "blue": b}}}
lists = {
    "kix.bul": {"listProperties": {"nestingLevels": [{"glyphSymbol": "●", "glyphFormat": "%0"}, {"glyphSymbol": "○", "glyphFormat": "%1"}]}},
    "kix.num": {"listProperties": {"nestingLevels": [{"glyphType": "DECIMAL", "glyphFormat": "%0."}, {"glyphType": "ALPHA", "glyphFormat": "%1."}]}},
}

def kitchen_sink():
    b = Seg()
    b.para([('text', 'Kitchen sink\n', {})], "TITLE")
    b.para([('text', 'Every element kind\n', {})], "SUBTITLE")
    for n in range(1, 7):
        b.para([('text', f'Heading {n}\n', {})], f"HEADING_{n}")
    b.para([('text', 'Bold', {"bold": True}), ('text', ' and ', {}), ('text', 'Times', {"weightedFontFamily": {"fontFamily": "Times New Roman", "weight": 400}, "italic": True}),
            ('text', ' red', {"foregroundColor": rgb(1, 0, 0), "fontSize": {"magnitude": 14, "unit": "PT"}}),
            ('text', ' link', {"link": {"url": "https://example.com/a b?x=\"1\""}, "underline": True}), ('text', '\n', {})])
    b.para([('text', 'Emoji 😀 and 👍🏽 count two each\n', {"bold": True})])
    b.para([('text', '中文文本，日本語のテキスト、한국어\n', {})])
    b.para([('text', '[not an annotation] {braces} back\\slash\vsoft break\n', {})])
    b.para([('text', '@not a directive\n', {})])
    b.para([('text', 'first\n', {})], bullet={"listId": "kix.bul"})
    b.para([('text', 'nested\n', {})], bullet={"listId": "kix.bul", "nestingLevel": 1})
    b.para([('text', 'one\n', {})], bullet={"listId": "kix.num"})
    b.para([('text', 'one.a\n', {})], bullet={"listId": "kix.num", "nestingLevel": 1})
    b.para([('text', 'Numbered heading\n', {})], "HEADING_2", bullet={"listId": "kix.num"})
    b.table([["a1", "b1 😀"], ["a2", "表"]])
    b.para([('text', 'Image ', {}), ('inlineObjectElement', {"inlineObjectId": "kix.img1", "textStyle": {}}),
            ('text', ' note', {}), ('footnoteReference', {"footnoteId": "kix.fn1", "footnoteNumber": "1", "textStyle": {"baselineOffset": "SUPERSCRIPT"}}),
            ('text', ' ', {}), ('pageBreak', {"textStyle": {}}), ('text', 'after break ', {}),
            ('person', {"personId": "p1", "personProperties": {"email": "ann@example.com", "name": "Ann O'Brien"}, "textStyle": {}}),
            ('text', ' ', {}), ('dateElement', {"dateId": "d1", "dateElementProperties": {"displayText": "Jan 5, 2026", "timestamp": "2026-01-05T00:00:00Z"}, "textStyle": {}}),
            ('text', ' ', {}), ('richLink', {"richLinkId": "r1", "richLinkProperties": {"uri": "https://docs.google.com/document/d/x", "title": "Spec {v2}", "mimeType": "application/vnd.google-apps.document"}, "textStyle": {}}),
            ('text', ' ', {}), ('horizontalRule', {"textStyle": {}}), ('columnBreak', {"textStyle": {}}), ('equation', {}),
            ('text', '\n', {})])
    b.para([('text', '\n', {})])
    h = Seg(0, False); h.para([('text', 'Header text\n', {})])
    f = Seg(0, False); f.para([('text', 'Page ', {}), ('autoText', {"type": "PAGE_NUMBER", "textStyle": {}}), ('text', '\n', {})])
    fn = Seg(0, False); fn.para([('text', ' Footnote 😀 text\n', {})])
    return {"documentId": "1KitchenSinkDoc", "title": "Kitchen sink", "revisionId": "ALm37BVrev1",
            "body": {"content": b.content}, "headers": {"kix.hdr1": {"headerId": "kix.hdr1", "content": h.content}},
            "footers": {"kix.ftr1": {"footerId": "kix.ftr1", "content": f.content}},
            "footnotes": {"kix.fn1": {"footnoteId": "kix.fn1", "content": fn.content}}, "lists": lists,
            "inlineObjects": {"kix.img1": {"objectId": "kix.img1", "inlineObjectProperties": {"embeddedObject": {"imageProperties": {"contentUri": "https://lh3.googleusercontent.com/x"}}}}}}

def tabs():
    def tab(tid, idx, title, text, level=0, parent=None, children=()):
        s = Seg(); s.para([('text', text + '\n', {})], "HEADING_1"); s.para([('text', 'Body of ' + title + ' 😀\n', {})])
        props = {"tabId": tid, "title": title, "index": idx}
        if level: props["nestingLevel"] = level
        if parent: props["parentTabId"] = parent
        t = {"tabProperties": props, "documentTab": {"body": {"content": s.content}, "lists": {}}}
        if children: t["childTabs"] = list(children)
        return t
    child = tab("t.child", 0, "Child tab", "Child", 1, "t.0")
    return {"documentId": "1TabsDoc", "title": "Tabs", "revisionId": "ALm37BVrev9",
            "tabs": [tab("t.0", 0, "First", "One", children=[child]), tab("t.1", 1, "Second \"quoted\"", "Two")]}

for name, doc in (("kitchen_sink", kitchen_sink()), ("tabs", tabs())):
    with open(name + ".json", "w") as fh:
        json.dump(doc, fh, indent=1, ensure_ascii=False); fh.write("\n")
