#!/bin/sh
# make-ami.sh: turns a cell image (build.sh) into an AMI with the AWS CLI, and prints its id.
#
#	deploy/cell-image/make-ami.sh --image FILE --region R [--name N] [--arch amd64|arm64]
#	                              [--bucket B] [--keep-object] [--wait-minutes M]
#
# 1. uploads the image to s3://B/kiyot-cell-images/<name>.raw (B: --bucket, else
#    kiyot-cell-images-<account>-<region>, made if missing);
# 2. imports it as an EBS snapshot (aws ec2 import-snapshot, disk format RAW) and waits for it
#    (the import needs the "vmimport" service role, see AWS's VM Import/Export guide);
# 3. registers the AMI: UEFI boot, ENA, IMDSv2 only, /dev/xvda, hvm;
# 4. removes the uploaded object (unless --keep-object) and prints the AMI id on stdout (the
#    rest goes to stderr). Set it as ec2.imageId in kiyot's config.
# Credentials and profile: the AWS CLI's own (environment, AWS_PROFILE, ~/.aws).
set -eu

IMAGE=
REGION=
NAME=
ARCH=amd64
BUCKET=
KEEP_OBJECT=
WAIT_MINUTES=90

say() { echo "make-ami.sh: $*" >&2; }
die() {
	say "$*"
	exit 1
}
usage() {
	echo "usage: $0 --image FILE --region R [--name N] [--arch amd64|arm64] [--bucket B] [--keep-object] [--wait-minutes M]" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--image) IMAGE=${2:?}; shift 2 ;;
	--region) REGION=${2:?}; shift 2 ;;
	--name) NAME=${2:?}; shift 2 ;;
	--arch) ARCH=${2:?}; shift 2 ;;
	--bucket) BUCKET=${2:?}; shift 2 ;;
	--keep-object) KEEP_OBJECT=1; shift ;;
	--wait-minutes) WAIT_MINUTES=${2:?}; shift 2 ;;
	-h | --help) usage ;;
	*) say "unknown argument $1"; usage ;;
	esac
done
if [ -z "$IMAGE" ] || [ -z "$REGION" ]; then usage; fi
[ -f "$IMAGE" ] || die "no image at $IMAGE: build one with deploy/cell-image/build.sh"
case "$ARCH" in
amd64) EC2_ARCH=x86_64 ;;
arm64) EC2_ARCH=arm64 ;;
*) die "--arch $ARCH: must be amd64 or arm64 (the architecture the image was built for)" ;;
esac
[ -n "$NAME" ] || NAME=kiyot-cell-$ARCH-$(date -u +%Y%m%d-%H%M%S)
command -v aws >/dev/null 2>&1 ||
	die "the AWS CLI is missing: apt-get install awscli (or AWS's installer), then aws configure"

aws_() { aws --region "$REGION" "$@"; }

# who we are: credentials that work, and the account for the default bucket's name
ACCOUNT=$(aws_ sts get-caller-identity --query Account --output text) ||
	die "the AWS CLI has no working credentials for $REGION (above): run aws configure, or set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"

# the import's service role
aws iam get-role --role-name vmimport --query Role.RoleName --output text >/dev/null 2>&1 ||
	die "account $ACCOUNT has no IAM role \"vmimport\" (or these credentials may not read it): create it as AWS's VM Import/Export guide says (trust vmie.amazonaws.com; s3:GetObject and s3:GetBucketLocation on the bucket, ec2:ImportSnapshot and ec2:Describe*), then run this again"

# the bucket
if [ -z "$BUCKET" ]; then
	BUCKET=kiyot-cell-images-$ACCOUNT-$REGION
	if ! aws_ s3api head-bucket --bucket "$BUCKET" >/dev/null 2>&1; then
		say "creating bucket $BUCKET"
		if [ "$REGION" = us-east-1 ]; then
			aws_ s3api create-bucket --bucket "$BUCKET" >/dev/null
		else
			aws_ s3api create-bucket --bucket "$BUCKET" \
				--create-bucket-configuration "LocationConstraint=$REGION" >/dev/null
		fi || die "could not create bucket $BUCKET in $REGION (above): name one you own with --bucket"
	fi
