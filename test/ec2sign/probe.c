/*
 * probe: sends a fixed set of EC2 calls through kiyot's EC2 client to an endpoint, so that
 * test/ec2sign/check.py can recompute each request's SigV4 signature with botocore.
 *
 *	probe <endpoint> <region>      credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 *	                               AWS_SESSION_TOKEN
 *
 * Exits 0 when every call succeeded (the checking server answers AuthFailure to a request
 * whose signature differs from botocore's), 1 otherwise, printing the first error.
 */
#include <stdio.h>
#include <string.h>

#include "providers/ec2/awscreds.h"
#include "providers/ec2/ec2.h"

/* The calls: filters, user data and tags with characters that need percent-encoding. */
static int probe_calls(struct ec2_client *c, struct err *err)
{
	static const char user_data[] = "#!/bin/sh\n{\"cell\": \"caf\xc3\xa9 \\u00e9\", "
					"\"args\": [\"a b\", \"x=1&y=2\", \"~/+*%\"]}\n";
	const char *cluster[] = { "c-1234 +/=&~" };
	const char *states[] = { "pending", "running" };
	const char *sgs[] = { "sg-0a1b2c3d", "sg-0e0f0a0b" };
	const char *ids[] = { "i-0123456789abcdef0", "i-0fedcba9876543210" };
	struct ec2_filter filters[] = { { "tag:kiyot.elotl.co/cluster-id", cluster, 1 },
					{ "instance-state-name", states, 2 } };
	struct ec2_describe_query q = { filters, 2, NULL, 0, 50 };
	struct ec2_tags tags = EC2_TAGS_INIT;
	struct ec2_run_spec spec = { .client_token = "kiyot-6f1c2a4e-0000-4000-8000-000000000001",
				     .image_id = "ami-0abcdef1234567890",
				     .instance_type = "t3.nano",
				     .subnet_id = "subnet-0a1b2c3d",
				     .security_group_ids = sgs,
				     .n_security_group_ids = 2,
				     .iam_instance_profile = "arn:aws:iam::123456789012:"
							     "instance-profile/kiyot-cell",
				     .user_data = user_data,
				     .user_data_len = sizeof(user_data) - 1,
				     .tags = &tags,
				     .spot = true };
	struct ec2_pod_ident id = { .cluster_id = "c-1234",
				    .cell_id = "cell-1",
				    .pod_name = "web",
				    .pod_namespace = "shop",
				    .pod_uid = "uid-1" };
	struct ec2_instance *arr = NULL, in;
	struct ec2_spot_price *prices = NULL;
	size_t n = 0;
	int ret;

	ret = ec2_describe_instances(c, &q, &arr, &n, NULL, err);
	if (ret < 0)
		return ret;
	ec2_instances_free(arr, n);
	ret = ec2_pod_tags(&id, &tags, err);
	if (ret < 0)
		return ret;
	ec2_tags_add(&tags, "note", "caf\xc3\xa9 a+b=c&d/e~f*g");
	ret = ec2_run_instance(c, &spec, &in, NULL, err);
	if (ret == 0) {
		ec2_instance_release(&in);
		ret = ec2_create_tags(c, ids, 2, &tags, NULL, err);
	}
	ec2_tags_release(&tags);
	if (ret < 0)
		return ret;
	ret = ec2_terminate_instances(c, ids, 2, (enum ec2_term[2]){ EC2_TERM_LEFT }, NULL, err);
	if (ret < 0)
		return ret;
	ret = ec2_describe_spot_prices(c, (const char *[]){ "t3.nano" }, 1, "us-east-1a", &prices,
				       &n, NULL, err);
	if (ret < 0)
		return ret;
	ec2_spot_prices_free(prices, n);
	return 0;
}

int main(int argc, char **argv)
{
	struct err err = ERR_INIT;
	struct aws_creds cr = { 0 };
	struct aws_creds_provider *prov;
	struct ec2_config cfg = { 0 };
	struct ec2_client *c = NULL;
	int ret;

	if (argc != 3) {
		fprintf(stderr, "usage: probe <endpoint> <region>\n");
		return 2;
	}
	if (aws_creds_from_env(&cr, &err) < 0) {
		fprintf(stderr, "probe: %s\n", err.msg);
		return 2;
	}
	prov = aws_creds_provider_new_static(&cr);
	aws_creds_release(&cr);
	cfg.endpoint = argv[1];
	cfg.region = argv[2];
	cfg.creds = prov;
	cfg.max_attempts = 1;
	if (ec2_client_new(&cfg, &c, &err) < 0) {
		fprintf(stderr, "probe: %s\n", err.msg);
		return 2;
	}
	ret = probe_calls(c, &err);
	if (ret < 0)
		fprintf(stderr, "probe: %s\n", err.msg);
	ec2_client_free(c);
	aws_creds_provider_free(prov);
	return ret < 0 ? 1 : 0;
}
