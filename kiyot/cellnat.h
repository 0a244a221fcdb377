/*
 * cellnat.h: cells.masquerade, forwarding and NAT on the node for local cells (cellnat.c).
 */
#ifndef KIYOT_CELLNAT_H
#define KIYOT_CELLNAT_H

#include "err.h"

/* Turns on IPv4 forwarding and adds the cells' MASQUERADE and FORWARD rules (idempotent). */
int cellnat_setup(const char *bridge, const char *cidr, struct err *err);

#endif
