#!/bin/sh
# Proves each include rule of test/lint.sh: in a scratch copy of the tree's headers (every part's,
# so includes resolve as in the tree), the copy as it is passes, then each planted file with one
# include a rule refuses fails lint.sh --includes with that rule's words. Run by make lint.
cd "$(dirname "$0")/.." || exit 2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
git ls-files -z 'common/*.h' 'kiyot/*.h' 'cell-agent/*.h' | xargs -0 cp --parents -t "$scratch"
mkdir -p "$scratch/test" && cp test/lint.sh "$scratch/test/"
cd "$scratch" || exit 2
git init -q . && git add -A
failed=0

if ! out=$(test/lint.sh --includes 2>&1); then
	echo "lint_test: the unplanted copy fails:"
	echo "$out"
	failed=1
fi

# plant FILE HEADER WORDS: FILE including HEADER must fail, naming FILE and WORDS.
plant()
{
	printf '#include "%s"\n' "$2" >"$1"
	git add "$1"
	if out=$(test/lint.sh --includes 2>&1); then
		echo "lint_test: $1 including $2 passed lint"
		failed=1
	elif ! echo "$out" | grep -q "$1 includes" || ! echo "$out" | grep -q "$3"; then
		echo "lint_test: $1 including $2 failed without \"$3\":"
		echo "$out"
		failed=1
	fi
	git rm -q --cached "$1" && rm -f "$1"
}

plant kiyot/state/planted.c cri/cri.h "state/ includes nothing above it"
plant kiyot/state/planted.c daemon/kiyot.h "state/ includes nothing above it"
plant kiyot/state/planted.c providers/provider.h "state/ includes nothing above it"
plant kiyot/cells/planted.c cri/cri.h "cells/ reports to the CRI side"
plant kiyot/cells/planted.c stream/server.h "cells/ reports to the CRI side"
plant kiyot/providers/local/planted.c cells/cells.h "providers/ is below cells/"
plant kiyot/providers/ec2/planted.c cri/cri.h "providers/ is below cells/"
plant kiyot/sizing/planted.c kube/kube.h "sizing/ includes only sizing/ and common/"
plant kiyot/sizing/planted.c state/state.h "sizing/ includes only sizing/ and common/"
plant kiyot/pool/planted.c cri/cri.h "pool/ is below the CRI side"
plant kiyot/cri/planted.c daemon/daemon.h "only cli/ starts the daemon"
plant common/planted.c cri/cri.h "includes across parts"
plant cell-agent/planted.c state/state.h "includes across parts"

# what the rules allow stays allowed
for ok in "kiyot/cells/planted.c state/records.h" "kiyot/cells/planted.c daemon/kiyot.h" \
	"kiyot/cli/planted.c daemon/daemon.h" "kiyot/cri/planted.c cells/cells.h"; do
	set -- $ok
	printf '#include "%s"\n' "$2" >"$1"
	git add "$1"
	if ! out=$(test/lint.sh --includes 2>&1); then
		echo "lint_test: $1 including $2 is refused:"
		echo "$out"
		failed=1
	fi
	git rm -q --cached "$1" && rm -f "$1"
done

[ $failed -eq 0 ] && echo "lint_test: every include rule refuses its planted violation"
exit $failed
