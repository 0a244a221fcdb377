#!/bin/sh
# Runs ec2sim's tests (the AWS CLI and botocore against a local ec2sim, with the stand-in cell
# command: no root needed). Needs Debian's awscli and python3-botocore. Prints a final line
# "ec2sim: N passed, N failed" and exits non-zero on failure. Arguments select tests by name.
set -u
here=$(cd "$(dirname "$0")" && pwd)
for need in /usr/bin/python3 /usr/bin/aws; do
	if [ ! -x "$need" ]; then
		echo "ec2sim: $need is missing: apt-get install -y awscli python3-botocore" >&2
		echo "ec2sim: 0 passed, 1 failed"
		exit 1
	fi
done
cd "$here" || exit 1
PYTHONDONTWRITEBYTECODE=1 exec /usr/bin/python3 "$here/test_ec2sim.py" "$@"
