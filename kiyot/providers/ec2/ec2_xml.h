/*
 * ec2_xml.h: EC2's XML answers into ec2.h's structures, with libxml2.
 *
 * Elements are looked up by local name, whatever their namespace, and only where EC2 puts
 * them (an instance's own privateIpAddress, not its network interfaces'). Documents larger
 * than EC2_MAX_RESPONSE or nested deeper than EC2_MAX_XML_DEPTH are refused; no entity is
 * expanded and nothing is fetched from the network. Malformed answers are EPROTO.
 */
#ifndef KIYOT_EC2_XML_H
#define KIYOT_EC2_XML_H

#include <stddef.h>

#include "ec2.h"

/*
 * The first <Error> of an error body (<Response><Errors><Error> or <ErrorResponse><Error>):
 * *code and *message (the caller frees them; *message may be NULL). ENOENT when the body holds
 * no error, EPROTO when it is not XML.
 */
int ec2_xml_error(const char *body, size_t len, char **code, char **message, struct err *err);

/* The first instance of a RunInstancesResponse. */
int ec2_xml_run_instances(const char *body, size_t len, struct ec2_instance *out, struct err *err);

/* The instance ids a TerminateInstancesResponse lists (at most EC2_MAX_IDS_PER_CALL) into *ids
 * (NULL-terminated, the caller frees each and the array; NULL when none). */
int ec2_xml_terminate_instances(const char *body, size_t len, char ***ids, size_t *n,
				struct err *err);

/*
 * Appends the instances of one DescribeInstancesResponse page to *arr (*n used, *cap
 * allocated, at most EC2_MAX_ITEMS in all); *next_token is the page's nextToken or NULL.
 */
int ec2_xml_describe_instances(const char *body, size_t len, struct ec2_instance **arr, size_t *n,
			       size_t *cap, char **next_token, struct err *err);

/* The same for a DescribeInstanceTypesResponse page. */
int ec2_xml_instance_types(const char *body, size_t len, struct ec2_type_info **arr, size_t *n,
			   size_t *cap, char **next_token, struct err *err);

/* The same for a DescribeSpotPriceHistoryResponse page (every entry, not reduced). */
int ec2_xml_spot_prices(const char *body, size_t len, struct ec2_spot_price **arr, size_t *n,
			size_t *cap, char **next_token, struct err *err);

/* The same for a DescribeSubnetsResponse page (subnets without an id or zone are skipped). */
int ec2_xml_subnets(const char *body, size_t len, struct ec2_subnet **arr, size_t *n, size_t *cap,
		    char **next_token, struct err *err);

/* Parses an EC2 timestamp ("2020-12-01T10:00:00.000Z") into ns since the epoch; -1 if bad or
 * outside 1970 to 2262 (what 64 bits of nanoseconds hold). */
int64_t ec2_xml_time(const char *s);

#endif
