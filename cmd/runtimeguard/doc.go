// Command runtimeguard shows what a runtime guard sees of a checkout, checks
// it against a revision, classifies update markers, watches a checkout for
// changes, and runs an updater under the update protocol. It never restarts
// anything.
//
// Install it with
//
//	go install github.com/runtimeguard/runtimeguard/cmd/runtimeguard@latest
//
// or run it from a clone with go run ./cmd/runtimeguard.
//
// # Usage
//
//	runtimeguard demo [--keep]
//	runtimeguard status --module FILE [--json] [LAYOUT FLAGS]
//	runtimeguard check  --module FILE --expect REV [--repeat N] [--check MODE] [LAYOUT FLAGS]
//	runtimeguard marker [--json] [--max-age DURATION] PATH
//	runtimeguard watch  --module FILE [--json] [--interval DURATION] [LAYOUT FLAGS]
//	runtimeguard update --module FILE [--dir DIR] [--wait DURATION] [LAYOUT FLAGS]
//	                    -- COMMAND [ARGS...]
//	runtimeguard version (or --version, -version)
//
// Help (help, --help or -h, each alone or before a COMMAND, or COMMAND
// --help) goes to standard output. Flags and the
// marker's path may come in any order (-- ends the flags); update's flags
// come before the -- that starts its command.
//
// # Layout flags
//
// --home DIR (or --home-env VAR and --default-home PATH, where the home
// comes from otherwise), --python PATH, --marker PATH, --receipt PATH,
// --lock PATH, --recovery NAMES: Hermes's layout by default, so another
// updater's files are found only with its own flags, as in
//
//	--home-env PLUGINHOST_HOME --marker deploy.lock.pid --receipt deploys/last.json
//
// # Exit codes
//
// One table for every command:
//
//	0  success: for check, current; for marker, no marker
//	1  an error: the checkout could not be read (status says so after
//	   all it could read), or for update, the updater's files could not
//	   be read or written (status reports those as it finds them, an
//	   unknown marker, an unusable receipt, and exits 0); a module in
//	   no tracked Git checkout where the command needs one (check: its
//	   --expect is a Git revision; update: in no Git worktree at all);
//	   for update, a receipt that says failed for another reason than
//	   COMMAND's status
//	2  a usage error: an unknown flag, a value the flag does not take
//	   (for check also an --expect of the other object format than the
//	   checkout's), a missing or extra argument, a flag value that
//	   describes no layout (an empty --home too, which is no home rather
//	   than the default; for update also an empty --receipt or --dir,
//	   an empty COMMAND, no home directory known, a home, from --home,
//	   its variable or the default, that is missing or not a directory,
//	   and a --marker or --lock whose directory is missing: update makes
//	   none of them, and writes nothing), a --module that names no
//	   regular file
//	   (none, a link that leads to none, a directory, a pipe such as
//	   /dev/stdin, a device)
//	3  check: stale (the exact 409 body on standard output, why on
//	   standard error)
//	4  marker: active; 5 stale; 6 unknown (with or without --json), so
//	   that a script can branch on the marker's state
//	7  a file system did not answer within 5s (the library's
//	   DefaultReadTimeout, which bounds each of a command's touches of
//	   the file system): the command gave up, and says on standard error
//	   what it waited for (status says it in its guard line, or
//	   bind_error, after all it could read); a marker that does not
//	   answer is unknown, 6
//
// update exits with its COMMAND's status when COMMAND ran and failed.
// Nothing is run or written before a usage error.
//
// # Errors
//
// A usage error is one line, "runtimeguard COMMAND: " and what is wrong,
// flags named with two dashes as the usage names them, then a pointer to
// "runtimeguard COMMAND --help". A --module is named as given. Any other
// error of the command's own is printed after "runtimeguard COMMAND: ";
// one of the runtimeguard package (a checkout that cannot be bound) as the
// package says it, after its own "runtimeguard: ".
//
// Plain text never carries a control character of a path, a reason or an
// error: a value that holds one (a newline, an escape sequence, any rune
// Go does not print as is) is printed quoted as a Go string, so that a
// file name cannot forge a line. The JSON forms escape them as JSON does.
//
// # JSON output
//
// status --json prints JSON on an error too ({"module_path", "error"}),
// once its flags parse (a flag error is a usage error alone).
// Otherwise it prints these fields, a stable API:
//
//   - module_path, source_dir: absolute, links resolved
//   - top_level, git_dir, common_dir: the worktree and its Git
//     directories; empty when there is none
//   - object_format: sha1 or sha256; empty when there is no repository
//   - tracked: whether the index tracks the module; false too where
//     read_error is set and reason is not, since the index was not read
//   - head_ref: the ref HEAD names, empty when detached
//   - revision: HEAD's object id, empty when the checkout is not tracked
//   - reason: why revision is empty (left out otherwise)
//   - read_error: why the checkout could not be read (left out otherwise)
//   - marker_path, update_marker, update_marker_reason: the marker, its
//     state word and why
//   - update_state: the update state word
//   - install_roots, recovery_markers: where recovery markers were looked
//     for, and those found
//   - receipt_path, receipt, receipt_problem: the newest receipt (id,
//     update_id, correlation_id, outcome, from, to, started_at,
//     finished_at) and its file, or why it is not usable
//   - lock_path: the updater's lock file, when the layout has one
//   - check, check_reason: watch, stat or read, and why not watch
//   - identified_by: how a guard bound here identifies the install: git,
//     build stamp (no Git checkout identifies it: its module file and
//     the build its stamp names, build) or file (the module file alone);
//     unguarded says why Git does not
//   - bind_error: why no guard binds here (left out where one does)
//
// watch --json prints a JSON object a line, whose event is bound (with
// identified_by: git, build stamp or file), current, stale, update_state
// or stopped; each change is printed once: stale when the checkout moves
// (and again when it moves elsewhere), current when it comes back to the
// revision bound, update_state while it is stale. marker --json prints the
// path, the state and its reason:
//
//	$ runtimeguard marker --json ~/.hermes/.hermes-update-in-progress
//	{"path":"/root/.hermes/.hermes-update-in-progress","state":"active","reason":"process 4242 is alive"}
//
// # update
//
// update makes any updater speak the update protocol: it takes the
// layout's lock, writes the marker and a running receipt, runs the command
// in the module's worktree, and writes the final receipt; it keeps a
// receipt of each of the last 20 runs beside the latest (as hermes update
// does). A success receipt certifies the state the run left: "runtimeguard
// update -- true" after a failed update certifies what that update left
// behind. Do not wrap an updater that keeps its own marker and receipt,
// such as hermes update: it speaks the protocol already. An updater with
// another layout is given it as flags:
//
//	runtimeguard update --module /srv/plugins/main.py --home-env PLUGINHOST_HOME \
//	  --marker deploy.lock.pid --recovery .deploy-failed --receipt deploys/last.json \
//	  -- git pull --ff-only
//
// The protocol, step by step, is docs/reload.md in the repository.
//
// # demo
//
// demo tells the whole story on a throwaway checkout, with nothing
// installed but Go:
//
//	$ go run ./cmd/runtimeguard demo
//	1. made a checkout with run_agent.py at commit 0b96e9432ed1
//	2. the server loads run_agent.py and binds a guard to revision 0b96e9432ed1
//	3. check before touching session state: current
//	4. an updater commits while the server runs: HEAD is now 75c59fbf012b
//	5. check: stale; the server answers HTTP 409 with:
//	   {
//	     "error": "Hermes Agent was updated on disk after Hermes WebUI loaded it. Restart Hermes WebUI manually to load the new code.",
//	     "type": "agent_runtime_stale",
//	     "retryable": true,
//	     "restart_scheduled": false,
//	     "agent_update_state": "unverified"
//	   }
//	6. update state: unverified (no update marker in /tmp/runtimeguard-demo-3962172183/hermes-home, no recovery marker)
//	7. the updater left .update-incomplete behind: update state incomplete
//	8. an incomplete update proves nothing: the server answers 409 until an operator restarts it
//	9. the install is repaired, but without a receipt no reload is planned:
//	   runtimeguard: no reload is proven safe: no update is in progress and no receipt was written since the guard bound at 2026-12-01T10:55:29.745128909Z: nothing proves this move of the checkout; restart to load it
//	10. the updater writes its receipt: outcome success, 0b96e9432ed1 -> 75c59fbf012b
//	11. the guard proves a reload safe; while the server reloads, the 409 says restart_scheduled: true
//	12. the server restarts its workers and rebinds: revision 75c59fbf012b, check: current
//
// The revisions and the temporary directory differ from run to run.
package main
