package chserver

// SetPickPorts replaces how StartWith picks a server's two ports (each
// pick is given the real one) until the returned func restores it.
func SetPickPorts(pick func(real func() ([]int, error)) ([]int, error)) (restore func()) {
	orig := pickPorts
	pickPorts = func() ([]int, error) { return pick(orig) }
	return func() { pickPorts = orig }
}