else
	aws_ s3api head-bucket --bucket "$BUCKET" >/dev/null 2>&1 ||
		die "bucket $BUCKET does not exist or these credentials cannot reach it: check its name and region ($REGION), or leave out --bucket to have one made"
fi
KEY=kiyot-cell-images/$NAME.raw

START=$(date +%s)
say "uploading $IMAGE ($(du -h "$IMAGE" | cut -f1) on disk) to s3://$BUCKET/$KEY"
aws_ s3 cp --only-show-errors "$IMAGE" "s3://$BUCKET/$KEY" >&2 ||
	die "the upload to s3://$BUCKET/$KEY failed (above): check s3:PutObject on the bucket and the network, then run this again"

say "importing s3://$BUCKET/$KEY as an EBS snapshot"
TASK=$(aws_ ec2 import-snapshot --description "kiyot cell image $NAME" \
	--disk-container "Description=$NAME,Format=RAW,UserBucket={S3Bucket=$BUCKET,S3Key=$KEY}" \
	--tag-specifications "ResourceType=import-snapshot-task,Tags=[{Key=Name,Value=$NAME}]" \
	--query ImportTaskId --output text) ||
	die "import-snapshot was refused (above): the role vmimport must be able to read s3://$BUCKET (s3:GetObject, s3:GetBucketLocation) and the image must be a raw disk"

SNAP=
DEADLINE=$(($(date +%s) + WAIT_MINUTES * 60))
LAST=
while :; do
	# Status, Progress, StatusMessage, SnapshotId (tab-separated; "None" when absent)
	STATE=$(aws_ ec2 describe-import-snapshot-tasks --import-task-ids "$TASK" \
		--query 'ImportSnapshotTasks[0].SnapshotTaskDetail.[Status,Progress,StatusMessage,SnapshotId]' \
		--output text) || die "describe-import-snapshot-tasks $TASK failed (above); the import may still be going: check it with that command"
	STATUS=$(echo "$STATE" | cut -f1)
	case "$STATUS" in
	completed)
		SNAP=$(echo "$STATE" | cut -f4)
		break
		;;
	deleted | deleting | error)
		die "the import $TASK ended $STATUS: $(echo "$STATE" | cut -f3). A raw image of build.sh imports as is; check the vmimport role's access to s3://$BUCKET/$KEY"
		;;
	esac
	if [ "$STATE" != "$LAST" ]; then
		say "import $TASK: $(echo "$STATE" | cut -f1-3 | tr '\t' ' ')"
		LAST=$STATE
	fi
	[ "$(date +%s)" -lt "$DEADLINE" ] ||
		die "the import $TASK did not finish within $WAIT_MINUTES minutes; when describe-import-snapshot-tasks says completed, register its snapshot (or run this again with --wait-minutes)"
	sleep 15
done
case "$SNAP" in
snap-*) ;;
*) die "the import $TASK completed without a snapshot id ($SNAP)" ;;
esac
say "snapshot $SNAP"

AMI=$(aws_ ec2 register-image --name "$NAME" --description "Kiyot cell image ($ARCH)" \
	--architecture "$EC2_ARCH" --boot-mode uefi --ena-support --imds-support v2.0 \
	--virtualization-type hvm --root-device-name /dev/xvda \
	--block-device-mappings "DeviceName=/dev/xvda,Ebs={SnapshotId=$SNAP,VolumeType=gp3,DeleteOnTermination=true}" \
	--tag-specifications "ResourceType=image,Tags=[{Key=Name,Value=$NAME},{Key=kiyot:cell-image,Value=$ARCH}]" \
	--query ImageId --output text) ||
	die "register-image failed (above); the snapshot $SNAP is there: fix the cause (a taken --name? ec2:RegisterImage?) and register it, or run this again with another --name"

if [ -z "$KEEP_OBJECT" ]; then
	aws_ s3 rm --only-show-errors "s3://$BUCKET/$KEY" >&2 ||
		say "could not remove s3://$BUCKET/$KEY (above): it is no longer needed; remove it yourself"
fi
say "$AMI ($NAME, $ARCH, snapshot $SNAP) in $REGION, made in $(($(date +%s) - START)) s; set ec2.imageId: $AMI"
echo "$AMI"
