package odata

import (
	"strconv"
	"time"
)

// DateTime values and the Timestamp are counted in ticks: 100 ns intervals
// since 0001-01-01T00:00:00Z, the resolution of .NET's DateTime and of the
// Table service. time.Time is avoided on the hot path and PostgreSQL's
// timestamptz (1 µs) would lose the seventh fractional digit.
const (
	ticksPerSecond  = 10_000_000
	unixEpochTicks  = 621_355_968_000_000_000
	MinDateTime     = 504_911_232_000_000_000   // 1601-01-01T00:00:00Z
	MaxDateTime     = 3_155_378_975_999_999_999 // 9999-12-31T23:59:59.9999999Z
	dateTimeFixedSz = len("2006-01-02T15:04:05.0000000Z")
)

// Ticks converts a time to ticks, truncating below 100 ns.
func Ticks(t time.Time) int64 {
	return unixEpochTicks + t.Unix()*ticksPerSecond + int64(t.Nanosecond()/100)
}

// TimeOf converts ticks to a UTC time.
func TimeOf(ticks int64) time.Time {
	d := ticks - unixEpochTicks
	sec, rem := d/ticksPerSecond, d%ticksPerSecond
	if rem < 0 {
		sec--
		rem += ticksPerSecond
	}
	return time.Unix(sec, rem*100).UTC()
}

// ValidDateTime reports whether ticks lies in the range the service accepts.
func ValidDateTime(ticks int64) bool { return ticks >= MinDateTime && ticks <= MaxDateTime }

// AppendDateTime appends ticks as yyyy-MM-ddTHH:mm:ss[.fffffff]Z. With fixed,
// all seven fractional digits are written (the stored form, whose text order
// is time order); otherwise trailing zeros are dropped, as Azure writes them.
//
// Every entity of a page writes its Timestamp and its ETag's, so the date
// comes from the day count by integer arithmetic (civilDate), not through
// time.Time.
func AppendDateTime(dst []byte, ticks int64, fixed bool) []byte {
	var year, month, day, hour, min, sec, frac int
	if ticks >= 0 {
		days, rest := ticks/ticksPerDay, ticks%ticksPerDay
		year, month, day = civilDate(days)
		frac = int(rest % ticksPerSecond)
		secs := int(rest / ticksPerSecond)
		hour, min, sec = secs/3600, secs/60%60, secs%60
	} else {
		t := TimeOf(ticks)
		var m time.Month
		year, m, day = t.Date()
		month = int(m)
		hour, min, sec = t.Clock()
		frac = int((ticks - unixEpochTicks) % ticksPerSecond)
		if frac < 0 {
			frac += ticksPerSecond
		}
	}
	if year >= 1000 && year <= 9999 {
		dst = append2(append2(dst, year/100), year%100)
	} else {
		dst = appendInt(dst, year, 4)
	}
	dst = append(dst, '-')
	dst = append2(dst, month)
	dst = append(dst, '-')
	dst = append2(dst, day)
	dst = append(dst, 'T')
	dst = append2(dst, hour)
	dst = append(dst, ':')
	dst = append2(dst, min)
	dst = append(dst, ':')
	dst = append2(dst, sec)
	if fixed || frac != 0 {
		dst = append(dst, '.')
		n := 7
		if !fixed {
			for frac%10 == 0 {
				frac /= 10
				n--
			}
		}
		dst = appendInt(dst, frac, n)
	}
	return append(dst, 'Z')
}

const ticksPerDay = 86400 * ticksPerSecond

