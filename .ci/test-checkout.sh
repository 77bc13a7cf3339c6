#!/usr/bin/env bash
# Makes the checkout the Windows tests read (RUNTIMEGUARD_TEST_CHECKOUT) in
# DIR and prints its revision. git runs isolated as the Go tests' harness
# (internal/gittest) runs it: no global or system config and none from the
# environment, so no signing, hooks or templates of the user's, and a fixed
# identity.
#
# Usage: .ci/test-checkout.sh DIR
set -euo pipefail
dir=${1:?usage: test-checkout.sh DIR}
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_COMMON_DIR \
	GIT_CONFIG GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT GIT_TEMPLATE_DIR
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0 \
	GIT_AUTHOR_NAME=ci GIT_AUTHOR_EMAIL=ci@example.invalid \
	GIT_COMMITTER_NAME=ci GIT_COMMITTER_EMAIL=ci@example.invalid
mkdir -p "$dir"
git -C "$dir" -c init.defaultBranch=main init -q
echo 'class AIAgent: pass' >"$dir/run_agent.py"
git -C "$dir" add run_agent.py
git -C "$dir" commit -qm loaded
git -C "$dir" rev-parse HEAD
