#!/bin/sh
# Lint: functions the project bans (unbounded or error-blind), includes across parts and
# across kiyot's layers, then formatting against .clang-format. Exits non-zero on any finding.
# test/lint.sh --includes checks the includes alone (test/lint_test.sh plants violations).
cd "$(dirname "$0")/.." || exit 2
files=$(git ls-files '*.c' '*.h')
status=0
only_includes=0
[ "$1" = "--includes" ] && only_includes=1
banned='\b(strcpy|strcat|sprintf|vsprintf|atoi|atol|strtok|gets)[[:space:]]*\('
if [ $only_includes -eq 0 ] && grep -nE "$banned" $files; then
	echo "lint: banned functions above (use snprintf, strtol with checks, strtok_r, ...)"
	status=1
fi
# Includes across parts: common/ (and common/oci) includes only common/; a daemon includes
# common/ and itself, never the other daemon (what they share belongs in common/).
edges=""
layers=""
# kiyot's layers, from the bottom: state/ (records, store, log files) under everything;
# providers/ and sizing/ under cells/; cells/ under the CRI side (cri/, stream/, pool/), which
# it reports to through the hooks it owns (cells/cells.h); daemon/ wires them all, and only
# cli/ starts it. Prints "\n  FILE includes HEADER: RULE" for an include a rule refuses.
kiyot_layer()
{
	from=${1#kiyot/}
	to=${2#kiyot/}
	fdir=${from%%/*}
	tdir=${to%%/*}
	[ "$fdir" = "$tdir" ] && return
	rule=""
	case "$fdir:$tdir" in
	state:*) rule="state/ includes nothing above it" ;;
	cells:cri | cells:stream | cells:daemon)
		[ "$to" = daemon/kiyot.h ] ||
			rule="cells/ reports to the CRI side through its hooks (cells_hooks), never by including it" ;;
	providers:cells | providers:cri | providers:pool | providers:stream | providers:daemon)
		rule="providers/ is below cells/ and the CRI side" ;;
	sizing:*)
		# the known edges left: the pod spec a demand is read from (sizing.h, burst.h), and
		# the EC2 and Price List clients the catalog refresh asks (catalog_refresh belongs in
		# providers/ec2/)
		case "$from:$to" in
		sizing/*:kube/podspec.h | sizing/catalog_refresh.h:providers/ec2/ec2.h) ;;
		sizing/catalog_refresh.h:providers/ec2/pricing.h) ;;
		*) rule="sizing/ includes only sizing/ and common/" ;;
		esac
		;;
	pool:cri | pool:stream | pool:daemon)
		[ "$to" = daemon/kiyot.h ] ||
			rule="pool/ is below the CRI side: it launches through cells/, and cri/ claims from it" ;;
	*:daemon) [ "$to" = daemon/kiyot.h ] || [ "$fdir" = cli ] ||
			rule="only cli/ starts the daemon (daemon/daemon.h)" ;;
	esac
	[ -z "$rule" ] || printf '\n  %s includes %s: %s' "$1" "$2" "$rule"
}
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
		[ "$rpart" = kiyot ] && [ "$part" = kiyot ] && layers="$layers$(kiyot_layer "$f" "$r")"
	done
done
if [ -n "$edges" ]; then
	echo "lint: includes across parts (move what both need to common/):$edges"
	status=1
fi
if [ -n "$layers" ]; then
	echo "lint: includes against kiyot's layers (kiyot/README.md):$layers"
	status=1
fi
if [ $only_includes -eq 1 ]; then
	[ $status -eq 0 ] && echo "lint: includes clean"
	exit $status
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
