package updater

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ReceiptSchema is the receipt schema this package reads.
const ReceiptSchema = 1

// MaxReceiptBytes is the largest receipt that is read; at most one byte
// more is ever read. An updater's receipt grows with its steps (300 steps
// make about 75 KB); 4 MiB is far beyond any it writes, and still a
// bounded read.
const MaxReceiptBytes = 4 << 20

// The outcomes a receipt reports; a writer may report others (the newest
// writes "interrupted" too), which are outcomes that prove nothing.
const (
	OutcomeRunning = "running"
	OutcomeSuccess = "success"
	OutcomePartial = "partial"
	OutcomeFailed  = "failed"
	OutcomeRefused = "refused"
)

// Receipt is what the updater wrote after a run (or, with outcome
// "running", while it runs): schema 1 of the updater's receipt, as a
// reader takes it. Package runtimeguard converts it to its Receipt, whose
// JSON is the command-line tool's.
type Receipt struct {
	// ID names what the receipt proves, never a file's identity (an inode
	// is reused): "update_id:" and the update_id where the updater wrote
	// one; else "correlation_id:" and the correlation_id, "@" the
	// revision after the update (post_update.sha, or none) and "@" the
	// time it finished (a launcher may reuse its correlation_id for
	// another update); else "sha256:" and a digest of the receipt's bytes
	// (for the flip of a layout's link, which stands for a receipt,
	// "link:" and the link's path, target and change time). A plan
	// scheduled on a receipt spends it. It is never written to the file.
	ID string
	// UpdateID and CorrelationID name the run, where the updater wrote
	// them (Hermes's updater writes one, the other or neither, by its
	// version: the first generation of its writer update_id, the third
	// correlation_id, often null, the second neither).
	UpdateID, CorrelationID string
	// Outcome is how the run ended: "running", "success", "partial",
	// "failed" or "refused".
	Outcome string
	// From and To are the code revisions before and after the run
	// (pre_update.sha and post_update.sha), empty where none was recorded.
	From, To string
	// StartedAt and FinishedAt are when the run began and ended; FinishedAt
	// is the zero time while it runs.
	StartedAt, FinishedAt time.Time
	// Checkout is the top-level directory of the checkout the update was
	// run on (links resolved), where the writer names it (key
	// runtimeguard_checkout, which WriteReceipt writes and Hermes's
	// writer does not); empty where it names none. CheckoutID is that
	// directory's identity then (CheckoutID; key
	// runtimeguard_checkout_id): a receipt is a checkout's by it, never
	// by the path's text.
	Checkout, CheckoutID string
	// Writer is the process that writes the receipt, as the receipt
	// names it (pid and pid_create_time, which both Hermes's newest
	// writer and WriteReceipt write), and Persister the process that
	// last wrote it where that is another (Hermes's writer_pid, with no
	// creation time); PID 0 where it names none. A running receipt
	// whose writers are gone, with no marker left and the checkout lock
	// free, will never be finished (see Env.WritersGone).
	Writer, Persister Identity
}

// CheckoutKey is the receipt's key that names the checkout the update
// was run on, and CheckoutIDKey its identity: this package's, in no
// writer's but WriteReceipt's.
const (
	CheckoutKey   = "runtimeguard_checkout"
	CheckoutIDKey = "runtimeguard_checkout_id"
)

// receiptFile is a receipt as WriteReceipt writes it: the schema's keys.
type receiptFile struct {
	Schema        int       `json:"schema"`
	UpdateID      string    `json:"update_id,omitempty"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	Outcome       string    `json:"outcome"`
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at,omitzero"`
	PreUpdate     codeState `json:"pre_update"`
	PostUpdate    codeState `json:"post_update"`
	Checkout      string    `json:"runtimeguard_checkout,omitempty"`
	CheckoutID    string    `json:"runtimeguard_checkout_id,omitempty"`
	PID           int64     `json:"pid,omitempty"`
	PIDCreateTime *float64  `json:"pid_create_time,omitempty"`
}

// codeState is the state of the code on one side of an update: its
// revision, left out where the updater recorded none.
type codeState struct {
	SHA string `json:"sha,omitempty"`
}

// ErrUnknownSchema is a receipt whose schema this package does not read:
// it is ignored, and says nothing.
var ErrUnknownSchema = errors.New("unknown receipt schema")

// receiptJSON is the receipt as written, each key told apart from null
// and from absent.
type receiptJSON struct {
	Schema        *int      `json:"schema"`
	UpdateID      *string   `json:"update_id"`
	CorrelationID *string   `json:"correlation_id"`
	Outcome       *string   `json:"outcome"`
	StartedAt     *string   `json:"started_at"`
	FinishedAt    *string   `json:"finished_at"`
	PreUpdate     *stateRef `json:"pre_update"`
	PostUpdate    *stateRef `json:"post_update"`
	Checkout      *string   `json:"runtimeguard_checkout"`
	CheckoutID    *string   `json:"runtimeguard_checkout_id"`
	// The writer's identity, of any JSON type: a value that names no
	// process names none.
	PID           json.RawMessage `json:"pid"`
	PIDCreateTime json.RawMessage `json:"pid_create_time"`
	WriterPID     json.RawMessage `json:"writer_pid"`
}

