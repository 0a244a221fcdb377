#!/bin/sh
# Lint: functions the project bans (unbounded or error-blind), then formatting against
# .clang-format. Exits non-zero on any finding.
cd "$(dirname "$0")/.." || exit 2
files=$(git ls-files '*.c' '*.h')
status=0
banned='\b(strcpy|strcat|sprintf|vsprintf|atoi|atol|strtok|gets)[[:space:]]*\('
if grep -nE "$banned" $files; then
	echo "lint: banned functions above (use snprintf, strtol with checks, strtok_r, ...)"
	status=1
fi
# Includes across parts: common/ (and common/oci) includes only common/; a daemon includes
# common/ and itself, never the other daemon (what they share belongs in common/).
edges=""
for f in $(echo "$files" | grep -E '^(common|kiyot|cell-agent)/'); do
	part=${f%%/*}
	for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		r=""
		for dir in "$(dirname "$f")" common common/oci kiyot cell-agent; do
			if [ -f "$dir/$h" ]; then
				r=$(realpath -m --relative-to=. "$dir/$h")
				break
			fi
		done
		rpart=${r%%/*}
		[ -z "$r" ] || [ "$rpart" = "$part" ] || [ "$rpart" = common ] ||
			edges="$edges
  $f includes $r"
	done
done
if [ -n "$edges" ]; then
	echo "lint: includes across parts (move what both need to common/):$edges"
	status=1
fi
unformatted=""
for f in $files; do
	clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || unformatted="$unformatted $f"
done
if [ -n "$unformatted" ]; then
	echo "lint: not formatted with .clang-format:$unformatted"
	echo "      (clang-format -i FILE)"
	status=1
fi
[ $status -eq 0 ] && echo "lint: clean"
exit $status
