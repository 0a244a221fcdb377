/*
 * version.h: the release this tree builds, and release numbers ("MAJOR.MINOR.PATCH") compared.
 *
 * kiyot and cell-agent of one tree carry the same number. An agent says its number in Hello;
 * kiyot works with agents from KIYOT_AGENT_OLDEST on (cells launched from an older cell image,
 * or left running across an upgrade of kiyot), and refuses of an older agent only what it
 * cannot do (kiyot/cells/agent_features.c), naming both numbers.
 */
#ifndef KIYOT_VERSION_H
#define KIYOT_VERSION_H

#include <stdbool.h>

#define KIYOT_VERSION "0.2.0"
/* The oldest agent this kiyot works with: the first release. */
#define KIYOT_AGENT_OLDEST "0.1.0"

/* A release number's parts. */
struct version {
	unsigned major, minor, patch;
};

/* s ("1.2.3", each part 0-65535, a suffix after '-' or '+' ignored) into *v: false when s is
 * no such number. */
bool version_parse(const char *s, struct version *v);
/* <0, 0 or >0 as a is older than, the same as or newer than b. */
int version_cmp(const struct version *a, const struct version *b);
/* Whether the release s is at least the release min (both as version_parse reads them);
 * false when s is not a release number. */
bool version_at_least(const char *s, const char *min);

#endif
