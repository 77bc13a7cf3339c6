package updater

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The judge cases of the Hermes Agent's shared marker corpus
// (tests/fixtures/update_marker_corpus.json, schema 1: "every marker
// reader runs the judge cases"), transcribed as facts: the marker's
// bytes, the process table (a process ID and its creation time; nil: alive,
// its creation time unreadable; absent: no such process), the reading
// process and what the updater's reader says of it. The corpus's clock
// reads 1791079400, its reader is process 4242 created at 1791079000.2504
// unless a case says otherwise, and the reader's own process is always
// alive with that creation time.
const (
	corpusNow   = 1791079400
	corpusOwnID = 4242
	corpusOwnCT = 1791079000.2504
)

// The verdicts of the corpus's judge: the marker cannot be parsed as the
// updater's format, no identity it names lives, one lives, or one is the
// reader itself.
const (
	judgeMalformed = "malformed"
	judgeDead      = "dead"
	judgeLive      = "live"
	judgeOurs      = "ours"
)

// corpusCase is one judge case.
type corpusCase struct {
	name    string
	body    string
	live    map[int64]*float64
	ownID   int64   // 0: corpusOwnID
	ownCT   float64 // 0: corpusOwnCT
	verdict string
	run     string // the first run the marker names, "" for none
	// seed marks a case where the seed's rule stands instead of the
	// updater's: a first-format marker naming the reader's own live
	// process is active.
	seed bool
}

func ct(v float64) *float64 { return &v }

