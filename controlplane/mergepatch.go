package controlplane

import "encoding/json"

// mergePatch applies an RFC 7386 JSON merge patch to doc.
func mergePatch(doc, patch json.RawMessage) (json.RawMessage, error) {
	var p any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	pm, ok := p.(map[string]any)
	if !ok {
		return patch, nil
	}
	var d any
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	return json.Marshal(mergeValue(d, pm))
}

func mergeValue(target any, patch map[string]any) any {
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range patch {
		if v == nil {
			delete(t, k)
			continue
		}
		if pm, ok := v.(map[string]any); ok {
			t[k] = mergeValue(t[k], pm)
			continue
		}
		t[k] = v
	}
	return t
}
