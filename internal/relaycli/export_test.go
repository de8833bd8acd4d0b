package relaycli

import "time"

// SetConfigPollInterval sets how often relay run --config looks for a
// changed fleet file, until the test ends.
func SetConfigPollInterval(d time.Duration) (restore func()) {
	old := configPollInterval
	configPollInterval = d
	return func() { configPollInterval = old }
}