var corpusJudgeCases = []corpusCase{
	{name: "v2_live_foreign_owner", body: "6080\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "v2_dead_owner", body: "6080\n1791079348\nct:1791079348.328\n", verdict: judgeDead},
	{name: "v2_recycled_pid_ct_mismatch", body: "6080\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079390.0)}, verdict: judgeDead},
	{name: "v2_foreign_ct_inside_2s_tolerance", body: "6080\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079349.9)}, verdict: judgeLive},
	{name: "v2_foreign_ct_outside_2s_tolerance", body: "6080\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079350.4)}, verdict: judgeDead},
	{name: "self_exact_incarnation", body: "4242\n1791079001\nct:1791079000.250\n", verdict: judgeOurs},
	{name: "self_pid_reuse_inside_2s", body: "4242\n1791078999\nct:1791078999.300\n", verdict: judgeDead},
	{name: "self_pid_reuse_6ms", body: "4242\n1791079001\nct:1791079000.244\n", verdict: judgeDead},
	{name: "self_pid_v1_young", body: "4242\n1791079390\n", verdict: judgeDead, seed: true},
	{name: "self_pid_bad_ct_line_is_v1", body: "4242\n1791079390\nct:soon\n", verdict: judgeDead, seed: true},
	{name: "v1_foreign_young", body: "6080\n1791079390\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "v1_foreign_past_ceiling", body: "6080\n1791078000\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeDead},
	{name: "v1_foreign_dead", body: "6080\n1791079390\n", verdict: judgeDead},
	{name: "v2_ct_inaccessible_young", body: "6080\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: nil}, verdict: judgeLive},
	{name: "v2_ct_inaccessible_past_ceiling", body: "6080\n1791078100\nct:1791078100.000\n", live: map[int64]*float64{6080: nil}, verdict: judgeDead},
	{name: "bad_ct_line_is_v1", body: "6080\n1791079390\nct:1.2.3\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "ct_line_trailing_garbage_is_v1", body: "6080\n1791078000\nct:1791079348.328 x\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeDead},
	{name: "crash12db_owner_and_delegate_dead", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", verdict: judgeDead},
	{name: "delegate_live_owner_dead", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeLive},
	{name: "owner_and_delegate_live", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", live: map[int64]*float64{6080: ct(1791079348.328), 13368: ct(1791079350.794)}, verdict: judgeLive},
	{name: "delegate_recycled", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", live: map[int64]*float64{13368: ct(1791079399.0)}, verdict: judgeDead},
	{name: "delegate_is_us_owner_dead", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", ownID: 13368, ownCT: 1791079350.7941, verdict: judgeOurs},
	{name: "delegate_is_us_owner_live", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", live: map[int64]*float64{6080: ct(1791079348.328)}, ownID: 13368, ownCT: 1791079350.7941, verdict: judgeOurs},
	{name: "delegate_names_our_pid_previous_incarnation", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", ownID: 13368, ownCT: 1791079351.5, verdict: judgeDead},
	{name: "owner_ours_delegate_live", body: "4242\n1791079001\nct:1791079000.250\ndelegate:13368 ct:1791079350.794\n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeOurs},
	{name: "padded_lines", body: " 6080 \t\n\t1791079348  \nct:1791079348.328\t\n  delegate:13368 ct:1791079350.794  \n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeLive},
	{name: "crlf_and_bom", body: "\ufeff6080\r\n1791079348\r\nct:1791079348.328\r\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "no_trailing_newline", body: "6080\n1791079348\nct:1791079348.328", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "interior_whitespace_pid", body: "60 80\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328), 60: ct(1791079348.328), 80: ct(1791079348.328)}, verdict: judgeMalformed},
	{name: "interior_whitespace_delegate", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368  ct:1791079350.794\n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeDead},
	{name: "delegate_without_ct_ignored", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368\n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeDead},
	{name: "malformed_started_at", body: "6080\nyesterday\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeMalformed},
	{name: "malformed_pid", body: "pid\n1791079348\n", verdict: judgeMalformed},
	{name: "negative_pid", body: "-6080\n1791079348\nct:1791079348.328\n", verdict: judgeMalformed},
	{name: "pid_beyond_u32", body: "4294967296\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{4294967296: ct(1791079348.328)}, verdict: judgeMalformed},
	{name: "single_line", body: "6080\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeMalformed},
	{name: "pid_zero", body: "0\n1791079390\nct:1791079390.000\n", verdict: judgeDead},
	{name: "run_line", body: "6080\n1791079348\nct:1791079348.328\nrun:desk-7f3a.1\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive, run: "desk-7f3a.1"},
	{name: "run_after_delegate", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\nrun:desk-7f3a.1\n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeLive, run: "desk-7f3a.1"},
	{name: "delegate_after_run", body: "6080\n1791079348\nct:1791079348.328\nrun:desk-7f3a.1\ndelegate:13368 ct:1791079350.794\n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeLive, run: "desk-7f3a.1"},
	{name: "run_line_dead_claim", body: "6080\n1791079348\nct:1791079348.328\nrun:desk-7f3a.1\n", verdict: judgeDead, run: "desk-7f3a.1"},
	{name: "malformed_run_ignored", body: "6080\n1791079348\nct:1791079348.328\nrun:has space\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "first_of_two_run_lines", body: "6080\n1791079348\nct:1791079348.328\nrun:first\nrun:second\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive, run: "first"},
	// Thousands of digits: past the 4,300 Python's int() takes.
	{name: "pid_huge_digit_count", body: strings.Repeat("1", 5000) + "\n1791079348\nct:1791079348.328\n", verdict: judgeMalformed},
	{name: "pid_leading_zeros", body: "00000000000000006080\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "started_at_huge_digit_count", body: "6080\n" + strings.Repeat("1", 5000) + "\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeMalformed},
	{name: "started_at_beyond_u64", body: "6080\n18446744073709551616\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeMalformed},
	{name: "started_at_u64_max", body: "6080\n18446744073709551615\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "delegate_pid_huge_digit_count", body: "6080\n1791079348\nct:1791079348.328\ndelegate:" + strings.Repeat("9", 5000) + " ct:1791079350.794\n", verdict: judgeDead},
	// Hundreds of digits: past a float's range.
	{name: "ct_huge_digit_count", body: "6080\n1791079348\nct:" + strings.Repeat("1", 400) + "\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeDead},
}

// corpusEnv is the environment of a judge case: the corpus's clock, its
// process table and its reader. A creation time in the table is when the
// process started on either clock (the corpus knows one).
func corpusEnv(c *corpusCase) *Env {
	ownID, ownCT := cmpOr(c.ownID, corpusOwnID), cmpOr(c.ownCT, corpusOwnCT)
	at := func(ct float64) ProcInfo {
		sec, frac := math.Modf(ct)
		t := time.Unix(int64(sec), int64(frac*1e9))
		return ProcInfo{State: ProcessAlive, Start: t, Created: t}
	}
	e := testEnv()
	e.Cache = nil
	e.Now = func() time.Time { return time.Unix(corpusNow, 0) }
	e.Self = func() Identity { return Identity{PID: ownID, Created: ownCT, HasCreated: true} }
	e.Probe = func(pid int64) ProcInfo {
		if pid == ownID {
			return at(ownCT)
		}
		created, ok := c.live[pid]
		switch {
		case !ok:
			return ProcInfo{State: ProcessGone}
		case created == nil:
			return ProcInfo{State: ProcessAlive}
		}
		return at(*created)
	}
	return e
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// stateOf is the marker state a guard gives what the corpus's judge
// says: a malformed marker proves nothing, a dead one is stale, one that
// lives (or is the reader) is active.
func stateOf(verdict string) Life {
	switch verdict {
	case judgeMalformed:
		return Unsure
	case judgeDead:
		return Ended
	}
	return Live
}

// Every judge case of the corpus, with its process table and clock: the
// guard's state is the updater's verdict, but where the seed's rule
// stands (a first-format marker naming the reader's own live process is
// active, as the hermes-webui guard's tests use it).
func TestMarkerCorpusJudgeCases(t *testing.T) {
	for i := range corpusJudgeCases {
		c := &corpusJudgeCases[i]
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), markerName)
			writeFile(t, path, c.body)
			m := corpusEnv(c).ClassifyMarker(path, defaultMaxAge)
			want := stateOf(c.verdict)
			if c.seed {
				want = Live
			}
			assert.Equal(t, want, m.Life, "%s: the updater says %s; %s", c.name, c.verdict, m.Reason)
			if c.verdict != judgeMalformed {
				var run string
				if ids := ParseIdentities([]byte(c.body)); len(ids.Runs) > 0 {
					run = ids.Runs[0]
				}
				assert.Equal(t, c.run, run, "the marker's run")
			}
		})
	}
}

// The corpus's clock and table are the only ones the judge cases see: a
// table that makes the owner of a live case dead changes the state, so
// the environment, not the host, decides.
func TestMarkerCorpusTableDecides(t *testing.T) {
	c := corpusJudgeCases[0]
	path := filepath.Join(tempDir(t), markerName)
	writeFile(t, path, c.body)
	assert.Equal(t, Live, corpusEnv(&c).ClassifyMarker(path, defaultMaxAge).Life)
	c.live = nil
	assert.Equal(t, Ended, corpusEnv(&c).ClassifyMarker(path, defaultMaxAge).Life, fmt.Sprintf("%q with no process", c.body))
}