type stateRef struct {
	SHA *string `json:"sha"`
}

// ParseReceipt decodes a receipt strictly: UTF-8, one JSON object and
// nothing after it, no key twice in any object, and for schema 1 every
// field of the right type: update_id and correlation_id strings or null
// where present, outcome a string that is not empty (one of the five
// outcomes, or one a newer writer added), started_at (and finished_at unless the outcome is
// running) times in ISO 8601 (RFC 3339; a time without an offset is UTC),
// pre_update and post_update objects whose sha, when present and not null,
// is a full hex object id, runtimeguard_checkout (CheckoutKey) and
// runtimeguard_checkout_id (CheckoutIDKey) strings or null where present. Unknown keys are allowed. A receipt of another
// schema is an error matching ErrUnknownSchema.
func ParseReceipt(data []byte) (Receipt, error) {
	if len(data) > MaxReceiptBytes {
		return Receipt{}, fmt.Errorf("over %d bytes", MaxReceiptBytes)
	}
	if !utf8.Valid(data) {
		return Receipt{}, errors.New("not UTF-8")
	}
	if err := checkStrictJSON(data); err != nil {
		return Receipt{}, err
	}
	var raw receiptJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return Receipt{}, fmt.Errorf("not a receipt: %w", err)
	}
	if raw.Schema == nil {
		return Receipt{}, errors.New("no schema")
	}
	if *raw.Schema != ReceiptSchema {
		return Receipt{}, fmt.Errorf("schema %d: %w", *raw.Schema, ErrUnknownSchema)
	}
	var r Receipt
	if raw.UpdateID != nil {
		r.UpdateID = *raw.UpdateID
	}
	if raw.CorrelationID != nil {
		r.CorrelationID = *raw.CorrelationID
	}
	if raw.Checkout != nil {
		r.Checkout = *raw.Checkout
	}
	if raw.CheckoutID != nil {
		r.CheckoutID = *raw.CheckoutID
	}
	r.Writer.PID = processID(raw.PID)
	if r.Writer.PID != 0 {
		r.Writer.Created, r.Writer.HasCreated = createTime(raw.PIDCreateTime)
	}
	if w := processID(raw.WriterPID); w != r.Writer.PID {
		r.Persister.PID = w
	}
	sum := sha256.Sum256(data)
	r.ID = "sha256:" + hex.EncodeToString(sum[:]) // until the ids are read
	if raw.Outcome == nil {
		return r, errors.New("no outcome")
	}
	if *raw.Outcome == "" {
		return r, errors.New("an empty outcome")
	}
	// Any other word is an outcome too (newer writers add some, such as
	// "interrupted"): it parses, and, not being "success", proves nothing.
	r.Outcome = *raw.Outcome
	var err error
	if raw.StartedAt == nil {
		return r, errors.New("no started_at")
	}
	if r.StartedAt, err = parseTime(*raw.StartedAt); err != nil {
		return r, fmt.Errorf("started_at: %w", err)
	}
	switch {
	case raw.FinishedAt != nil:
		if r.FinishedAt, err = parseTime(*raw.FinishedAt); err != nil {
			return r, fmt.Errorf("finished_at: %w", err)
		}
	case r.Outcome != OutcomeRunning:
		return r, errors.New("no finished_at")
	}
	if r.From, err = sha("pre_update", raw.PreUpdate); err != nil {
		return r, err
	}
	if r.To, err = sha("post_update", raw.PostUpdate); err != nil {
		return r, err
	}
	switch {
	case r.UpdateID != "":
		r.ID = "update_id:" + r.UpdateID
	case r.CorrelationID != "":
		r.ID = "correlation_id:" + r.CorrelationID + "@" + orNone(r.To) + "@" + r.FinishedAt.UTC().Format(time.RFC3339Nano)
	}
	return r, nil
}

// processID is a receipt's process ID: a JSON integer from 1 to 2**32-1;
// 0 for anything else (absent, null, another type, out of range), which
// names no process.
func processID(v json.RawMessage) int64 {
	n, err := strconv.ParseUint(string(v), 10, 32)
	if err != nil || n == 0 {
		return 0
	}
	return int64(n)
}

