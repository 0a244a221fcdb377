#!/bin/sh
# Signature comparison: builds test/ec2sign/probe.c against kiyot's EC2 client, then lets
# check.py (botocore's SigV4 signer, Debian python3-botocore) verify every request it sends.
# Prints "ec2sign: N passed, N failed"; exits non-zero on any mismatch.
#   BUILD=build-x test/ec2sign/run.sh      (default BUILD=build)
set -e
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
PROBE=$BUILD/test/ec2sign-probe
LIBS="libcurl libxml-2.0 jansson libcrypto"

if ! /usr/bin/python3 -c 'import botocore.auth' 2>/dev/null; then
	echo "ec2sign: python3-botocore is missing (apt-get install python3-botocore)" >&2
	exit 1
fi
make --no-print-directory -s BUILD="$BUILD" "$BUILD/libkiyot.a" "$BUILD/libcommon.a"
mkdir -p "$BUILD/test"
# shellcheck disable=SC2046
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -g -pthread -Wall -Wextra -Werror -Wshadow -Wformat=2 \
	-Wstrict-prototypes -Wmissing-prototypes -iquote common -iquote common/oci -iquote kiyot \
	$(pkg-config --cflags $LIBS) -o "$PROBE" test/ec2sign/probe.c \
	"$BUILD/libkiyot.a" "$BUILD/libcommon.a" $(pkg-config --libs $LIBS) -pthread
exec /usr/bin/python3 test/ec2sign/check.py "$PROBE"
