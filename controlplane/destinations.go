package controlplane

import (
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/destination"
)

// The destination model lives in controlplane/destination, which the
// delivery role imports without the admin API.
type (
	Destination         = destination.Destination
	DestinationSecrets  = destination.DestinationSecrets
	ResolvedDestination = destination.ResolvedDestination
	DeliveryStatus      = destination.DeliveryStatus
)

// Destination types and formats, delivery states, the delivery bucket:
// see controlplane/destination.
const (
	DestHTTPS        = destination.DestHTTPS
	DestSplunkHEC    = destination.DestSplunkHEC
	FormatJSON       = destination.FormatJSON
	FormatOCSF       = destination.FormatOCSF
	DeliverBucket    = destination.DeliverBucket
	DeliveryActive   = destination.DeliveryActive
	DeliveryFailing  = destination.DeliveryFailing
	DeliveryPaused   = destination.DeliveryPaused
	DeliveryStarting = destination.DeliveryStarting
)

// DeliveryStatusKey is destination.DeliveryStatusKey.
func DeliveryStatusKey(id uuid.UUID) string { return destination.DeliveryStatusKey(id) }
