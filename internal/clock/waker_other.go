//go:build !linux

package clock

import (
	"os"
	"time"
)

// openTimerfd returns nil: only Linux has a timer that counts suspend.
func openTimerfd() *os.File { return nil }

func setTimerfd(*os.File, time.Duration) {}
