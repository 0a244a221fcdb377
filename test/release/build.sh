#!/bin/sh
# Builds kiyot, cell-agent and cell-shim of the previous release (test/release/previous) from
# this repository's history, for the upgrade tests: BUILD/release/<tag>/{kiyot,cell-agent,
# cell-shim}. Once: a finished build is kept (its commit in BUILD/release/<tag>/done), and
# calls at the same time wait for one build (a lock). Prints the directory.
#
#   test/release/build.sh [BUILD]
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
line=$(grep -v '^#' "$here/previous" | head -n 1)
tag=${line%% *}
commit=${line##* }
mkdir -p "$build/release"
out=$(cd "$build/release" && pwd)/$tag

[ -f "$out/done" ] && [ "$(cat "$out/done")" = "$commit" ] && { echo "$out"; exit 0; }
exec 8>"$out.lock"
flock 8
[ -f "$out/done" ] && [ "$(cat "$out/done")" = "$commit" ] && { echo "$out"; exit 0; }

# the tag when this clone has it (it must name the commit recorded), else the commit itself
rev=$commit
if tagged=$(git -C "$top" rev-parse -q --verify "refs/tags/$tag^{commit}" 2>/dev/null); then
	if [ "$tagged" != "$commit" ]; then
		echo "release $tag: the tag names $tagged, test/release/previous says $commit:" \
			"make them agree" >&2
		exit 1
	fi
	rev=$tag
fi
if ! git -C "$top" cat-file -e "$commit^{commit}" 2>/dev/null; then
	echo "release $tag ($commit) is not in this clone's history: the upgrade tests build" \
		"it from there; fetch it (git fetch --unshallow, or git fetch origin tag $tag)" >&2
	exit 1
fi
rm -rf "$out"
mkdir -p "$out/src"
git -C "$top" archive "$rev" | tar -x -C "$out/src"
# (unoptimised: the tests need its behaviour, not its speed, and -O0 builds in less than half
# the time)
make -C "$out/src" --no-print-directory BUILD=build OPT=-O0 -j"$(nproc)" build/kiyot \
	build/cell-agent build/cell-shim >"$out/build.log" 2>&1 || {
	echo "release $tag: its build failed; see $out/build.log" >&2
	tail -n 20 "$out/build.log" >&2
	exit 1
}
cp "$out/src/build/kiyot" "$out/src/build/cell-agent" "$out/src/build/cell-shim" "$out/"
rm -rf "$out/src"
echo "$commit" >"$out/done"
echo "$out"
