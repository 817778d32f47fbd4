package odata

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// referenceDateTime is AppendDateTime's result as time.Time formats it:
// what the arithmetic of civilDate must give for every tick.
func referenceDateTime(ticks int64, fixed bool) string {
	s := TimeOf(ticks).Format("2006-01-02T15:04:05.0000000")
	if !fixed {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	return s + "Z"
}

func TestAppendDateTime(t *testing.T) {
	t.Parallel()
	day := int64(ticksPerDay)
	cases := []int64{
		0, 1, day - 1, day, MinDateTime, MinDateTime - 1, MaxDateTime, MaxDateTime + 1,
		unixEpochTicks, unixEpochTicks - 1,
		Ticks(time.Date(2000, 2, 29, 23, 59, 59, 999999900, time.UTC)),
		Ticks(time.Date(1900, 2, 28, 12, 0, 0, 0, time.UTC)),
		Ticks(time.Date(1900, 3, 1, 0, 0, 0, 0, time.UTC)),
		Ticks(time.Date(2100, 12, 31, 0, 0, 0, 100, time.UTC)),
		Ticks(time.Date(2026, 1, 2, 3, 4, 5, 123456700, time.UTC)),
		Ticks(time.Date(999, 12, 31, 23, 59, 59, 0, time.UTC)),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		cases = append(cases, rng.Int64N(MaxDateTime+1))
	}
	// Every day of four centuries, at a tick that varies.
	for d := int64(0); d < 146097+366; d++ {
		cases = append(cases, MinDateTime+d*day+rng.Int64N(day))
	}
	for _, ticks := range cases {
		for _, fixed := range []bool{false, true} {
			if got, want := string(AppendDateTime(nil, ticks, fixed)), referenceDateTime(ticks, fixed); got != want {
				t.Fatalf("AppendDateTime(%d, %v) = %s, want %s", ticks, fixed, got, want)
			}
		}
	}
}
