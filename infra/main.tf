# Quiver on AWS Lambda: a coordinator function that plans each query and fans row-group
# buckets out to worker functions, behind a function URL, with scheduled jobs.
#
#   lambda.tf    the two functions
#   iam.tf       their roles, least privilege
#   url.tf       the coordinator's function URL
#   results.tf   where large results spill (an existing prefix or a bucket made here)
#   logs.tf      log groups with retention
#   schedule.tf  EventBridge jobs, dead-letter queue and alarm
#   locals.tf    names and S3 ARNs derived from the variables

# aws, aws-cn or aws-us-gov: S3 ARNs carry the partition but no region or account.
data "aws_partition" "current" {}

locals {
  partition = data.aws_partition.current.partition
}