// createTime is a receipt's process creation time: a finite JSON number;
// ok false for anything else.
func createTime(v json.RawMessage) (float64, bool) {
	if len(v) == 0 || v[0] == '"' || string(v) == "null" {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return f, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
}

// sha is the sha of a pre_update or post_update object: empty when the
// object or its sha is absent or null, else a full hex object id.
func sha(name string, s *stateRef) (string, error) {
	if s == nil || s.SHA == nil || *s.SHA == "" {
		return "", nil
	}
	v := strings.ToLower(*s.SHA)
	if (len(v) != 40 && len(v) != 64) || strings.Trim(v, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%s.sha %q is not a full hex object id", name, *s.SHA)
	}
	return v, nil
}

// parseTime reads an ISO 8601 time as RFC 3339, fractional seconds
// allowed; a time without an offset is taken as UTC.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	t, err := time.Parse("2006-01-02T15:04:05.999999999", s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an ISO 8601 time", s)
	}
	return t, nil
}

// checkStrictJSON accepts exactly one JSON object with nothing after it
// and no key twice in any object: a duplicated "outcome" must not be read
// as whichever came last. It is one linear pass over bytes that
// encoding/json has validated.
func checkStrictJSON(data []byte) error { return strictObject(data, true) }

// strictObject is checkStrictJSON; receiptKeys says whether a key that
// folds to one the receipt's schema names must be spelled as it is.
func strictObject(data []byte, receiptKeys bool) error {
	if !json.Valid(data) {
		dec := json.NewDecoder(bytes.NewReader(data))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("not JSON: %w", err)
		}
		return errors.New("data after the JSON object")
	}
	s := jsonScanner{data: data}
	s.space()
	if s.i >= len(data) || data[s.i] != '{' {
		return errors.New("not a JSON object")
	}
	return s.object(1, receiptKeys)
}

// maxJSONDepth bounds nesting, so that no input recurses without end.
const maxJSONDepth = 32

// jsonScanner walks JSON that is known to be valid.
type jsonScanner struct {
	data []byte
	i    int
}

func (s *jsonScanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str reads the string at s.i (its opening quote) and returns its text.
func (s *jsonScanner) str() string {
	start := s.i
	s.i++
	escaped := false
	for s.data[s.i] != '"' {
		if s.data[s.i] == '\\' {
			escaped = true
			s.i++
		}
		s.i++
	}
	s.i++
	if !escaped {
		return string(s.data[start+1 : s.i-1])
	}
	var v string
	_ = json.Unmarshal(s.data[start:s.i], &v) // valid JSON: it decodes
	return v
}

// value reads one value at s.i.
func (s *jsonScanner) value(depth int, decoded bool) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	switch s.data[s.i] {
	case '{':
		return s.object(depth+1, decoded)
	case '[':
		s.i++
		s.space()
		if s.data[s.i] == ']' {
			s.i++
			return nil
		}
		for {
			s.space()
			if err := s.value(depth+1, false); err != nil {
				return err
			}
			s.space()
			c := s.data[s.i]
			s.i++
			if c == ']' {
				return nil
			}
		}
	case '"':
		s.str()
	default:
		for s.i < len(s.data) && !strings.ContainsRune(",]} \t\n\r", rune(s.data[s.i])) {
			s.i++
		}
	}
	return nil
}

// object reads the object at s.i (its '{'). Keys are compared as
// encoding/json matches them to fields, without case (and with Unicode's
// simple folding: "ſ" is "s"), so that "OUTCOME" cannot stand beside, or
// for, "outcome". In the objects decoded into fields (the receipt and its
// pre_update and post_update), a key that folds to a field's name must be
// that name.
func (s *jsonScanner) object(depth int, decoded bool) error {
	s.i++
	seen := make(map[string]string)
	for {
		s.space()
		if s.data[s.i] == '}' {
			s.i++
			return nil
		}
		key := s.str()
		folded := foldKey(key)
		if k, dup := seen[folded]; dup {
			return fmt.Errorf("key %q appears twice (as %q)", key, k)
		}
		seen[folded] = key
		if decoded {
			if field, ok := receiptFields[folded]; ok && field != key {
				return fmt.Errorf("key %q is not %q", key, field)
			}
		}
		s.space()
		s.i++ // the colon
		s.space()
		nested := decoded && depth == 1 && (key == "pre_update" || key == "post_update")
		if err := s.value(depth, nested); err != nil {
			return err
		}
		s.space()
		if s.data[s.i] == ',' {
			s.i++
		}
	}
}

// foldKey maps s to one representative of the strings strings.EqualFold
// takes for it: each rune becomes the least rune of its simple folding
// orbit (for an ASCII letter, its upper case).
func foldKey(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToUpper(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// receiptFields are the keys the receipt's schema names, by their folded
// form.
var receiptFields = func() map[string]string {
	m := make(map[string]string)
	for _, f := range []string{"schema", "update_id", "correlation_id", "outcome", "started_at", "finished_at", "pre_update", "post_update", "sha", CheckoutKey, CheckoutIDKey, "pid", "pid_create_time", "writer_pid"} {
		m[foldKey(f)] = f
	}
	return m
}()