// civilDate returns the proleptic Gregorian date of the day days after
// 0001-01-01 (days >= 0): the days are counted from 0000-03-01, so that a
// leap day ends its year, in eras of 400 years of 146097 days.
func civilDate(days int64) (year, month, day int) {
	z := int(days) + 306 // 0000-03-01 to 0001-01-01
	era := z / 146097
	doe := z - era*146097                                  // day of the era, 0..146096
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // year of the era, 0..399
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // day of the year from March 1, 0..365
	mp := (5*doy + 2) / 153                                // month from March, 0..11
	day = doy - (153*mp+2)/5 + 1
	month = mp + 3
	if month > 12 {
		month -= 12
	}
	year = yoe + era*400
	if month <= 2 {
		year++
	}
	return year, month, day
}

// append2 appends v (0..99) as two digits.
func append2(dst []byte, v int) []byte {
	return append(dst, byte('0'+v/10), byte('0'+v%10))
}

// FormatDateTime returns the wire form of ticks (trailing zeros dropped).
func FormatDateTime(ticks int64) string { return string(AppendDateTime(nil, ticks, false)) }

func appendInt(dst []byte, v, width int) []byte {
	var buf [20]byte
	i := len(buf)
	for v > 0 || width > 0 {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		width--
	}
	return append(dst, buf[i:]...)
}

// ParseDateTime parses an ISO 8601 date-time as clients send it:
// yyyy-MM-dd[THH:mm[:ss[.f…]]][Z|±hh:mm]. A missing zone means UTC, digits
// beyond the seventh fractional one are truncated. It does not check the
// 1601..9999 range; see ValidDateTime.
func ParseDateTime(s string) (int64, bool) {
	p := dtParser{s: s}
	year, ok1 := p.digits(4)
	ok2 := p.lit('-')
	month, ok3 := p.digits(2)
	ok4 := p.lit('-')
	day, ok5 := p.digits(2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5) {
		return 0, false
	}
	var hour, min, sec, frac int
	if p.lit('T') || p.lit('t') {
		var ok bool
		if hour, ok = p.digits(2); !ok || !p.lit(':') {
			return 0, false
		}
		if min, ok = p.digits(2); !ok {
			return 0, false
		}
		if p.lit(':') {
			if sec, ok = p.digits(2); !ok {
				return 0, false
			}
			if p.lit('.') {
				n := 0
				for p.i < len(p.s) && isDigit(p.s[p.i]) {
					if n < 7 {
						frac = frac*10 + int(p.s[p.i]-'0')
					}
					n++
					p.i++
				}
				if n == 0 {
					return 0, false
				}
				for ; n < 7; n++ {
					frac *= 10
				}
			}
		}
	}
	offset := 0
	switch {
	case p.i == len(p.s):
	case p.lit('Z') || p.lit('z'):
	case p.s[p.i] == '+' || p.s[p.i] == '-':
		sign := 1
		if p.s[p.i] == '-' {
			sign = -1
		}
		p.i++
		oh, ok := p.digits(2)
		if !ok || !p.lit(':') {
			return 0, false
		}
		om, ok := p.digits(2)
		if !ok || oh > 14 || om > 59 {
			return 0, false
		}
		offset = sign * (oh*3600 + om*60)
	default:
		return 0, false
	}
	if p.i != len(p.s) {
		return 0, false
	}
	if month < 1 || month > 12 || day < 1 || hour > 23 || min > 59 || sec > 59 {
		return 0, false
	}
	t := time.Date(year, time.Month(month), day, hour, min, sec, 0, time.UTC)
	if t.Day() != day { // 2023-02-30 and the like
		return 0, false
	}
	return Ticks(t) - int64(offset)*ticksPerSecond + int64(frac), true
}

type dtParser struct {
	s string
	i int
}

func (p *dtParser) digits(n int) (int, bool) {
	if p.i+n > len(p.s) {
		return 0, false
	}
	v, err := strconv.Atoi(p.s[p.i : p.i+n])
	if err != nil || !isDigit(p.s[p.i]) {
		return 0, false
	}
	for j := p.i; j < p.i+n; j++ {
		if !isDigit(p.s[j]) {
			return 0, false
		}
	}
	p.i += n
	return v, true
}

func (p *dtParser) lit(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
