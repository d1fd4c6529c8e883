package schemas

import (
	"errors"
	"fmt"
)

// ErrUnknownEnum is returned when an enum name is not one of the seed's names.
var ErrUnknownEnum = errors.New("unknown enum name")

// AuditAction is what happened to a resource (seeds/000, AuditAction).
type AuditAction uint8

// AuditAction values with the numbers of the seed.
const (
	AuditActionUnspecified AuditAction = 0
	AuditActionCreated     AuditAction = 1
	AuditActionUpdated     AuditAction = 2
	AuditActionDeleted     AuditAction = 3
	AuditActionDisabled    AuditAction = 4
)

var auditActionNames = []string{
	"AUDIT_ACTION_UNSPECIFIED",
	"AUDIT_ACTION_CREATED",
	"AUDIT_ACTION_UPDATED",
	"AUDIT_ACTION_DELETED",
	"AUDIT_ACTION_DISABLED",
}

// AuditSource is the channel through which an action was taken (seeds/000, AuditSource).
type AuditSource uint8

// AuditSource values with the numbers of the seed.
const (
	AuditSourceUnspecified AuditSource = 0
	AuditSourceAPI         AuditSource = 1
	AuditSourceDashboard   AuditSource = 2
	AuditSourceCLI         AuditSource = 3
	AuditSourceSDK         AuditSource = 4
	AuditSourceSystem      AuditSource = 5
)

var auditSourceNames = []string{
	"AUDIT_SOURCE_UNSPECIFIED",
	"AUDIT_SOURCE_API",
	"AUDIT_SOURCE_DASHBOARD",
	"AUDIT_SOURCE_CLI",
	"AUDIT_SOURCE_SDK",
	"AUDIT_SOURCE_SYSTEM",
}

// ResourceType is the kind of resource an action affected (seeds/000, ResourceType).
type ResourceType uint8

// ResourceType values with the numbers of the seed.
const (
	ResourceTypeUnspecified    ResourceType = 0
	ResourceTypeAPIKey         ResourceType = 1
	ResourceTypeCustomer       ResourceType = 2
	ResourceTypeInvitation     ResourceType = 3
	ResourceTypeOrganization   ResourceType = 4
	ResourceTypeProject        ResourceType = 5
	ResourceTypeProjectMember  ResourceType = 6
	ResourceTypeUser           ResourceType = 7
	ResourceTypeWorker         ResourceType = 8
	ResourceTypeGateway        ResourceType = 9
	ResourceTypePlugin         ResourceType = 10
	ResourceTypeHook           ResourceType = 11
	ResourceTypeModel          ResourceType = 12
	ResourceTypeAuthProvider   ResourceType = 13
	ResourceTypeSecret         ResourceType = 14
	ResourceTypeUserConnection ResourceType = 15
	ResourceTypeDeployment     ResourceType = 16
	ResourceTypeSetting        ResourceType = 17
)

var resourceTypeNames = []string{
	"RESOURCE_TYPE_UNSPECIFIED",
	"RESOURCE_TYPE_API_KEY",
	"RESOURCE_TYPE_CUSTOMER",
	"RESOURCE_TYPE_INVITATION",
	"RESOURCE_TYPE_ORGANIZATION",
	"RESOURCE_TYPE_PROJECT",
	"RESOURCE_TYPE_PROJECT_MEMBER",
	"RESOURCE_TYPE_USER",
	"RESOURCE_TYPE_WORKER",
	"RESOURCE_TYPE_GATEWAY",
	"RESOURCE_TYPE_PLUGIN",
	"RESOURCE_TYPE_HOOK",
	"RESOURCE_TYPE_MODEL",
	"RESOURCE_TYPE_AUTH_PROVIDER",
	"RESOURCE_TYPE_SECRET",
	"RESOURCE_TYPE_USER_CONNECTION",
	"RESOURCE_TYPE_DEPLOYMENT",
	"RESOURCE_TYPE_SETTING",
}

func enumName(names []string, v uint8, kind string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}

func enumParse(names []string, s, kind string) (uint8, error) {
	for i, n := range names {
		if n == s {
			return uint8(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %s %q", ErrUnknownEnum, kind, s)
}

func (a AuditAction) String() string  { return enumName(auditActionNames, uint8(a), "AuditAction") }
func (s AuditSource) String() string  { return enumName(auditSourceNames, uint8(s), "AuditSource") }
func (r ResourceType) String() string { return enumName(resourceTypeNames, uint8(r), "ResourceType") }

// Valid reports whether the value is one of the seed's numbers.
func (a AuditAction) Valid() bool { return int(a) < len(auditActionNames) }

// Valid reports whether the value is one of the seed's numbers.
func (s AuditSource) Valid() bool { return int(s) < len(auditSourceNames) }

// Valid reports whether the value is one of the seed's numbers.
func (r ResourceType) Valid() bool { return int(r) < len(resourceTypeNames) }

// ParseAuditAction parses a name such as AUDIT_ACTION_CREATED.
func ParseAuditAction(s string) (AuditAction, error) {
	v, err := enumParse(auditActionNames, s, "AuditAction")
	return AuditAction(v), err
}

// ParseAuditSource parses a name such as AUDIT_SOURCE_API.
func ParseAuditSource(s string) (AuditSource, error) {
	v, err := enumParse(auditSourceNames, s, "AuditSource")
	return AuditSource(v), err
}

// ParseResourceType parses a name such as RESOURCE_TYPE_PROJECT.
func ParseResourceType(s string) (ResourceType, error) {
	v, err := enumParse(resourceTypeNames, s, "ResourceType")
	return ResourceType(v), err
}

// AuditActionNames returns the names in number order.
func AuditActionNames() []string { return append([]string(nil), auditActionNames...) }

// AuditSourceNames returns the names in number order.
func AuditSourceNames() []string { return append([]string(nil), auditSourceNames...) }

// ResourceTypeNames returns the names in number order.
func ResourceTypeNames() []string { return append([]string(nil), resourceTypeNames...) }

func (a AuditAction) MarshalText() ([]byte, error)  { return []byte(a.String()), nil }
func (s AuditSource) MarshalText() ([]byte, error)  { return []byte(s.String()), nil }
func (r ResourceType) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

func (a *AuditAction) UnmarshalText(b []byte) error {
	v, err := ParseAuditAction(string(b))
	*a = v
	return err
}

func (s *AuditSource) UnmarshalText(b []byte) error {
	v, err := ParseAuditSource(string(b))
	*s = v
	return err
}

func (r *ResourceType) UnmarshalText(b []byte) error {
	v, err := ParseResourceType(string(b))
	*r = v
	return err
}
