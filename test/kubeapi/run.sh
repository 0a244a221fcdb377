#!/bin/sh
# Checks the local Kubernetes API endpoint (kubeapi.py) with kubectl and python3-kubernetes.
# Prints "kubeapi: N passed, N failed" last; exits non-zero when anything failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
if ! command -v kubectl >/dev/null || ! "$py" -c "import kubernetes" 2>/dev/null; then
	echo "kubeapi: needs kubectl and python3-kubernetes: run deploy/install-deps.sh" >&2
	echo "kubeapi: 0 passed, 1 failed"
	exit 1
fi
out=$(cd "$here" && "$py" -m unittest -v test_kubeapi 2>&1)
echo "$out"
passed=$(echo "$out" | grep -c '\.\.\. ok$')
failed=$(echo "$out" | grep -c -E '\.\.\. (FAIL|ERROR)$')
ran=$(echo "$out" | sed -n 's/^Ran \([0-9]*\) test.*/\1/p')
[ -z "$ran" ] && failed=$((failed + 1))
echo "kubeapi: $passed passed, $failed failed"
[ "$failed" = 0 ]
