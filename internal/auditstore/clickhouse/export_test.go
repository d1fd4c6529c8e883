package clickhouse

// SetKeepLiteralMax sets how many kept ids a deletion carries as literals
// (above: lifecycle_keep) until the returned func restores it.
func SetKeepLiteralMax(n int) (restore func()) {
	old := keepLiteralMax
	keepLiteralMax = n
	return func() { keepLiteralMax = old }
}

// OnExpiryMutating makes DeleteExpired call f once it has created its
// mutations, before it waits for them, until the returned func restores it.
func OnExpiryMutating(f func()) (restore func()) {
	old := expiryMutating
	expiryMutating = f
	return func() { expiryMutating = old }
}
