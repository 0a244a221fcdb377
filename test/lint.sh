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
