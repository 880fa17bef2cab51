//go:build race

package elasticidl

// raceEnabled: the race detector slows every step about tenfold.
const raceEnabled = true
