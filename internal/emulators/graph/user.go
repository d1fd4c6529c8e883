package graph

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// JobTitles for /me: the emulator answers what AddMailbox or SeedSample set.

func (s *Server) getMe(w http.ResponseWriter, r *http.Request) {
	g, ok := s.auth(w, r, ScopeUserRead, "User.ReadWrite", "User.ReadBasic.All", "User.Read.All")
	if !ok {
		return
	}
	s.mu.Lock()
	mb := s.mailboxLocked(g)
	given, sur, _ := strings.Cut(mb.name, " ")
	out := map[string]any{
		"@odata.context":    baseURL(r) + "/$metadata#users/$entity",
		"businessPhones":    []any{},
		"displayName":       mb.name,
		"givenName":         nilIfEmpty(given),
		"jobTitle":          nilIfEmpty(mb.jobTitle),
		"mail":              mb.email,
		"mobilePhone":       nil,
		"officeLocation":    nil,
		"preferredLanguage": mb.settings.Locale,
		"surname":           nilIfEmpty(sur),
		"userPrincipalName": mb.email,
		"id":                userGUID(mb.userID),
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func dateTimeTZ(t time.Time, tz string) map[string]any {
	if t.IsZero() {
		return map[string]any{"dateTime": nil, "timeZone": tz}
	}
	return map[string]any{"dateTime": t.UTC().Format("2006-01-02T15:04:05.0000000"), "timeZone": tz}
}

func (s *Server) automaticReplies(ms MailboxSettings) map[string]any {
	return map[string]any{
		"status":                 ms.AutoReplyStatus,
		"externalAudience":       ms.ExternalAudience,
		"internalReplyMessage":   ms.InternalReply,
		"externalReplyMessage":   ms.ExternalReply,
		"scheduledStartDateTime": dateTimeTZ(ms.ScheduledStart, "UTC"),
		"scheduledEndDateTime":   dateTimeTZ(ms.ScheduledEnd, "UTC"),
	}
}

func (s *Server) getMailboxSettings(w http.ResponseWriter, r *http.Request) {
	g, ok := s.auth(w, r, ScopeMailboxSettingsRead, ScopeMailboxSettingsReadWrite)
	if !ok {
		return
	}
	s.mu.Lock()
	mb := s.mailboxLocked(g)
	ms := mb.settings
	archive := mb.wellKnown["archive"].id
	s.mu.Unlock()
	days := make([]any, 0, len(ms.WorkDays))
	for _, d := range ms.WorkDays {
		days = append(days, d)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.context":                        fmt.Sprintf("%s/$metadata#users('%s')/mailboxSettings", baseURL(r), url.PathEscape(userGUID(g.UserID))),
		"archiveFolder":                         archive,
		"timeZone":                              ms.TimeZone,
		"delegateMeetingMessageDeliveryOptions": "sendToDelegateOnly",
		"dateFormat":                            "M/d/yyyy",
		"timeFormat":                            "h:mm tt",
		"userPurpose":                           "user",
		"automaticRepliesSetting":               s.automaticReplies(ms),
		"language":                              map[string]any{"locale": ms.Locale, "displayName": ms.LocaleName},
		"workingHours": map[string]any{"daysOfWeek": days, "startTime": ms.WorkStart, "endTime": ms.WorkEnd,
			"timeZone": map[string]any{"name": ms.TimeZone}},
	})
}

func (s *Server) getAutomaticReplies(w http.ResponseWriter, r *http.Request) {
	g, ok := s.auth(w, r, ScopeMailboxSettingsRead, ScopeMailboxSettingsReadWrite)
	if !ok {
		return
	}
	s.mu.Lock()
	ms := s.mailboxLocked(g).settings
	s.mu.Unlock()
	out := s.automaticReplies(ms)
	out["@odata.context"] = fmt.Sprintf("%s/$metadata#users('%s')/mailboxSettings/automaticRepliesSetting", baseURL(r), url.PathEscape(userGUID(g.UserID)))
	writeJSON(w, http.StatusOK, out)
}
