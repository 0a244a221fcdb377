/*
 * netguard.h: what an address is to a fetch made on behalf of someone else (a registry's
 * redirect, a token realm), which must not be turned against the machine that makes it: its
 * loopback, its link-local neighbours (the instance metadata service at 169.254.169.254),
 * multicast and broadcast groups, the unspecified address (which reaches this host) and the
 * addresses of its own interfaces. No name resolution: callers pass the address a connection
 * is about to be made to (httpc.h's guard sees each one, on every hop).
 *
 *	enum netguard_kind k = netguard_kind_of(sa);
 *	if (k != NETGUARD_OUTSIDE)
 *		... refuse, naming netguard_kind_name(k) ...
 *
 * Thread safe; netguard_kind_of reads the interfaces' addresses at each call.
 */
#ifndef KIYOT_NETGUARD_H
#define KIYOT_NETGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

enum netguard_kind {
	NETGUARD_OUTSIDE = 0, /* none of the below: another host */
	NETGUARD_LOOPBACK,    /* 127.0.0.0/8, ::1 */
	NETGUARD_LINK_LOCAL,  /* 169.254.0.0/16 (instance metadata), fe80::/10 */
	NETGUARD_METADATA,    /* an instance metadata service outside link-local: fd00:ec2::254 */
	NETGUARD_MULTICAST,   /* 224.0.0.0/4, ff00::/8 */
	NETGUARD_BROADCAST,   /* 255.255.255.255 */
	NETGUARD_UNSPECIFIED, /* 0.0.0.0/8, :: (a connection there reaches this host) */
	NETGUARD_OWN,	      /* the address of one of this host's interfaces */
};

/* What sa (AF_INET or AF_INET6; an IPv4-mapped IPv6 address as its IPv4 address) is. Another
 * family is NETGUARD_UNSPECIFIED: nothing a guarded fetch should reach. */
enum netguard_kind netguard_kind_of(const struct sockaddr *sa);
/* The kind in words, for errors: "a loopback address". */
const char *netguard_kind_name(enum netguard_kind k);
/* Whether a and b are the same address and port (an IPv4-mapped IPv6 address equals its IPv4
 * address). */
bool netguard_same(const struct sockaddr *a, const struct sockaddr *b);
/* sa as "127.0.0.1:8080" or "[::1]:443" into out (always terminated). */
void netguard_format(const struct sockaddr *sa, char *out, size_t size);

#endif
