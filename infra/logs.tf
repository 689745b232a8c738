# One log group per function, made before the function so that Lambda writes to a group
# with retention instead of creating one that keeps logs forever. The roles may write to
# these groups only (iam.tf).

resource "aws_cloudwatch_log_group" "worker" {
  #checkov:skip=CKV_AWS_158:Logs are encrypted with CloudWatch's own key; a customer-managed KMS key would need a key policy for the logs service that this module cannot assume.
  #checkov:skip=CKV_AWS_338:Query logs are operational, not an audit trail; 30 days by default keeps cost down, and log_retention_days raises it.
  name              = "/aws/lambda/${local.worker_name}"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_cloudwatch_log_group" "coordinator" {
  #checkov:skip=CKV_AWS_158:Logs are encrypted with CloudWatch's own key; a customer-managed KMS key would need a key policy for the logs service that this module cannot assume.
  #checkov:skip=CKV_AWS_338:Query logs are operational, not an audit trail; 30 days by default keeps cost down, and log_retention_days raises it.
  name              = "/aws/lambda/${local.coordinator_name}"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}
