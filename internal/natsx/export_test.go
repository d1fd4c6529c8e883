package natsx

import (
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// AppCredsForTest signs a user of the application account with perms: the
// tests show with it what such a user could do that a stream credential,
// in its own account, cannot.
func (a *Auth) AppCredsForTest(perms jwt.Permissions) ([]byte, error) {
	u, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	uc := jwt.NewUserClaims(pub(u))
	uc.Permissions = perms
	tok, err := uc.Encode(a.account)
	if err != nil {
		return nil, err
	}
	seed, _ := u.Seed()
	return jwt.FormatUserConfig(tok, seed)
}
