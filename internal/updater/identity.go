package updater

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The rules of the marker's second format (Hermes's "v2"), which adds the
// creation time of the process that owns the update, and may name a
// delegate: a process that runs the update on the owner's behalf and keeps
// it in progress if the owner dies.
const (
	// CreateTimeTolerance is how far a recorded creation time may lie
	// from the one a probe reads for the same process: the writers read
	// it from clocks of their own (whole seconds of the boot time, a
	// rounding to milliseconds).
	CreateTimeTolerance = 2 * time.Second
	// EmptyMarkerGrace is how long an empty marker is a claim being
	// published (a writer without hard links creates the file, then
	// writes it) rather than a claim that was never finished.
	EmptyMarkerGrace = 5 * time.Second
	// OwnCreateTimeEpsilon is how far a recorded creation time may lie
	// from the reading process's own, for an identity that names the
	// reader's process ID to be the reader: the reader reads its own on
	// the same clock, so only the record's rounding to milliseconds
	// differs, while two processes are a clock tick (10 ms) apart. Any
	// other is a previous incarnation of that ID (a fresh PID namespace
	// hands a killed update's ID to the next process started).
	OwnCreateTimeEpsilon = 5 * time.Millisecond
)

// OwnIdentity is this process as a marker names it: its ID and, where
// this platform tells it, its creation time on the updater's clock
// (recordedStart), read once.
func OwnIdentity() Identity { return ownIdentity() }

var ownIdentity = sync.OnceValue(func() Identity { return processIdentity(os.Getpid()) })

// processIdentity is process pid as a marker names it, its creation time
// read now.
func processIdentity(pid int) Identity {
	id := Identity{PID: int64(pid)}
	if created, ok := createdOnRecord(int64(pid)); ok {
		id.Created, id.HasCreated = float64(created.UnixNano())/1e9, true
	}
	return id
}

// WritersGone reports whether every process a running receipt names as
// its writer (r.Writer, r.Persister) is provably gone, judged as a
// marker's identities are (Env.incarnation: a process of that ID created
// at the recorded time runs; one of another creation time holds a reused
// ID; one recorded without a creation time is alive while its ID is),
// and says why. A receipt that names no writer, or a writer whose
// liveness this platform cannot tell, is not gone: its update may still
// finish it.
func (e *Env) WritersGone(r *Receipt) (gone bool, why string) {
	var whys []string
	for _, w := range []Identity{r.Writer, r.Persister} {
		if w.PID == 0 {
			continue
		}
		if w.HasCreated {
			alive, why, ok := e.incarnation(w.PID, w.Created, false)
			if alive || !ok {
				return false, ""
			}
			whys = append(whys, why)
			continue
		}
		if w.PID > maxPID || e.Probe(w.PID).State != ProcessGone {
			return false, ""
		}
		whys = append(whys, fmt.Sprintf("process %d is gone", w.PID))
	}
	if len(whys) == 0 {
		return false, ""
	}
	return true, strings.Join(whys, ", and ")
}

// Identity is a process as a marker names it: its ID and, where recorded,
// its creation time in Unix seconds.
type Identity struct {
	PID     int64
	Created float64
	// HasCreated reports whether a creation time was recorded: without
	// one, a live process may hold a reused ID, and only the age limit
	// bounds the claim.
	HasCreated bool
}

// Identities is what a marker says beyond its first two lines: the
// owner's creation time (line 3, "ct:<seconds>"), the first well-formed
// delegate ("delegate:<pid> ct:<seconds>", line 4 on) and the runs it names
// ("run:<id>").
type Identities struct {
	Created    float64
	HasCreated bool
	Delegate   Identity // PID 0 when none is named
	Runs       []string
}

// ParseIdentities reads the lines after the first two of a marker body as
// the updater's own reader does: a byte order mark, CR before LF and spaces
// or tabs around each line are tolerated; a third line that is not
// "ct:" and a decimal number (digits, and a fraction of digits) is no
// creation time (the marker is then of the first format); of the later
// lines, the first "delegate:<pid> ct:<seconds>" whose pid fits 32 bits is
// the delegate, every "run:<id>" a run, anything else ignored.
func ParseIdentities(body []byte) Identities {
	var ids Identities
	lines := markerLines(body)
	if len(lines) > 2 {
		if v, ok := strings.CutPrefix(lines[2], "ct:"); ok {
			ids.Created, ids.HasCreated = ctValue(v)
		}
	}
	for i := 3; i < len(lines); i++ {
		line := lines[i]
		if rest, ok := strings.CutPrefix(line, "delegate:"); ok && ids.Delegate.PID == 0 {
			pid, ct, found := strings.Cut(rest, " ct:")
			n, err := strconv.ParseUint(pid, 10, 32)
			created, ok := ctValue(ct)
			if found && err == nil && allDigits(pid) && ok && n > 0 {
				ids.Delegate = Identity{PID: int64(n), Created: created, HasCreated: true}
			}
			continue
		}
		if run, ok := strings.CutPrefix(line, "run:"); ok && validRun(run) {
			ids.Runs = append(ids.Runs, run)
		}
	}
	return ids
}

// markerLines splits a marker body into its lines, a byte order mark
// dropped, each line without its CR and the spaces or tabs around it.
func markerLines(body []byte) []string {
	text := strings.TrimPrefix(string(body), "\ufeff")
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.Trim(strings.TrimSuffix(l, "\r"), " \t")
	}
	return lines
}

// ctValue reads a creation time: ASCII digits, optionally a point and
// more digits. Its form alone decides: one past a float's range is
// infinite, and matches no process.
func ctValue(s string) (float64, bool) {
	whole, frac, dotted := strings.Cut(s, ".")
	if !allDigits(whole) || dotted && !allDigits(frac) {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		v = math.Inf(1) // digits only: the one error is the range
	}
	return v, true
}

// secondFormatLines reports whether the first two lines of a marker body
// are what the updater's second format takes (its reader judges any
// marker so; the first format's own rules read them as Python does):
// line 1 ASCII digits whose value fits 32 bits, line 2 ASCII digits
// whose value fits 64 bits, leading zeros allowed, after the tolerated
// byte order mark, CR and spaces or tabs.
func secondFormatLines(body []byte) bool {
	lines := markerLines(body)
	return len(lines) >= 2 && fitsDigits(lines[0], math.MaxUint32) && fitsDigits(lines[1], math.MaxUint64)
}

// fitsDigits reports whether s is ASCII digits whose value is at most
// limit, however many leading zeros it has.
func fitsDigits(s string, limit uint64) bool {
	if !allDigits(s) {
		return false
	}
	significant := strings.TrimLeft(s, "0")
	if significant == "" {
		return true
	}
	v, err := strconv.ParseUint(significant, 10, 64) // a range error past 64 bits, however long
	return err == nil && v <= limit
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isASCIIDigit(s[i]) {
			return false
		}
	}
	return true
}

// validRun is a run's ID as the updater writes it: 1 to 128 of letters,
// digits, '.', '_' and '-'.
func validRun(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isASCIIDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CreationTime is the creation time of process pid as a marker records
// it, in Unix seconds to the millisecond, on the updater's clock
// (recordedStart), "" where the platform cannot tell.
func CreationTime(pid int) string {
	created, ok := createdOnRecord(int64(pid))
	if !ok {
		return ""
	}
	return strconv.FormatFloat(float64(created.UnixNano())/1e9, 'f', 3, 64)
}
